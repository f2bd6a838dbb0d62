"""Rings embedded in a torus, and ring reduce-scatter / all-gather over many rings at once.

Rings inside one torus dim follow the dim's links: a wrapped dim is its own ring; a dim without
wraparound (or a twisted one, whose wraparound lands on another line) is walked as a folded ring
0, 2, 4, ..., 5, 3, 1 so that every step uses each directed link once (edges are two hops long).
One ring through all chips is a cycle of neighbour hops whenever some dim has even size.

A ring step is a tuple (src, dst, first chunk, chunk count, reduce?) of arrays, one entry per ring
edge: position p sends to position p + 1.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.topology import Topology


def line_order(n: int, wrap: bool) -> np.ndarray:
    """Ring order of the n chips of one dim: natural with wraparound, folded without."""
    if wrap or n <= 2:
        return np.arange(n)
    odds = np.arange(1, n, 2)[::-1]
    return np.concatenate([np.arange(0, n, 2), odds])


def dim_rings(topo: Topology, d: int, sign: int) -> np.ndarray:
    """[n_lines, n] chip ids: one ring per line of chips along dim d, in ring order."""
    n = topo.shape[d]
    ids = np.arange(topo.n_chips).reshape(topo.shape)
    lines = np.moveaxis(ids, d, -1).reshape(-1, n)
    order = line_order(n, topo.line_wrap[d])
    return lines[:, order if sign > 0 else order[::-1]]


def _snake(shape) -> list[tuple[int, ...]]:
    """Boustrophedon path over a grid: consecutive entries are neighbours."""
    path = [(i,) for i in range(shape[-1])]
    for n in reversed(shape[:-1]):
        path = [(v, *p) for v in range(n) for p in (path if v % 2 == 0 else path[::-1])]
    return path


def ring_order(topo: Topology) -> np.ndarray:
    """One ring through every chip. With an even-sized dim it is a cycle of neighbour hops."""
    active = [d for d in range(topo.ndim) if topo.shape[d] > 1]
    if not active:
        return np.zeros(1, np.int64)
    if len(active) == 1:
        return dim_rings(topo, active[0], +1)[0]
    even = [d for d in active if topo.shape[d] % 2 == 0]
    if not even:  # every dim odd: no neighbour cycle exists on a mesh; close with a long hop
        coords = _snake([topo.shape[d] for d in active])
        return _ids(topo, active, coords)
    outer = even[0]
    inner = [d for d in active if d != outer]
    path = _snake([topo.shape[d] for d in inner])
    cyc = []
    for r in range(topo.shape[outer]):
        rest = path[1:] if r % 2 == 0 else path[:0:-1]
        cyc += [(r, *p) for p in rest]
    cyc += [(r, *path[0]) for r in reversed(range(topo.shape[outer]))]
    return _ids(topo, [outer, *inner], cyc)


def _adjacency(topo: Topology, chips: np.ndarray) -> list[list[int]]:
    """Per chip of `chips`: the positions in `chips` of its neighbours on the real links."""
    local = np.full(topo.n_chips + 1, -1, np.int64)  # chip id -> position; index -1 maps to -1
    local[chips] = np.arange(len(chips))
    dst = local[topo.link_dst.reshape(topo.n_chips, -1)[chips]]  # [n, 2 * ndim], -1: outside
    return [sorted({int(j) for j in row if j >= 0 and j != i}) for i, row in enumerate(dst)]


def _connected(adj: list[list[int]]) -> bool:
    seen, todo = {0}, [0]
    while todo:
        for j in adj[todo.pop()]:
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return len(seen) == len(adj)


def neighbour_cycle(topo: Topology, chips) -> np.ndarray | None:
    """A ring through `chips` (positions into it) whose every edge is one real link of `topo`
    (twisted wraparound included), or None when this finds none. It grows a cycle from a
    square of links: an edge a -> b whose ends have free neighbours u ~ a, v ~ b with u ~ v
    becomes a -> u -> v -> b, until every chip is in (each edge is tried once)."""
    adj = _adjacency(topo, np.asarray(chips, np.int64))
    if len(adj) < 4 or min(map(len, adj)) < 2 or not _connected(adj):
        return None
    nxt = _whole_cycle(adj) if max(map(len, adj)) == 2 else _square(adj)
    if nxt is None:
        return None
    edges = list(nxt.items())
    while edges and len(nxt) < len(adj):
        a, b = edges.pop()
        if nxt[a] != b:
            continue  # replaced by a detour already
        detour = _detour(adj, nxt, a, b)
        if detour is not None:
            u, v = detour
            nxt[a], nxt[u], nxt[v] = u, v, b
            edges += [(a, u), (u, v), (v, b)]
    if len(nxt) < len(adj):
        return None
    ring = [0]
    while len(ring) < len(adj):
        ring.append(nxt[ring[-1]])
    return np.array(ring, np.int64)


def _detour(adj, nxt, a, b) -> tuple[int, int] | None:
    """Free neighbours u ~ a and v ~ b with u ~ v, or None."""
    for u in (u for u in adj[a] if u not in nxt):
        for v in adj[u]:
            if v not in nxt and v != u and b in adj[v]:
                return u, v
    return None


def _whole_cycle(adj) -> dict[int, int]:
    """{a: next} of a connected graph whose every node has two neighbours: itself a cycle."""
    nxt, prev = {}, 0
    a = adj[0][0]
    nxt[0] = a
    while a != 0:
        b = next(j for j in adj[a] if j != prev)
        nxt[a], prev, a = b, a, b
    return nxt


def _square(adj) -> dict[int, int] | None:
    """{a: next} of a 4-cycle of links through position 0, or None."""
    for u in adj[0]:
        for v in adj[u]:
            for w in (w for w in adj[v] if v != 0 and w not in (0, u) and 0 in adj[w]):
                return {0: u, u: v, v: w, w: 0}
    return None


def _ids(topo, dims, coords) -> np.ndarray:
    full = np.zeros((len(coords), topo.ndim), np.int64)
    full[:, dims] = np.array(coords, np.int64)
    return full @ topo.strides


# ----- ring reduce-scatter / all-gather over many rings at once --------------------------------
def _ring_edges(rings):
    """(src, dst, ring position of src) of every edge of rings [n_lines, n]: p sends to p + 1."""
    n_lines, n = rings.shape
    return rings.ravel(), np.roll(rings, -1, axis=1).ravel(), np.tile(np.arange(n), n_lines)


def _rotated(base, rings_shape, piece, shift):
    """Step k's first chunks, k = 0, 1, ...: base + ((p + shift - k) % n) * piece, p the ring
    position of each sender. Rotations of one table: a slice per step, one add per step at most
    (none when every sender has the same base, as in one ring through all chips)."""
    n_lines, n = rings_shape
    table = (np.arange(3 * n) % n) * piece  # [3n]: position q + n + shift - k -> offset
    if n_lines == 1 and (base == base[0]).all():
        table = table + base[0]
        table.flags.writeable = False  # every step's chunks are a view of it
        return lambda k: table[n + shift - k : 2 * n + shift - k]
    lines = base.reshape(n_lines, n)
    return lambda k: (lines + table[n + shift - k : 2 * n + shift - k]).ravel()


def ring_reduce_scatter(rings, lo, length):
    """Reduce-scatter `length` chunks starting at lo[chip]; returns steps and each chip's share."""
    n = rings.shape[1]
    piece = length // n
    src, dst, p = _ring_edges(rings)
    base = lo[src]
    chunks = _rotated(base, rings.shape, piece, 0)
    steps = [(src, dst, chunks(k), piece, True) for k in range(n - 1)]
    new_lo = lo.copy()
    new_lo[src] = base + ((p + 1) % n) * piece
    return steps, new_lo, piece


def ring_all_gather(rings, lo_line, length):
    """The inverse of ring_reduce_scatter: chip at ring position p starts with piece p+1."""
    n = rings.shape[1]
    piece = length // n
    src, dst, _ = _ring_edges(rings)
    chunks = _rotated(lo_line[src], rings.shape, piece, 1)
    return [(src, dst, chunks(k), piece, False) for k in range(n - 1)]
