"""A partitioned step's collectives on a pod, link by link, every group of each one at once.

``simulate_step(records, mesh, topo)`` places the logical mesh on the pod (``placement.place``).
For each record (kind, mesh axes, S bytes per chip[, count]) it builds the collective's schedule
on the sub-torus of its axes (``registry.schedule``, the algorithm ``placement.collective_seconds``
prices), copies it onto every group of chips (``placement.group_chips``) and routes all copies on
the pod's own links (``simulate.time_steps``). Groups that share links (the strided piece of a
dim another axis split first) all load them, so a step lasts as long as the pod's busiest link,
not one group's. Collectives run one after another; a record's count (layers, loop trips)
repeats it in the total, and the timeline replays it once.

S is the S of the wire formulas (all-reduce S, all-gather S_out, reduce-scatter S_in,
all-to-all S); chunks are S / chunks-per-chip bytes, fractions allowed as in the closed forms.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gspmd_viz.sim.collectives import placement as pl
from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule, Step
from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.registry import KINDS, default_algorithm, schedule
from gspmd_viz.sim.collectives.simulate import PhaseRecord, StepRecord, phase_records, time_steps
from gspmd_viz.sim.collectives.topology import Topology
from gspmd_viz.units import format_bytes, format_time


@dataclasses.dataclass(frozen=True)
class CollectiveRun:
    """One record of the step, simulated once on the whole pod."""

    index: int
    kind: str
    axes: tuple[str, ...]
    nbytes: float  # S per chip
    count: int  # runs per step
    sub: Topology  # the chips of one group, as a torus
    groups: int
    algorithm: str  # "" when nothing moves (one chip per group, or S = 0)
    time_s: float  # one run, link by link on the pod
    closed_form_s: float  # placement.collective_seconds on `sub`: one group alone
    link_bytes: float  # bytes summed over every link of the pod, one run
    first_step: int
    n_steps: int

    @property
    def label(self) -> str:
        return f"{self.kind} over {','.join(self.axes) or 'no axes'}, {format_bytes(self.nbytes)}"


@dataclasses.dataclass(frozen=True, eq=False)
class StepTimeline:
    """Every collective of a step on the pod; the torus widget's frames() replays `steps`."""

    topo: Topology
    chip: Chip
    placement: dict
    collectives: list[CollectiveRun]
    steps: list[StepRecord]  # every run's steps, one collective after another
    phases: list[PhaseRecord]  # one per (collective, algorithm phase), named after both
    kind: str = "training step"

    @property
    def algorithm(self) -> str:  # read by the torus view's title
        return "(" + pl.describe(self.placement, self.topo).split(": ", 1)[1] + ")"

    @property
    def time_s(self) -> float:
        """The step's communication: every collective's time times its count."""
        return float(sum(c.count * c.time_s for c in self.collectives))

    def summary(self) -> str:
        lines = [
            f"{len(self.collectives)} collectives on {self.topo.describe()}, {self.chip.name}; "
            f"placed {pl.describe(self.placement, self.topo)}",
            f"  communication per step {format_time(self.time_s)}",
        ]
        for c in self.collectives:
            shape = "x".join(map(str, c.sub.shape))
            how = f"{c.algorithm or 'nothing to move'} on {c.groups} x {shape} chips"
            times = f"{format_time(c.time_s)} (one group alone {format_time(c.closed_form_s)})"
            lines.append(f"  {c.index + 1}. {c.label} x{c.count}: {how}: {times}")
        return "\n".join(lines)

    def __repr__(self):
        return (
            f"StepTimeline({len(self.collectives)} collectives, {len(self.steps)} steps on "
            f"{'x'.join(map(str, self.topo.shape))}: {format_time(self.time_s)})"
        )


