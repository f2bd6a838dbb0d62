"""Simulated TPU meshes: torus topologies, collective algorithms at link level, closed forms.

numpy only (``replay`` imports jax lazily to run schedules on CPU devices); never imports viz.
"""

from gspmd_viz.sim import execute, replay
from gspmd_viz.sim.algorithms import ALGORITHMS, Schedule, algorithms, schedule
from gspmd_viz.sim.chips import CHIPS, Chip, chip
from gspmd_viz.sim.cost import closed_form, collective_time, lower_bound
from gspmd_viz.sim.rings import ring_order
from gspmd_viz.sim.simulate import Timeline, default_algorithm, simulate
from gspmd_viz.sim.topology import PRESETS, Topology, preset, torus

__all__ = [
    "ALGORITHMS",
    "CHIPS",
    "PRESETS",
    "Chip",
    "Schedule",
    "Timeline",
    "Topology",
    "algorithms",
    "chip",
    "closed_form",
    "default_algorithm",
    "execute",
    "collective_time",
    "lower_bound",
    "preset",
    "replay",
    "ring_order",
    "schedule",
    "simulate",
    "torus",
]
