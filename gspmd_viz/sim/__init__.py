"""Simulated TPU meshes: torus topologies, collective algorithms at link level, closed forms.

numpy only (``replay`` imports jax lazily to run schedules on the devices it is given); it imports
neither the compiler package nor viz. ``registry`` lists every algorithm once.
"""

from gspmd_viz.sim import execute, placement, replay, step_timeline, training
from gspmd_viz.sim.algorithms import Schedule
from gspmd_viz.sim.chips import CHIPS, Chip, chip
from gspmd_viz.sim.cost import collective_time, lower_bound
from gspmd_viz.sim.registry import (
    ALGORITHMS,
    KINDS,
    Algorithm,
    algorithms,
    applicable,
    closed_form,
    default_algorithm,
    describe,
    schedule,
)
from gspmd_viz.sim.rings import ring_order
from gspmd_viz.sim.simulate import Timeline, simulate
from gspmd_viz.sim.step_timeline import StepTimeline, simulate_step
from gspmd_viz.sim.topology import PRESETS, Topology, preset, torus

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "CHIPS",
    "KINDS",
    "PRESETS",
    "Chip",
    "Schedule",
    "Timeline",
    "Topology",
    "algorithms",
    "applicable",
    "chip",
    "closed_form",
    "default_algorithm",
    "describe",
    "execute",
    "collective_time",
    "lower_bound",
    "placement",
    "preset",
    "replay",
    "ring_order",
    "schedule",
    "simulate",
    "simulate_step",
    "step_timeline",
    "StepTimeline",
    "torus",
    "training",
]