def _check_record(rec) -> tuple[str, tuple[str, ...], float, int]:
    if not isinstance(rec, (tuple, list)) or len(rec) not in (3, 4):
        raise ValueError(
            f"a record is (kind, axes, bytes) or (kind, axes, bytes, count); got {rec!r}"
        )
    kind, axes, nbytes, count = (*rec, 1) if len(rec) == 3 else rec
    if kind not in KINDS:
        raise ValueError(
            f"record {rec!r}: the link-level replay simulates {', '.join(KINDS)}; a "
            f"{kind!r} has no schedule here (price it with placement.collective_seconds)"
        )
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float, np.number)) or nbytes < 0:
        raise ValueError(f"record {rec!r}: bytes must be a number >= 0")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"record {rec!r}: count must be a positive integer")
    return kind, axes, float(nbytes), int(count)


def on_pod(sched: CollectiveSchedule, chips: np.ndarray, topo: Topology) -> CollectiveSchedule:
    """`sched` (on one group's sub-torus) run by every group at once: chips [groups, sub chips]."""
    groups, spread = len(chips), {}

    def ids(a):  # sub-torus ids -> physical ids, group-major; one array per input array, so
        if id(a) not in spread:  # steps sharing routes keep sharing them (simulate._RouteCache)
            spread[id(a)] = (a, chips[:, a].ravel())
        return spread[id(a)][1]

    steps = [
        Step(st.phase, ids(st.src), ids(st.dst), np.tile(st.chunk, groups),
             np.tile(st.count, groups), np.tile(st.reduce, groups), np.tile(st.dst_chunk, groups))
        for st in sched.steps
    ]  # fmt: skip
    return CollectiveSchedule(
        sched.kind, sched.algorithm, topo, sched.n_chunks, sched.phases, steps
    )


def _run_one(i, rec, where, topo, spec, first_step):
    """(CollectiveRun, its step records, its phase records) for record number i."""
    kind, axes, nbytes, count = _check_record(rec)
    sub = pl.sub_torus(where, axes, topo)
    chips = pl.group_chips(where, axes, topo)
    closed = pl.collective_seconds(kind, nbytes, sub, spec)
    if sub.n_chips == 1 or nbytes == 0:
        run = CollectiveRun(i, kind, axes, nbytes, count, sub, len(chips), "", 0.0, closed, 0.0,
                            first_step, 0)  # fmt: skip
        return run, [], []
    sched = on_pod(schedule(sub, kind, default_algorithm(sub, kind)), chips, topo)
    chunk = nbytes / sched.n_chunks
    steps = time_steps(sched, chunk, spec)
    total = float(sum(r.link_bytes.sum() for r in steps))
    run = CollectiveRun(i, kind, axes, nbytes, count, sub, len(chips), sched.algorithm,
                        float(sum(r.time_s for r in steps)), closed, total, first_step,
                        len(steps))  # fmt: skip
    return run, steps, phase_records(sched, steps, chunk)


def simulate_step(records, mesh: dict, topo: Topology, chip: str | Chip = "tpu-v3") -> StepTimeline:
    """Simulate a step's collectives [(kind, axes, S bytes[, count])] with `mesh` (axis -> size,
    major first) placed on `topo`, each with all its groups at once on the pod's links."""
    spec = get_chip(chip)
    where = pl.place(mesh, topo)
    runs, steps, phases, t = [], [], [], 0.0
    for i, rec in enumerate(records):
        run, own, own_phases = _run_one(i, rec, where, topo, spec, len(steps))
        runs.append(run)
        offset = len(phases)
        for r in own:
            label = f"{i + 1}/{len(records)} {run.label}: {r.phase_name}"
            steps.append(dataclasses.replace(r, index=len(steps), phase=r.phase + offset,
                                             phase_name=label, start_s=t))  # fmt: skip
            t += r.time_s
        for p in own_phases:
            name = f"{i + 1}/{len(records)} {run.label}: {p.name}"
            phases.append(
                dataclasses.replace(p, name=name, first_step=p.first_step + run.first_step)
            )
    return StepTimeline(topo, spec, where, runs, steps, phases)
