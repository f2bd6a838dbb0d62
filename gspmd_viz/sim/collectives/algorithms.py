"""Collective algorithms as data: a list of steps, each a batch of transfers, with phase labels.

A chip's buffer is split into ``n_chunks`` equal chunks. A transfer moves chunks
``[chunk, chunk + count)`` from ``src`` to ``dst`` (stored at ``dst_chunk``, usually the same
place) and either adds them to what ``dst`` holds (``reduce``) or overwrites it (copy). All
transfers of a step read the buffers as they were when the step began.

Rings (see rings.py) run inside one torus dim or once through all chips; a "bidirectional" ring
sends half the data each way round.
"""

from __future__ import annotations

import dataclasses
from itertools import zip_longest

import numpy as np

from gspmd_viz.sim.collectives.rings import (
    dim_rings,
    ring_all_gather,
    ring_order,
    ring_reduce_scatter,
)
from gspmd_viz.sim.collectives.topology import Topology


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str
    payload_chunks: int  # chunks per chip that this phase reduces or gathers over


@dataclasses.dataclass(frozen=True, eq=False)
class Step:
    phase: int
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    count: np.ndarray
    reduce: np.ndarray
    dst_chunk: np.ndarray

    def __len__(self):
        return len(self.src)


@dataclasses.dataclass(frozen=True, eq=False)
class CollectiveSchedule:
    kind: str
    algorithm: str
    topo: Topology
    n_chunks: int
    phases: list[Phase]
    steps: list[Step]

    def __repr__(self):
        n_tr = sum(len(s) for s in self.steps)
        shape = "x".join(map(str, self.topo.shape))
        return (
            f"CollectiveSchedule({self.kind} {self.algorithm} on {shape}: "
            f"{len(self.phases)} phases, {len(self.steps)} steps, {n_tr} transfers, "
            f"{self.n_chunks} chunks/chip)"
        )


def _stream(topo, rings_list, lo0, length, kind, phase_ids):
    """One stream: reduce-scatter through rings_list, then all-gather back in reverse order.

    Returns [(phase id, transfer tuple)], per-phase payload (chunks) and the final ownership.
    """
    lo = np.full(topo.n_chips, lo0, np.int64)
    out, payload, stack = [], {}, []
    for i, rings in enumerate(rings_list):
        steps, new_lo, piece = ring_reduce_scatter(rings, lo, length)
        stack.append((rings, lo, length))
        if kind in ("all-reduce", "reduce-scatter"):
            out += [(phase_ids[0][i], s) for s in steps]
            payload[phase_ids[0][i]] = payload.get(phase_ids[0][i], 0) + length
        lo, length = new_lo, piece
    owned = (lo, length)
    if kind in ("all-reduce", "all-gather"):
        for i in reversed(range(len(rings_list))):
            rings, lo_line, full = stack[i]
            out += [(phase_ids[1][i], s) for s in ring_all_gather(rings, lo_line, full)]
            if phase_ids[1][i] != phase_ids[0][i] or kind == "all-gather":
                payload[phase_ids[1][i]] = payload.get(phase_ids[1][i], 0) + full
    return out, payload, owned


def _merge(streams):
    """Run streams side by side: step k of the result holds step k of every stream."""
    steps, pairs = [], {}
    for group in zip_longest(*streams):
        parts = [g[1] for g in group if g is not None]
        phase = min(g[0] for g in group if g is not None)
        if len(parts) == 1:  # no copies: large rings reuse src/dst arrays across steps
            src, dst, chunk, count, red = parts[0]
            n = len(src)
            count = np.broadcast_to(np.int64(count), (n,))
            steps.append(Step(phase, src, dst, chunk, count, np.broadcast_to(red, (n,)), chunk))
            continue
        sizes = [len(p[0]) for p in parts]
        key = tuple(id(p[0]) for p in parts) + tuple(id(p[1]) for p in parts)
        if key not in pairs:  # a phase reuses its rings: share src/dst arrays across its steps
            pairs[key] = tuple(np.concatenate([p[i] for p in parts]) for i in range(2))
        src, dst = pairs[key]
        flags = (tuple(sizes), tuple(int(p[3]) for p in parts), tuple(bool(p[4]) for p in parts))
        if flags not in pairs:  # chunk counts and reduce flags repeat from step to step too
            pairs[flags] = (np.repeat(np.array(flags[1], np.int64), sizes),
                            np.repeat(np.array(flags[2], bool), sizes))  # fmt: skip
        count, red = pairs[flags]
        chunk = np.concatenate([p[2] for p in parts])
        steps.append(Step(phase, src, dst, chunk, count, red, chunk))
    return steps


