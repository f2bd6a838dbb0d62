"""Time a pipeline schedule: dependency-driven simulation, activation memory, TPU placement.

``simulate(sched, forward, backward, weight, transfer)`` takes the times of ONE microbatch
through ONE whole stage (a chunk takes 1/V of them) and returns a ``PipelineTimeline``: when each
action ran, the makespan, the bubble fraction and each stage's activation memory over time.
``place(stages, topo, ...)`` puts stages on chips of a ``gv.sim`` topology and prices every
stage-to-stage transfer with that chip's ICI link (alpha per hop + bytes / beta); pass its
``transfer_matrix(nbytes)`` as ``transfer=`` to simulate on that mesh.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.topology import Topology
from gspmd_viz.sim.pipelines.pipeline import PipelineSchedule
from gspmd_viz.sim.pipelines.pipeline_engine import KINDS, start_times


@dataclasses.dataclass(frozen=True, eq=False)
class PipelineTimeline:
    schedule: PipelineSchedule
    start: np.ndarray  # per action (same order as the schedule's arrays), seconds
    end: np.ndarray
    forward: float
    backward: float
    weight: float

    @property
    def makespan(self) -> float:
        return float(self.end.max(initial=0.0))

    @property
    def busy(self) -> np.ndarray:
        """[S] time each stage spends computing."""
        s = self.schedule
        return np.bincount(s.stage, weights=self.end - self.start, minlength=s.stages)

    @property
    def bubble_fraction(self) -> float:
        """Idle share of stage-time: idle / (S · makespan), one rounding (so exact ratios of
        dyadic times come out bit-equal to the closed form)."""
        total = self.schedule.stages * self.makespan
        return float((total - self.busy.sum()) / total) if total else 0.0

    def memory(self, stage: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, microbatch-activations held from each time on) on one stage, a step curve.

        A chunk's activations count 1/V of a microbatch's; they are taken when its F starts
        and freed when the action that last needs them (B, or W when the schedule has W) ends.
        """
        s = self.schedule
        on = s.stage == stage
        last = KINDS.index("W" if s.has_weight_actions else "B")
        take = on & (s.kind == KINDS.index("F"))
        free = on & (s.kind == last)
        times = np.concatenate([self.start[take], self.end[free]])
        delta = np.concatenate([np.full(take.sum(), 1.0), np.full(free.sum(), -1.0)])
        order = np.lexsort((delta, times))  # at equal times, free before taking
        times, held = times[order], np.cumsum(delta[order]) / s.virtual
        last = np.append(times[1:] != times[:-1], True)  # one step per instant: its final count
        return np.concatenate([[0.0], times[last]]), np.concatenate([[0.0], held[last]])

    @property
    def peak_activations(self) -> tuple[float, ...]:
        """Per stage: the most microbatches' activations held at once."""
        return tuple(float(self.memory(i)[1].max()) for i in range(self.schedule.stages))

    def summary(self) -> str:
        s = self.schedule
        peak = ", ".join(f"{p:g}" for p in self.peak_activations)
        return (
            f"{s.name}, S={s.stages}, M={s.microbatches}, V={s.virtual}, F:B:W = "
            f"{self.forward:g}:{self.backward:g}:{self.weight:g}: makespan {self.makespan:.4g}, "
            f"bubble {self.bubble_fraction:.1%}, peak activations per stage [{peak}]"
        )

    def __repr__(self):
        return f"PipelineTimeline({self.summary()})"


def _check_time(label: str, value, allow_zero: bool) -> float:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{label} must be a finite number {need}, got {value!r}")
    return float(value)


def _transfer_matrix(transfer, stages: int) -> np.ndarray:
    if np.isscalar(transfer):
        t = _check_time("transfer", transfer, allow_zero=True)
        return np.full((stages, stages), t)
    m = np.asarray(transfer, float)
    if m.shape != (stages, stages) or not np.all(np.isfinite(m)) or (m < 0).any():
        raise ValueError(
            f"transfer must be one time >= 0 or an [S, S] = [{stages}, {stages}] matrix of "
            f"times >= 0 (e.g. Placement.transfer_matrix), got shape {m.shape}"
        )
    return m


