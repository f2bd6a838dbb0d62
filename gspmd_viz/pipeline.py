"""Pipeline parallelism, public namespace: ``gv.pipeline.schedule(...)`` and friends.

Schedules, their simulation and closed forms live in ``gspmd_viz.sim`` (numpy only); executing a
schedule on jax devices lives in ``gspmd_viz.strategies.pipeline_run``; GSPMD's own pipelining, an
ordinary annotated program the partitioner pipelines, in ``gspmd_viz.strategies.gspmd_pipeline``.
"""

from gspmd_viz.sim.pipelines.pipeline import (
    SCHEDULES,
    PipelineSchedule,
    bubble_fraction,
    makespan,
    schedule,
)
from gspmd_viz.sim.pipelines.pipeline_engine import ScheduleDeadlock
from gspmd_viz.sim.pipelines.pipeline_timing import PipelineTimeline, Placement, place, simulate
from gspmd_viz.strategies.gspmd_pipeline import gspmd_iterations, gspmd_pipeline, gspmd_sequential
from gspmd_viz.strategies.pipeline_run import run, sequential_loss

__all__ = [
    "SCHEDULES",
    "Placement",
    "PipelineTimeline",
    "PipelineSchedule",
    "ScheduleDeadlock",
    "bubble_fraction",
    "gspmd_iterations",
    "gspmd_pipeline",
    "gspmd_sequential",
    "makespan",
    "place",
    "run",
    "schedule",
    "sequential_loss",
    "simulate",
]
