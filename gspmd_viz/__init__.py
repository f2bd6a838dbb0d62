"""gspmd_viz: watch a GSPMD-style compiler split one program across many devices."""

from gspmd_viz import pipeline, sim, xla
from gspmd_viz.core.annotate import mesh_split
from gspmd_viz.core.collective import Collective
from gspmd_viz.core.devices import use_cpu_devices
from gspmd_viz.core.halo import halo_plan
from gspmd_viz.core.mesh import Mesh
from gspmd_viz.core.program import trace
from gspmd_viz.core.propagate import propagate
from gspmd_viz.core.reshard import reshard_plan
from gspmd_viz.core.sharding import Sharding
from gspmd_viz.core.training import weight_update_sharding
from gspmd_viz.explain import explain
from gspmd_viz.partition_on_chip import partition

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