def simulate(
    sched: PipelineSchedule, forward: float = 1.0, backward: float = 2.0, weight: float = 0.0,
    transfer=0.0,
) -> PipelineTimeline:  # fmt: skip
    """Run the schedule's per-stage orders, each action as soon as its inputs arrive.

    Times are for one microbatch through one whole stage. Without W actions a B also does the
    weight gradient, so it takes backward + weight; with them, B takes backward and W weight.
    """
    f = _check_time("forward", forward, allow_zero=False)
    b = _check_time("backward", backward, allow_zero=False)
    w = _check_time("weight", weight, allow_zero=True)
    wire = _transfer_matrix(transfer, sched.stages)
    per_kind = np.array([f, b if sched.has_weight_actions else b + w, w]) / sched.virtual
    start, end = start_times(sched.stage, sched.kind, sched.microbatch, sched.chunk,
                             sched.stages, sched.virtual, per_kind[sched.kind], wire)  # fmt: skip
    return PipelineTimeline(sched, start, end, f, b, w)


# ----- placement on a simulated TPU mesh --------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """Stage i runs on chip ``chips[i]`` of ``topo``; transfers cost ``chip``'s ICI links."""

    topo: Topology
    chips: tuple[int, ...]
    chip: Chip

    @property
    def hops(self) -> np.ndarray:
        """[S, S] hops of the dimension-ordered route between the chips of two stages."""
        c = np.array(self.chips)
        return self.topo.distance(c[:, None], c[None, :])

    def transfer_time(self, nbytes: float, hops) -> np.ndarray:
        """Alpha-beta time of a point-to-point message: hops · alpha + bytes / beta."""
        beta, alpha = self.chip.ici_link_bandwidth_Bps, self.chip.hop_latency_s
        hops = np.asarray(hops)
        return np.where(hops > 0, hops * alpha + float(nbytes) / beta, 0.0)

    def transfer_matrix(self, nbytes: float) -> np.ndarray:
        """[S, S] seconds to send `nbytes` (one microbatch's activation) between two stages."""
        return self.transfer_time(nbytes, self.hops)

    def routes(self, sched: PipelineSchedule) -> list[tuple[int, int, np.ndarray]]:
        """(src stage, dst stage, link ids crossed) of every stage pair the schedule uses."""
        pairs = sorted({(a, b) for _, a, b, *_ in sched.sends if a != b})
        out = []
        for a, b in pairs:
            _, links, _ = self.topo.route([self.chips[a]], [self.chips[b]])
            out.append((a, b, links))
        return out


def ring_chips(topo: Topology, stages: int) -> tuple[int, ...]:
    """Chips for S stages in a closed walk of neighbours: a 1-D ring, or a snake on a 2-D torus."""
    if topo.ndim == 1 or topo.shape[1:] == (1,) * (topo.ndim - 1):
        return tuple(range(stages))
    rows, cols = topo.shape[0], topo.shape[1]
    snake = [r * cols + (c if r % 2 == 0 else cols - 1 - c) for r in range(rows)
             for c in range(cols)]  # fmt: skip
    return tuple(snake[:stages])


def place(
    stages: int, topo: Topology, chips=None, chip: str | Chip = "tpu-v3", layout: str = "ring"
) -> Placement:
    """Put S stages on chips of `topo`: ``layout="ring"`` walks neighbours (a snake on 2-D),
    ``"rows"`` gives stage i row i of a 2-D torus (its first chip), or pass ``chips`` yourself."""
    spec = get_chip(chip)
    if chips is None:
        if layout == "rows":
            if topo.ndim < 2 or topo.shape[0] < stages:
                raise ValueError(f"layout 'rows' needs a 2-D topology with >= {stages} rows")
            chips = tuple(topo.index((i,) + (0,) * (topo.ndim - 1)) for i in range(stages))
        elif layout == "ring":
            chips = ring_chips(topo, stages) if stages <= topo.n_chips else ()
        else:
            raise ValueError(f"unknown layout {layout!r}; use 'ring' or 'rows' or pass chips")
    chips = tuple(int(c) for c in chips)
    if len(chips) != stages or len(set(chips)) != stages:
        raise ValueError(
            f"need {stages} distinct chips for {stages} stages on {topo.describe()}, got {chips}"
        )
    if not all(0 <= c < topo.n_chips for c in chips):
        raise ValueError(f"chip ids must be in 0..{topo.n_chips - 1}, got {chips}")
    return Placement(topo, chips, spec)
