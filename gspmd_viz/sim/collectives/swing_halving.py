"""Swing with recursive halving on its one-hop steps: fewer bytes where hops are cheap.

``swing`` (logarithmic.py) swaps the whole buffer in every step. Its first steps cross one hop
(peers 1 and -1 away in each dim), its last ones up to 11 hops on a dim of 32. Here each part of
the buffer (parts as in ``swing``, each taking one Swing step of every dim in turn) *halves* over
the one-hop steps, as Rabenseifner's reduce-scatter does, swaps whole
what is left over the long steps, and gathers back over the one-hop steps: a one-hop step costs
little latency twice, and every long step then carries 1/16 of the part on a 2-D torus.

Which blocks a chip keeps follows from Swing's peers: the chips a chip still meets in steps
s, s+1, ... form a class, the classes of step s+1 split those of step s in two, and a chip sends
its peer the blocks of the peer's class. Blocks are numbered so that every class is one
contiguous range (sorted by class, coarse to fine), so each send is one transfer.

The builder and closed form take the part's steps and its classes as arguments, so
pull_halving.py reuses them with other long steps.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.algorithms import Phase, Step
from gspmd_viz.sim.collectives.logarithmic import _check, _parts, signed_peers, step_cost, swing_rho
from gspmd_viz.sim.collectives.topology import Topology


def swing_distances(n: int) -> list[int]:
    """Swing's signed peer distances on a dim of n chips: 1, -1, 3, -5, ... (log2 n of them)."""
    return [swing_rho(s) for s in range(n.bit_length() - 1)]


def part_steps(topo: Topology, order, mirror=False, distances=swing_distances):
    """(dim, signed distance, mirror) of one part: the first step of every dim in `order`, then
    the second, ...; `distances(n)` gives a dim's steps."""
    seqs = {d: distances(topo.shape[d]) for d in order}
    top = max(map(len, seqs.values()), default=0)
    return [(d, seqs[d][i], mirror) for i in range(top) for d in order if i < len(seqs[d])]


def halving_steps(steps) -> int:
    """How many leading steps halve: those whose peers are one hop away (distance 1 or -1)."""
    return sum(1 for _, rho, _ in steps if abs(rho) == 1)


def classes(topo: Topology, peers: list[np.ndarray], last=None) -> list[np.ndarray]:
    """[steps + 1] arrays [n_chips]: the class id of each chip before step k (id = its min chip).

    `last`: the classes after the last step (default: every chip its own). Raises when the peers
    do not form a butterfly (a class must double at every step back)."""
    label = np.arange(topo.n_chips) if last is None else last
    size, out = np.bincount(label).max(), [label]
    for k, peer in enumerate(reversed(peers)):
        label = np.minimum(label, label[peer])
        if np.bincount(label).max() != size * 2 ** (k + 1):
            raise AssertionError("the peers do not split the chips in halves")
        out.append(label)
    return out[::-1]


def _ranges(label, block, unit):
    """(first block, count) of each chip's class, each block `unit` chips of the finest class."""
    first = np.full(len(label), len(label), np.int64)
    np.minimum.at(first, label, block)
    return first[label], np.bincount(label)[label] // unit


def _blocks(label):
    """Block of each chip: the finest classes numbered so every class of every step is a range."""
    pos = np.empty(len(label[0]), np.int64)
    pos[np.lexsort(label[::-1])] = np.arange(len(pos))  # sorted by class, coarse to fine
    first = np.full(len(pos), len(pos), np.int64)
    np.minimum.at(first, label[-1], pos)
    _, block = np.unique(first[label[-1]], return_inverse=True)
    return block, len(pos) // (block.max() + 1)


def _part(topo, steps, part, classes_of):
    """One part's transfers per step: (src, dst, first chunk, count, reduce) arrays."""
    peers = [signed_peers(topo, d, rho, m) for d, rho, m in steps]
    h = halving_steps(steps)
    label = classes_of(topo, peers, h)  # label[h]: the class a long step swaps whole
    block, unit = _blocks(label)
    base, chips, out = part * (topo.n_chips // unit), np.arange(topo.n_chips), []
    for k, peer in enumerate(peers):
        mine = k + 1 if k < h else h  # halving: the peer keeps its own next class
        first, count = _ranges(label[mine], block, unit)
        out.append((chips, peer, base + first[peer], count[peer], True))
    for k in reversed(range(h)):  # gather back: send what you hold, the peer copies it
        first, count = _ranges(label[k + 1], block, unit)
        out.append((chips, peers[k], base + first, count, False))
    return out, topo.n_chips // unit


def halving_all_reduce(topo: Topology, distances, classes_of, long_title: str):
    """All-reduce: per part, halve over the one-hop steps, add whole over the long ones, gather."""
    layout = _parts(topo)
    built = [_part(topo, part_steps(topo, order, mirror, distances), p, classes_of)
             for p, (order, mirror) in enumerate(layout)]  # fmt: skip
    n_steps, n_blocks = len(built[0][0]), built[0][1]
    h = halving_steps(part_steps(topo, layout[0][0], distances=distances))
    steps = []
    for k in range(n_steps):
        group = [p[0][k] for p in built]
        cols = [
            np.concatenate([np.broadcast_to(g[i], (len(g[0]),)) for g in group]) for i in range(5)
        ]
        phase = 0 if k < h else 1 if k < n_steps - h else 2
        steps.append(Step(phase, cols[0], cols[1], cols[2], cols[3], cols[4].astype(bool), cols[2]))
    k = len(layout) * n_blocks
    phases = [Phase("reduce-scatter by halving over the one-hop steps", k), Phase(long_title, k),
              Phase("all-gather back over the one-hop steps", k)]  # fmt: skip
    return k, phases, steps


def _swing_classes(topo, peers, h):
    return classes(topo, peers)


def swing_halving(topo: Topology, kind: str):
    """All-reduce: per part, halve over the one-hop steps, swap whole, gather back."""
    _check(topo, "swing-halving", need_wrap=True)
    return halving_all_reduce(topo, swing_distances, _swing_classes,
                              "swap and add what is left over the longer steps")  # fmt: skip


def halving_costs(topo, s, beta, alpha, distances=swing_distances):
    """Per step: longest route, and the busiest link over the parts (each its own message)."""
    steps = [part_steps(topo, order, mirror, distances) for order, mirror in _parts(topo)]
    h, n = halving_steps(steps[0]), len(steps[0])
    timeline = [(k, min(k + 1, h)) for k in range(n)] + [(k, k + 1) for k in reversed(range(h))]
    part_bytes = s / len(steps)
    return [step_cost(topo, [p[k] for p in steps], part_bytes / 2**halvings, beta, alpha)
            for k, halvings in timeline]  # fmt: skip


def swing_halving_costs(topo, kind, s, beta, alpha):
    return halving_costs(topo, s, beta, alpha)
