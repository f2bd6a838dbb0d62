"""Rings embedded in a torus, and ring reduce-scatter / all-gather over many rings at once.

Rings inside one torus dim follow the dim's links: a wrapped dim is its own ring; a dim without
wraparound is walked as a folded ring 0, 2, 4, ..., 5, 3, 1 so that every step uses each directed
link once (edges are two hops long). One ring through all chips is a cycle of neighbour hops
whenever some dim has even size.

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
    order = line_order(n, topo.wrap[d])
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


def _ids(topo, dims, coords) -> np.ndarray:
    full = np.zeros((len(coords), topo.ndim), np.int64)
    full[:, dims] = np.array(coords, np.int64)
    return full @ topo.strides


# ----- ring reduce-scatter / all-gather over many rings at once --------------------------------
def _ring_edges(rings):
    """(src, dst, ring position of src) of every edge of rings [n_lines, n]: p sends to p + 1."""
    n_lines, n = rings.shape
    return rings.ravel(), np.roll(rings, -1, axis=1).ravel(), np.tile(np.arange(n), n_lines)


def ring_reduce_scatter(rings, lo, length):
    """Reduce-scatter `length` chunks starting at lo[chip]; returns steps and each chip's share."""
    n = rings.shape[1]
    piece = length // n
    src, dst, p = _ring_edges(rings)
    base = lo[src]
    steps = [(src, dst, base + ((p - k) % n) * piece, piece, True) for k in range(n - 1)]
    new_lo = lo.copy()
    new_lo[src] = base + ((p + 1) % n) * piece
    return steps, new_lo, piece


def ring_all_gather(rings, lo_line, length):
    """The inverse of ring_reduce_scatter: chip at ring position p starts with piece p+1."""
    n = rings.shape[1]
    piece = length // n
    src, dst, p = _ring_edges(rings)
    base = lo_line[src]
    return [(src, dst, base + ((p + 1 - k) % n) * piece, piece, False) for k in range(n - 1)]
