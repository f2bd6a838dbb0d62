"""Simulated TPU meshes: torus topologies, collective algorithms at link level, closed forms.

numpy only (``replay`` imports jax lazily to run schedules on the devices it is given); it imports
neither the compiler package nor viz. Folders by idea:

- ``collectives/``: topologies and chips, collective algorithms (``registry`` lists every one
  once), the link-level simulator, closed forms, logical meshes placed on a pod;
- ``pipelines/``: pipeline schedules as data and their dependency-driven timing;
- ``steps/``: a whole training step on a pod (its collectives link by link, memory, step time).

The modules most used by name stay reachable as ``gv.sim.<module>``.
"""

from gspmd_viz.sim.collectives import (
    chips,
    cost,
    device_order,
    execute,
    in_flight,
    logarithmic,
    placement,
    presets,
    registry,
    replay,
    rings,
    topology,
)
from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule
from gspmd_viz.sim.collectives.chips import CHIPS, Chip, chip
from gspmd_viz.sim.collectives.cost import collective_time, latency_bound, lower_bound
from gspmd_viz.sim.collectives.device_order import DeviceOrder, place
from gspmd_viz.sim.collectives.presets import GENERATIONS, chip_of
from gspmd_viz.sim.collectives.presets import preset as preset
from gspmd_viz.sim.collectives.registry import (
    ALGORITHMS,
    KINDS,
    Algorithm,
    algorithms,
    applicable,
    choose,
    closed_form,
    default_algorithm,
    describe,
    schedule,
)
from gspmd_viz.sim.collectives.rings import ring_order
from gspmd_viz.sim.collectives.simulate import Timeline, simulate
from gspmd_viz.sim.collectives.topology import PRESETS, Topology, torus
from gspmd_viz.sim.pipelines import pipeline, pipeline_engine, pipeline_timing
from gspmd_viz.sim.steps import step_timeline, training
from gspmd_viz.sim.steps.step_timeline import StepTimeline, simulate_step

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "CHIPS",
    "GENERATIONS",
    "KINDS",
    "PRESETS",
    "Chip",
    "DeviceOrder",
    "CollectiveSchedule",
    "Timeline",
    "Topology",
    "algorithms",
    "applicable",
    "chip",
    "chip_of",
    "choose",
    "chips",
    "cost",
    "closed_form",
    "default_algorithm",
    "describe",
    "device_order",
    "execute",
    "in_flight",
    "collective_time",
    "latency_bound",
    "logarithmic",
    "lower_bound",
    "pipeline",
    "pipeline_engine",
    "pipeline_timing",
    "place",
    "placement",
    "presets",
    "preset",
    "registry",
    "replay",
    "ring_order",
    "rings",
    "schedule",
    "simulate",
    "simulate_step",
    "step_timeline",
    "StepTimeline",
    "topology",
    "torus",
    "training",
]