# ----- schedule builders: (topo, kind) -> (chunks per chip, phases, steps) ----------------
def ring_like(topo: Topology, kind: str, bidirectional: bool):
    """One ring through all chips (both ways round when `bidirectional`)."""
    return ring_schedule(topo, kind, ring_order(topo)[None, :], bidirectional)


def ring_schedule(topo: Topology, kind: str, groups: np.ndarray, bidirectional: bool):
    """Rings through every row of `groups` [n_groups, n] (chip ids in ring order) at once."""
    n = groups.shape[1]
    signs = (1, -1) if bidirectional else (1,)
    k = n * len(signs)
    names = {"all-reduce": ["reduce-scatter round the ring", "all-gather round the ring"]}
    names["reduce-scatter"] = names["all-reduce"][:1]
    names["all-gather"] = names["all-reduce"][1:]
    ids = ([0], [1]) if kind == "all-reduce" else ([0], [0])
    streams, payload = [], {}
    for j, sign in enumerate(signs):
        rings = groups if sign > 0 else groups[:, ::-1]
        st, pl, _ = _stream(topo, [rings] if n > 1 else [], j * n, n, kind, ids)
        streams.append(st)
        for p, v in pl.items():
            payload[p] = payload.get(p, 0) + v
    phases = [Phase(nm, payload.get(i, k)) for i, nm in enumerate(names[kind])]
    return k, phases, _merge(streams)


def phased(topo: Topology, kind: str, orders: tuple[tuple[int, ...], ...]):
    """The torus algorithm: rings along one dim at a time; `orders` gives each part's dim order.

    One dim order: the classic phased algorithm (Hot Chips 2020, "phase 0 sums along columns,
    phase 1 along rows"). Several orders: each part of the payload runs it in its own order at
    the same time, so more of every chip's links are busy (the registry names the orders).
    """
    active = [[d for d in order if topo.shape[d] > 1] for order in orders]
    n_active = len(active[0])
    k = 2 * len(orders) * topo.n_chips
    half = k // len(orders)
    streams, payload = [], {}
    # phase ids of (reduce-scatter along dims[i], all-gather along dims[i]), in time order
    if kind == "all-gather":
        ids = (list(range(n_active)), [n_active - 1 - i for i in range(n_active)])
    else:
        ids = (list(range(n_active)), [2 * (n_active - 1) - i for i in range(n_active)])
    for h, dims in enumerate(active):
        for j, sign in enumerate((1, -1)):
            rings = [dim_rings(topo, d, sign) for d in dims]
            lo0 = h * half + j * half // 2
            st, pl, _ = _stream(topo, rings, lo0, half // 2, kind, ids)
            streams.append(st)
            for p, v in pl.items():
                payload[p] = payload.get(p, 0) + v
    phases = [Phase(_phase_name(kind, active, i, n_active), payload[i]) for i in sorted(payload)]
    return k, phases, _merge(streams)


def _phase_name(kind, orders, i, n):
    along = " and ".join(f"dim {dims[_pos(kind, i, n)]}" for dims in orders)
    if kind == "reduce-scatter":
        return f"phase {i}: reduce-scatter along {along}"
    if kind == "all-gather":
        return f"phase {i}: all-gather along {along}"
    op = "reduce-scatter" if i < n - 1 else "all-reduce" if i == n - 1 else "all-gather"
    return f"phase {i}: {op} along {along}"


def _pos(kind, i, n):
    if kind == "all-gather":
        return n - 1 - i
    return i if i < n else 2 * (n - 1) - i


def naive(topo: Topology, kind: str):
    """All-reduce through chip 0: everyone sends it their data, it sends back the sum."""
    others = np.arange(1, topo.n_chips)
    zero = np.zeros_like(others)
    one = np.ones_like(others)
    t = np.ones(len(others), bool)
    steps = [
        Step(0, others, zero, zero, one, t, zero),
        Step(1, zero, others, zero, one, ~t, zero),
    ]
    return 1, [Phase("gather to chip 0 (summing)", 1), Phase("broadcast from chip 0", 1)], steps


def all_to_all_direct(topo: Topology, kind: str):
    """All-to-all in one step: every chip sends each other chip its chunk."""
    n = topo.n_chips
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    one = np.ones_like(i)
    step = Step(0, i, j, j, one, np.zeros(len(i), bool), i)
    return n, [Phase("every chip sends one chunk to every other chip", n)], [step]
