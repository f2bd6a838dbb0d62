"""Swing-halving with one-way long steps: the long steps of a dim add up to its diameter.

A Swing step pairs chips (an even coordinate adds rho, an odd one subtracts it) only when rho is
odd. With an even rho the same rule is a one-way shift: evens send rho one way, odds the other,
and every chip receives from one chip and sends to another. On a ring of 32 allowing such steps
brings the fewest summed hops of a log2(32)-step all-reduce from Swing's 21 (1, 1, 3, 5, 11; no
pairwise schedule does better) down to the ring's diameter, 16 (1, 2, 4, 8, 1, e.g.).

Here each dim takes the one-hop steps 1, -1 (halving, as in swing_halving.py), then the long
steps 3, -8, -16, ..., -n/4, -5: n/2 hops in all (Swing: 19 on a dim of 32, 40 on 64). An even
chip has met the offsets [-2, 1] after the one-hop steps; 3 (a Swing pair) reflects that window
past its top, to [-2, 5]; a shift by the window's width w brings the chip the window of the chip
w away, to [-2, 13] after -8; -5 reflects it past the bottom: every offset of the ring once (odd
chips mirror this). The chips the long steps link form 4 groups per dim, each holding one chip
of every one-hop class, so after halving a chip keeps the blocks of its group (2^h groups for h
one-hop steps) and the long steps add those whole. Dims below 32 get Swing's own steps (a 16
takes 3, -5 either way), so the algorithm only runs where a dim has 32 chips or more.

After these one-hop steps no long steps take fewer hops, whichever chip of each tile holds a
block and whichever chip of its block each chip pulls in each step (dims mixed): a SAT solver
proves it for rings of 32 and 64 and for the 16x16 (Swing's steps) and 32x32 tori
(benchmarks/halving_bound.py).

Closed form per step as Swing's: longest route, busiest link (an even shift of d crosses each
link of its line with d / 2 routes of a part).
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives import logarithmic as log
from gspmd_viz.sim.collectives.swing_halving import classes, halving_all_reduce, halving_costs
from gspmd_viz.sim.collectives.topology import Topology

SHORTEST_DIFFERENT = 32  # below this every dim's steps are Swing's (swing-halving's schedule)


def pull_distances(n: int) -> list[int]:
    """Signed step distances on a wrapped dim of n chips (a power of two)."""
    if n < 16:
        return [1, -1, 3][: n.bit_length() - 1]
    shifts = [-(2**b) for b in range(3, n.bit_length() - 2)]  # -8, -16, ..., -n/4
    return [1, -1, 3, *shifts, -5]


def unfit(topo: Topology) -> str | None:
    """Why pull-halving cannot run on `topo` (None when it can)."""
    reason = log.unfit(topo, need_wrap=True)
    if reason is None and max(topo.shape) < SHORTEST_DIFFERENT:
        reason = f"every dim has fewer than {SHORTEST_DIFFERENT} chips: use swing-halving there"
    return reason


def _linked(topo, peers):
    """[n_chips] group of each chip: chips joined by any of the one-way `peers` (id = min chip)."""
    label = np.arange(topo.n_chips)
    while True:
        new = label.copy()
        for peer in peers:  # a permutation: x sends to peer[x]
            new[peer] = np.minimum(new[peer], new)
            new = np.minimum(new, new[peer])
        if (new == label).all():
            return label
        label = new


def _pull_classes(topo, peers, h):
    return classes(topo, peers[:h], last=_linked(topo, peers[h:]))


def pull_halving(topo: Topology, kind: str):
    """All-reduce: per part, halve over the one-hop steps, add each group's blocks over the
    long steps (one-way shifts where the distance is even), gather back."""
    return halving_all_reduce(topo, pull_distances, _pull_classes,
                              "add each group's blocks over the long steps")  # fmt: skip


def pull_halving_costs(topo, kind, s, beta, alpha):
    return halving_costs(topo, s, beta, alpha, pull_distances)
