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
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.algorithms import Phase, Step
from gspmd_viz.sim.collectives.logarithmic import _check, _parts, _swing_peers, swing_step_time
from gspmd_viz.sim.collectives.topology import Topology


def part_steps(topo: Topology, order, mirror=False) -> list[tuple[int, int, bool]]:
    """(dim, Swing step, mirror) of one part: step 0 of every dim in `order`, then step 1, ..."""
    logs = {d: topo.shape[d].bit_length() - 1 for d in order}
    top = max(logs.values(), default=0)
    return [(d, s, mirror) for s in range(top) for d in order if s < logs[d]]


def halving_steps(steps) -> int:
    """How many leading steps halve: those whose peers are one hop away (Swing steps 0 and 1)."""
    return sum(1 for _, s, _ in steps if s <= 1)


def classes(topo: Topology, peers: list[np.ndarray]) -> list[np.ndarray]:
    """[steps + 1] arrays [n_chips]: the class id of each chip before step k (id = its min chip).

    Raises when the peers do not form a butterfly (a class must double at every step back)."""
    label = np.arange(topo.n_chips)
    out = [label]
    for k, peer in enumerate(reversed(peers)):
        label = np.minimum(label, label[peer])
        if np.bincount(label).max() != 2 ** (k + 1):
            raise AssertionError("Swing's peers do not split the chips in halves")
        out.append(label)
    return out[::-1]


def _ranges(label, pos):
    """(first block, count) of each chip's class, blocks numbered by `pos`."""
    first = np.full(len(label), len(label), np.int64)
    np.minimum.at(first, label, pos)
    return first[label], np.bincount(label)[label]


def _part(topo, order, mirror, part):
    """One part's transfers per step: (src, dst, first chunk, count, reduce) arrays."""
    n, steps = topo.n_chips, part_steps(topo, order, mirror)
    peers = [_swing_peers(topo, d, s, m) for d, s, m in steps]
    label = classes(topo, peers)
    pos = np.empty(n, np.int64)
    pos[np.lexsort(label[::-1])] = np.arange(n)  # every class of every step one range
    h, chips, out = halving_steps(steps), np.arange(n), []
    for k, peer in enumerate(peers):
        mine = k + 1 if k < h else h  # halving: the peer keeps its own next class
        first, count = _ranges(label[mine], pos)
        out.append((chips, peer, part * n + first[peer], count[peer], True))
    for k in reversed(range(h)):  # gather back: send what you hold, the peer copies it
        first, count = _ranges(label[k + 1], pos)
        out.append((chips, peers[k], part * n + first, count, False))
    return out


def swing_halving(topo: Topology, kind: str):
    """All-reduce: per part, halve over the one-hop steps, swap whole, gather back."""
    _check(topo, "swing-halving", need_wrap=True)
    layout = _parts(topo)
    parts = [_part(topo, order, mirror, p) for p, (order, mirror) in enumerate(layout)]
    n_steps = len(parts[0])
    h = halving_steps(part_steps(topo, layout[0][0]))
    steps = []
    for k in range(n_steps):
        group = [p[k] for p in parts]
        cols = [
            np.concatenate([np.broadcast_to(g[i], (len(g[0]),)) for g in group]) for i in range(5)
        ]
        phase = 0 if k < h else 1 if k < n_steps - h else 2
        steps.append(Step(phase, cols[0], cols[1], cols[2], cols[3], cols[4].astype(bool), cols[2]))
    k = len(layout) * topo.n_chips
    phases = [Phase("reduce-scatter by halving over the one-hop steps", k),
              Phase("swap and add what is left over the longer steps", k),
              Phase("all-gather back over the one-hop steps", k)]  # fmt: skip
    return k, phases, steps


def swing_halving_time(topo, kind, s, beta, alpha):
    """Per step: longest route, and the busiest link over the parts (each its own message)."""
    steps = [part_steps(topo, order, mirror) for order, mirror in _parts(topo)]
    h, n = halving_steps(steps[0]), len(steps[0])
    timeline = [(k, min(k + 1, h)) for k in range(n)] + [(k, k + 1) for k in reversed(range(h))]
    part_bytes = s / len(steps)
    return sum(swing_step_time(topo, [p[k] for p in steps], part_bytes / 2**halvings, beta, alpha)
               for k, halvings in timeline)  # fmt: skip
