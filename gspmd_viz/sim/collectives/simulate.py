"""Link-level simulator: route every transfer, add up bytes per link, time each step.

A step lasts as long as its busiest link: max over links of (bytes on the link / link bandwidth)
plus the longest route in the step times the per-hop latency. Steps run one after another
(lockstep), so a fast transfer waits for the slowest one of its step. With `pieces` > 1 the
payload runs as that many pieces, one behind the other (in_flight.py): every link keeps its own
clock, and a piece's step starts on a link when the piece is ready and the link is free.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gspmd_viz.sim.collectives import cost, in_flight
from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule, Step
from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.presets import chip_of
from gspmd_viz.sim.collectives.registry import (
    check_kind,
    choose,
    default_algorithm,
    label,
    lookup,
    schedule,
)
from gspmd_viz.sim.collectives.topology import Topology
from gspmd_viz.units import format_bytes, format_time


@dataclasses.dataclass(frozen=True)
class Transfer:
    src: int
    dst: int
    chunk: int
    count: int
    bytes: float
    reduce: bool


@dataclasses.dataclass(frozen=True)
class PhaseRecord:
    name: str
    payload_bytes: float  # per chip
    time_s: float
    first_step: int
    n_steps: int


@dataclasses.dataclass(frozen=True, eq=False)
class StepRecord:
    index: int
    phase: int
    phase_name: str
    step: Step  # the transfers as arrays (src, dst, chunk, count, reduce)
    nbytes: np.ndarray  # bytes of each transfer
    links: np.ndarray  # ids of the links this step uses
    link_bytes: np.ndarray  # bytes crossing each of those links
    max_hops: int
    start_s: float
    time_s: float
    piece: int = 0  # which piece of the payload (in_flight.py); 0 in lockstep

    @property
    def max_link_bytes(self) -> float:
        return float(self.link_bytes.max(initial=0.0))

    @property
    def transfers(self) -> list[Transfer]:
        s = self.step
        cols = (s.src, s.dst, s.chunk, s.count, self.nbytes, s.reduce)
        return [
            Transfer(int(a), int(b), int(c), int(k), float(n), bool(r))
            for a, b, c, k, n, r in zip(*cols, strict=True)
        ]

    def __repr__(self):
        return (
            f"Step({self.index}, {self.phase_name}: {len(self.step)} transfers, busiest link "
            f"{format_bytes(self.max_link_bytes)}, {self.max_hops} hops, "
            f"{format_time(self.time_s)})"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class Timeline:
    topo: Topology
    kind: str
    algorithm: str
    chip: Chip
    nbytes: int
    chunk_bytes: float
    schedule: CollectiveSchedule
    steps: list[StepRecord]
    phases: list[PhaseRecord]
    time_s: float
    lower_bound_s: float
    why: str = ""  # why algorithm="auto" chose this algorithm
    pieces: int = 1  # the payload runs as this many pieces, one behind the other

    def summary(self) -> str:
        lines = [
            f"{self.kind} of {format_bytes(self.nbytes)}/chip, "
            f"{label(self.algorithm, self.pieces)}, "
            f"{self.topo.describe()}, {self.chip.name}",
            f"  total {format_time(self.time_s)} in {len(self.steps)} steps; {self._bound_text()}",
        ]
        if self.why:
            lines.insert(1, f"  {self.why}")
        for p in self.phases:
            lines.append(
                f"  {p.name}: payload {format_bytes(p.payload_bytes)}/chip, {p.n_steps} steps, "
                f"{format_time(p.time_s)}"
            )
        return "\n".join(lines)

    def _bound_text(self) -> str:
        bound = f"bandwidth lower bound {format_time(self.lower_bound_s)}"
        if self.lower_bound_s == 0:  # one chip: nothing to move
            return f"{bound} (nothing to move)"
        return f"{bound} (ratio {self.time_s / self.lower_bound_s:.2f})"

    def __repr__(self):
        return (
            f"Timeline({self.kind} {self.algorithm}, {'x'.join(map(str, self.topo.shape))}, "
            f"{format_bytes(self.nbytes)}/chip: {format_time(self.time_s)}, "
            f"{len(self.steps)} steps, "
            f"{len(self.phases)} phases)"
        )


def check_nbytes(nbytes, n_chunks: int, algorithm: str, pad: bool) -> float:
    """Bytes per chunk; clear errors for bad sizes."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
        raise ValueError(f"payload must be a positive whole number of bytes, got {nbytes!r}")
    if nbytes % n_chunks:
        if not pad:
            up = -(-nbytes // n_chunks)
            raise ValueError(
                f"payload of {nbytes:,} B does not split into the {n_chunks} equal chunks that "
                f"{algorithm!r} needs here: use a multiple of {n_chunks} B (e.g. {up * n_chunks:,}"
                f" B) or pad=True (every chunk rounded up to {up:,} B)"
            )
        return float(-(-nbytes // n_chunks))
    return float(nbytes // n_chunks)


def simulate(
    topo: Topology,
    kind: str = "all-reduce",
    nbytes: int = 2**20,
    algorithm: str | None = None,
    chip: str | Chip | None = None,
    pad: bool = False,
    pieces: int | None = None,
) -> Timeline:
    """Simulate collective `kind` of `nbytes` per chip with `algorithm` on `topo`, link by link,
    the payload run as `pieces` pieces (default one: lockstep; in_flight.py).

    `chip` defaults to the one a preset of today's pods names ("tpu-v3" otherwise);
    `algorithm="auto"` picks the fastest closed form (and its pieces, unless given) and says why
    in ``Timeline.why``.
    """
    check_kind(kind)
    spec = get_chip(chip or chip_of(topo))
    why = ""
    if algorithm == "auto":
        check_nbytes(nbytes, 1, "auto", pad)
        algorithm, pieces, why = choose(topo, kind, nbytes, spec, pieces)
    algorithm = algorithm or default_algorithm(topo, kind)
    pieces = 1 if pieces is None else pieces
    lookup(algorithm, kind, topo, pieces)
    sched = schedule(topo, kind, algorithm)
    piece_bytes = check_nbytes(nbytes, sched.n_chunks * pieces, label(algorithm, pieces), pad)
    timeline = run_schedule(sched, nbytes, piece_bytes * pieces, spec, pieces)
    return dataclasses.replace(timeline, why=why)


def run_schedule(
    sched: CollectiveSchedule, nbytes: int, chunk_bytes: float, spec: Chip, pieces: int = 1
) -> Timeline:
    records = time_steps(sched, chunk_bytes, spec, pieces)
    t = max((r.start_s + r.time_s for r in records), default=0.0)
    phases = phase_records(sched, records, chunk_bytes)
    lb = cost.lower_bound(sched.topo, sched.kind, nbytes, chip=spec)
    return Timeline(sched.topo, sched.kind, sched.algorithm, spec, nbytes, chunk_bytes, sched,
                    records, phases, t, lb, pieces=pieces)  # fmt: skip


def time_steps(
    sched: CollectiveSchedule, chunk_bytes: float, spec: Chip, pieces: int = 1
) -> list[StepRecord]:
    """Route every step of `sched` on its topology and time it by its busiest link, for each of
    `pieces` pieces of every chunk, in the order the pieces' steps start (in_flight.run)."""
    beta, alpha = spec.ici_link_bandwidth_Bps, spec.hop_latency_s
    link_free = np.zeros(len(sched.topo.link_dst))  # [link id] when it ends what it was given
    records, routes = [], _RouteCache(sched.topo)

    def advance(i, piece, t):
        st = sched.steps[i]
        *_, links, max_hops = routes(st.src, st.dst)  # routed once per distinct src, dst
        nb, load = routes.loads(st, chunk_bytes / pieces)
        busy = np.maximum(link_free[links] - t, 0.0) + load / beta  # waiting, then sending
        link_free[links] = t + busy
        dt = busy.max(initial=0.0) + max_hops * alpha
        name = sched.phases[st.phase].name
        records.append(StepRecord(len(records), st.phase, name, st, nb, links, load, max_hops,
                                  t, dt, piece))  # fmt: skip
        return t + dt

    in_flight.run(len(sched.steps), pieces, advance)
    return records


class _RouteCache:
    """Steps of one phase share their src/dst arrays: route each distinct pair of arrays once.

    Returns (transfer index per crossing, position of the crossed link in `links`, transfers
    crossing each link, links, most hops).
    """

    def __init__(self, topo):
        self.topo, self.seen, self.loaded = topo, {}, {}  # routes; per-link loads of routes

    def __call__(self, src, dst):
        hit = self.seen.get((id(src), id(dst)))
        if hit is not None and hit[0] is src and hit[1] is dst:
            return hit[2]
        t_idx, l_idx, hops = self.topo.route(src, dst)
        links, where, crossings = np.unique(l_idx, return_inverse=True, return_counts=True)
        routed = (t_idx, where, crossings.astype(float), links, int(hops.max(initial=0)))
        self.seen[(id(src), id(dst))] = (src, dst, routed)
        return routed

    def loads(self, st, chunk_bytes: float) -> tuple[np.ndarray, np.ndarray]:
        """(bytes per transfer, bytes per link of `links`) of step `st`. When every transfer
        carries the same bytes, both are shared read-only arrays: a ring's 2(N-1) steps of N
        transfers then hold one copy, not 2(N-1)."""
        t_idx, where, crossings, links, _ = self(st.src, st.dst)
        count = st.count
        if len(count) and count.min() == count.max():
            nb = np.broadcast_to(count[0] * chunk_bytes, count.shape)
            key = (id(st.src), id(st.dst), float(nb[0]))  # kept alive by self.seen
            if key not in self.loaded:
                self.loaded[key] = crossings * nb[0]
                self.loaded[key].flags.writeable = False
            return nb, self.loaded[key]
        nb = count * chunk_bytes
        return nb, np.bincount(where, weights=nb[t_idx], minlength=len(links))


def phase_records(sched, records, chunk_bytes):
    """Per phase of `sched`: its payload, and its time from its first step's start to its last
    step's end (the sum of its steps' times in lockstep; pieces overlap phases)."""
    out = []
    for p, ph in enumerate(sched.phases):
        mine = [r for r in records if r.phase == p]
        start = min((r.start_s for r in mine), default=0.0)
        end = max((r.start_s + r.time_s for r in mine), default=0.0)
        first = mine[0].index if mine else 0
        out.append(PhaseRecord(ph.name, ph.payload_chunks * chunk_bytes, end - start, first,
                               len(mine)))  # fmt: skip
    return out
