"""Closed-form alpha-beta times and bandwidth lower bounds for collectives on tori.

beta = one link's bandwidth in one direction, alpha = latency per hop. These formulas are the
oracle the link-level simulator is tested against: they never route a transfer, they count.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.rings import ring_order
from gspmd_viz.sim.collectives.topology import Topology

# the collectives sim can simulate link by link (the registry has algorithms for each)
SIMULATED_KINDS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
# the collectives collective_time prices: those plus a neighbour exchange
COLLECTIVE_KINDS = (*SIMULATED_KINDS, "collective-permute")


def _line_factor(n: int, wrap: bool) -> tuple[int, int]:
    """(transfers of a +/- ring pair sharing one directed link, hops per ring edge) in one dim.

    Wrapped dim: the + ring uses + links, the - ring - links: 1 transfer per link, 1 hop.
    No wraparound (n >= 3): both folded rings use every link (2 per link), edges are 2 hops.
    n == 2: one cable, both rings cross it: 2 per link, 1 hop.
    """
    if wrap and n > 2:
        return 1, 1
    return 2, (2 if n > 2 else 1)


def _a2a_line_load(n: int, wrap: bool) -> int:
    """Max (src, dst) pairs of a 1-D all-to-all crossing one directed link (shortest routes)."""
    if wrap and n > 2:
        m = n // 2  # distances 1..m go the + way (ties too): a + link carries 1 + 2 + ... + m
        return m * (m + 1) // 2
    return (n // 2) * (n - n // 2)


def _ring_embedding(topo: Topology) -> tuple[int, int, int]:
    """(max transfers per link, unidirectional; same, bidirectional; max hops) of ring_order."""
    active = [d for d in range(topo.ndim) if topo.shape[d] > 1]
    if len(active) == 1:
        d = active[0]
        per_link, hops = _line_factor(topo.shape[d], topo.wrap[d])
        return 1, per_link, hops
    if any(topo.shape[d] % 2 == 0 for d in active):
        return 1, 1, 1  # a cycle of neighbour hops, each cable used once per direction
    # all dims odd: measure the embedding
    order = ring_order(topo)
    nxt = np.roll(order, -1)
    _, fwd, hops = topo.route(order, nxt)
    _, bwd, _ = topo.route(nxt, order)
    uni = np.bincount(fwd).max()
    bi = np.bincount(np.concatenate([fwd, bwd])).max()
    return int(uni), int(bi), int(hops.max())


def ring_time(topo, kind, s, beta, alpha, bidirectional):
    """One ring through all chips, 2(N-1) steps for all-reduce (N-1 for its halves)."""
    n = topo.n_chips
    uni, bi, hops = _ring_embedding(topo)
    steps = (2 if kind == "all-reduce" else 1) * (n - 1)
    per_link = bi * s / (2 * n) if bidirectional else uni * s / n
    return steps * (per_link / beta + hops * alpha)


def _segments(topo, kind, order, payload):
    """One half's dim phases as (dim, steps, bytes per transfer of each ring direction)."""
    rs, p = [], payload
    for d in order:
        n = topo.shape[d]
        if n > 1:
            rs.append((d, n - 1, p / 2 / n))
            p /= n
    if kind == "reduce-scatter":
        return rs
    if kind == "all-gather":
        return rs[::-1]
    return rs + rs[::-1]


def phased_time(topo, kind, s, beta, alpha, orders):
    """Rings along one dim at a time; parts of the payload in different dim orders overlap."""
    halves = [_segments(topo, kind, o, s / len(orders)) for o in orders]
    bounds = sorted({0} | {int(np.cumsum([g[1] for g in h])[i]) for h in halves
                           for i in range(len(h))})  # fmt: skip
    total = 0.0
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        load, hops = {}, 0
        for h in halves:
            seg = _segment_at(h, a)
            if seg is None:
                continue
            d, _, per = seg
            per_link, hop = _line_factor(topo.shape[d], topo.line_wrap[d])
            load[d] = load.get(d, 0.0) + per_link * per
            hops = max(hops, hop)
        total += (b - a) * (max(load.values()) / beta + hops * alpha)
    return total


def _segment_at(segments, step):
    start = 0
    for seg in segments:
        if start <= step < start + seg[1]:
            return seg
        start += seg[1]
    return None


