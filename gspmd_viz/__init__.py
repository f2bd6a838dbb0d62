"""gspmd_viz: watch a GSPMD-style compiler split one program across many devices."""

from gspmd_viz.core.annotate import mesh_split
from gspmd_viz.core.devices import use_cpu_devices
from gspmd_viz.core.mesh import Mesh
from gspmd_viz.core.program import trace
from gspmd_viz.core.sharding import Sharding

__all__ = ["Mesh", "Sharding", "mesh_split", "trace", "use_cpu_devices"]
