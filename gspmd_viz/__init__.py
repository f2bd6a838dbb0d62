"""gspmd_viz: watch a GSPMD-style compiler split one program across many devices."""

from gspmd_viz import pipeline, sim, xla
from gspmd_viz.core.halo.arithmetic import halo_plan
from gspmd_viz.core.program.trace import trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.devices import use_cpu_devices
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.explain import explain
from gspmd_viz.partition_on_chip import partition
from gspmd_viz.strategies.weight_update import weight_update_sharding

__all__ = [
    "Collective",
    "Mesh",
    "Sharding",
    "explain",
    "mesh_split",
    "partition",
    "pipeline",
    "propagate",
    "reshard_plan",
    "sim",
    "trace",
    "use_cpu_devices",
    "weight_update_sharding",
    "xla",
    "halo_plan",
]