def diameter(topo: Topology) -> int:
    """Hops between the farthest two chips. Twisted kxkx2k and kx2kx2k tori: floor(3k/2), where
    the untwisted torus of the same shape has 2k and 5k/2 (checked against a BFS in tests)."""
    if topo.twisted:
        return 3 * min(topo.shape) // 2
    return sum(n // 2 if w else n - 1 for n, w in zip(topo.shape, topo.wrap, strict=True))


def naive_time(topo, kind, s, beta, alpha):
    """Every route funnels through the links around chip 0, in and then out."""
    active = [d for d in range(topo.ndim) if topo.shape[d] > 1]
    if not active:
        return 0.0

    def funnel(d):  # chips whose dimension-ordered route enters/leaves chip 0 along dim d
        n, w = topo.shape[d], topo.wrap[d]
        return topo.n_chips // n * (n // 2 if w else n - 1)

    hop_time = diameter(topo) * alpha
    gather = funnel(active[-1]) * s / beta + hop_time  # last leg of every route ends at chip 0
    bcast = funnel(active[0]) * s / beta + hop_time  # first leg of every route leaves chip 0
    return gather + bcast


def all_to_all_time(topo, kind, s, beta, alpha):
    """The busiest link of dimension-ordered shortest routes, and the diameter in hops.

    A twisted torus has no per-dim count: its busiest link is measured by routing every pair
    once (as ``_ring_embedding`` measures an odd ring)."""
    n_chips = topo.n_chips
    if topo.twisted:
        src, dst = np.divmod(np.arange(n_chips * n_chips), n_chips)
        routes = np.bincount(topo.route(src, dst)[1]).max(initial=0)
        return routes * s / n_chips / beta + diameter(topo) * alpha
    loads = [
        n_chips // n * _a2a_line_load(n, w) * s / n_chips
        for n, w in zip(topo.shape, topo.wrap, strict=True)
        if n > 1
    ]
    return max(loads, default=0.0) / beta + diameter(topo) * alpha


def cut_links(topo: Topology, d: int) -> int:
    """Directed links from one half of dim d to the other (the cut between coordinates
    size // 2 - 1 and size // 2): two per line of a wrapped dim, one without wraparound, plus,
    on a twisted torus, one per line of every short dim whose wraparound moves along d."""
    lines = topo.n_chips // topo.shape[d]
    twisted = sum(topo.n_chips // topo.shape[t] for t in range(topo.ndim)
                  if topo.twisted and topo.twist[t][d])  # fmt: skip
    return lines * (2 if topo.wrap[d] else 1) + twisted


def lower_bound(
    topo: Topology, kind: str = "all-reduce", nbytes: float = 2**20, chip: str | Chip = "tpu-v3"
) -> float:
    """Bandwidth lower bound (seconds; latency ignored) for `kind` of `nbytes` per chip.

    The larger of (a) injection: each chip must receive (N-1)/N of the buffer (twice for
    all-reduce: reduce-scatter then all-gather) through its incoming links, and (b) bisection:
    what must cross a cut that halves one dim, over the links crossing that cut.
    """
    spec = get_chip(chip)
    beta, s, n = spec.ici_link_bandwidth_Bps, float(nbytes), topo.n_chips
    if n == 1:
        return 0.0
    degree = int(topo.link_exists.reshape(n, -1).sum(axis=1).min())
    rounds = 2 if kind == "all-reduce" else 1
    best = rounds * (n - 1) / n * s / (degree * beta)
    for d, size in enumerate(topo.shape):
        if size < 2:
            continue
        a = size // 2 * (n // size)  # chips on the smaller side of the cut
        b = n - a
        crossing = {
            "all-reduce": s,  # the other side's partial sum of every byte
            "reduce-scatter": b / n * s,
            "all-gather": b / n * s,
            "all-to-all": a * b * s / n,
        }[kind]
        best = max(best, crossing / (cut_links(topo, d) * beta))
    return best


def latency_bound(topo: Topology, chip: str | Chip = "tpu-v3") -> float:
    """Latency lower bound (seconds; bytes ignored) of any collective we simulate on `topo`.

    Every chip needs data from every other chip (an all-reduce's sum, a gather's pieces, an
    all-to-all's chunk), and a step lasts at least its longest route's hops x alpha, so the steps
    along the farthest pair's chain add up to at least the diameter in hops.
    """
    return diameter(topo) * get_chip(chip).hop_latency_s


def scaling_book_time(
    kind: str, nbytes: float, axis_size: int, chip: str | Chip = "tpu-v3"
) -> float:
    """The scaling book's estimate (``sharding.md``) along one wrapped axis of `axis_size` chips:
    T = max(T_min * X / 2, V / W_ici) for an all-gather or reduce-scatter of V = `nbytes` (the
    full array), T_min the hop latency, W_ici a link's bandwidth both ways; twice for all-reduce.
    """
    if kind not in ("all-reduce", "all-gather", "reduce-scatter"):
        raise ValueError(f"the scaling book's ring formula covers all-reduce, all-gather and "
                         f"reduce-scatter, not {kind!r}")  # fmt: skip
    spec = get_chip(chip)
    one = max(spec.hop_latency_s * axis_size / 2, nbytes / (2 * spec.ici_link_bandwidth_Bps))
    return (2 if kind == "all-reduce" else 1) * one


def collective_time(
    kind: str, per_device_bytes: float, group_size: int, chip: str | Chip = "tpu-v3"
) -> float:
    """Alpha-beta seconds for one collective over a bidirectional ring of `group_size` chips.

    `per_device_bytes` is the S of the wire-byte formulas: all-reduce S, all-gather S_out,
    reduce-scatter S_in, all-to-all S, collective-permute S (one neighbour hop).
    """
    if kind not in COLLECTIVE_KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(COLLECTIVE_KINDS)}")
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)):
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if group_size <= 0 or per_device_bytes < 0:
        raise ValueError(f"need group_size > 0, bytes >= 0; got {group_size}, {per_device_bytes}")
    spec = get_chip(chip)
    beta, alpha = spec.ici_link_bandwidth_Bps, spec.hop_latency_s
    s, n = float(per_device_bytes), int(group_size)
    if n == 1:
        return 0.0
    if kind == "collective-permute":
        return s / beta + alpha
    if kind == "all-to-all":
        return _a2a_line_load(n, True) * s / n / beta + (n // 2) * alpha
    per_link, hops = _line_factor(n, True)
    step = per_link * s / (2 * n) / beta + hops * alpha
    return (2 if kind == "all-reduce" else 1) * (n - 1) * step
