"""Logarithmic collectives for small messages: log2(n) steps per dim instead of n - 1.

Every algorithm here works one torus dim at a time (the last, minor dim first), one bit of that
dim's coordinate per step, so each dim's size must be a power of two. A step pairs chips along
one dim only: routes stay in their line, and lines never share a link.

- ``recursive-doubling`` [Thakur, Rabenseifner & Gropp 2005]: step b swaps the whole buffer with
  the chip 2^b away (coordinate xor 2^b) and both add. Per step: 2^b hops, 2^b routes per link.
- ``rabenseifner`` [same paper]: reduce-scatter by recursive halving (send half of what is
  left, shortest distance and largest half first), then all-gather by recursive doubling back.
- ``swing`` [De Sensi et al., arXiv 2401.09356]: recursive doubling with the peers
  rho_s = (1 - (-2)^(s+1)) / 3 = 1, -1, 3, -5, 11 ...: an even coordinate adds rho_s, an odd one
  subtracts it (mod n). On a wrapped dim the distances are 1, 1, 3, 5, 11 (not 1, 2, 4, 8, 16),
  and even chips go one way round while odd ones go the other, so a link carries ceil(d/2)
  routes, not d. Needs wraparound (or a dim of 2). The buffer is cut into parts: one per dim,
  each walking the dims in its own rotated order so every step keeps every dim's links busy
  (the paper's multi-dimensional version), and each of those mirrored (evens subtract), so a
  one-hop step, whose evens use only the links leaving even chips, has the mirror use the rest.
- ``bruck`` all-to-all [Bruck et al. 1997, radix 2]: step b sends the half of the buffer whose
  offset to its destination has bit b set, 2^b chips on. The item from s to t = s + low + high
  (low: the part of the offset already travelled) sits at chunk s + high, so it starts at chunk
  t, moves 2^b chunks back with each hop, and ends on chip t at chunk s, where the direct
  all-to-all leaves it.

Closed forms count, per step: (routes on the busiest link) x message / beta, and hops x alpha;
in_flight.closed_form runs them one after another (one piece: lockstep) or in pieces.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.algorithms import Phase, Step
from gspmd_viz.sim.collectives.topology import Topology


# ----- which topologies they run on ---------------------------------------------------------
def unfit(topo: Topology, need_wrap: bool = False) -> str | None:
    """Why these algorithms cannot run on `topo` (None when they can)."""
    for d, (n, w) in enumerate(zip(topo.shape, topo.wrap, strict=True)):
        if n & (n - 1):
            return f"dim {d} has {n} chips; logarithmic algorithms need powers of two"
        if need_wrap and n > 2 and not w:
            return f"dim {d} has no wraparound; swing and bruck need a torus"
    return None


def _check(topo, name, need_wrap=False):
    reason = unfit(topo, need_wrap)
    if reason:
        raise ValueError(f"{name!r} cannot run on shape {topo.shape}: {reason}")


def _bit_steps(topo):
    """(dim, bit) of every step, the last (minor) dim first, low bits first."""
    dims = reversed(range(topo.ndim))
    return [(d, b) for d in dims for b in range(topo.shape[d].bit_length() - 1)]


def swing_rho(s: int) -> int:
    """Swing's signed peer distance at step s: 1, -1, 3, -5, 11, -21, ..."""
    return (1 - (-2) ** (s + 1)) // 3


def _peers(topo, d, offsets):
    """Chip ids reached by moving each chip's coordinate in dim d by offsets[chip] (mod n)."""
    coords = topo.coords
    moved = (coords[:, d] + offsets) % topo.shape[d]
    return np.arange(topo.n_chips) + (moved - coords[:, d]) * topo.strides[d]


def _xor_peers(topo, d, b):
    return _peers(topo, d, np.where((topo.coords[:, d] >> b) & 1, -(1 << b), 1 << b))


def signed_peers(topo, d, rho, mirror=False):
    """Peers in dim d: an even coordinate adds rho, an odd one subtracts it (mirror: the reverse).

    For odd rho the peers pair up (Swing); for even rho every chip sends one way along its line."""
    rho = -rho if mirror else rho
    even = topo.coords[:, d] % 2 == 0
    return _peers(topo, d, np.where(even, rho, -rho))


# ----- schedule builders: (topo, kind) -> (chunks per chip, phases, steps) ----------------
def _full_exchange(topo, peers_of, title):
    chips = np.arange(topo.n_chips)
    zero, one = np.zeros_like(chips), np.ones_like(chips)
    steps = [Step(0, chips, peers_of(d, b), zero, one, np.ones(len(chips), bool), zero)
             for d, b in _bit_steps(topo)]  # fmt: skip
    return 1, [Phase(title, 1)], steps


def recursive_doubling(topo: Topology, kind: str):
    """All-reduce: swap the whole buffer with the partner 2^b away and add, once per bit."""
    _check(topo, "recursive-doubling")
    return _full_exchange(topo, lambda d, b: _xor_peers(topo, d, b),
                          "swap and add with partners 1, 2, 4, ... away")  # fmt: skip


def _parts(topo):
    """Swing's torus version: the buffer in parts, each walking the dims in its own rotated order
    (a step keeps every dim busy), each order also mirrored: where evens send one way round the
    mirror's evens send the other, so a one-hop step uses every link, not half of them."""
    dims = [d for d in reversed(range(topo.ndim)) if topo.shape[d] > 1] or [0]
    return [(dims[p:] + dims[:p], mirror) for p in range(len(dims)) for mirror in (False, True)]


def _swing_steps(topo, order, mirror):
    """(dim, signed distance, mirror) of a part's steps: every Swing step of each dim in turn."""
    return [(d, swing_rho(s), mirror) for d in order for s in range(topo.shape[d].bit_length() - 1)]


def swing(topo: Topology, kind: str):
    """All-reduce: recursive doubling with Swing's peers, one part of the buffer per dim order."""
    _check(topo, "swing", need_wrap=True)
    chips = np.arange(topo.n_chips)
    parts = [_swing_steps(topo, order, mirror) for order, mirror in _parts(topo)]
    steps = []
    for group in zip(*parts, strict=True):  # every part takes the same number of steps
        peers = [signed_peers(topo, d, rho, mirror) for d, rho, mirror in group]
        chunk = np.repeat(np.arange(len(group)), len(chips))
        one = np.ones(len(chunk), np.int64)
        src = np.tile(chips, len(group))
        steps.append(Step(0, src, np.concatenate(peers), chunk, one, one == 1, chunk))
    title = "swap and add with Swing's peers 1, -1, 3, -5, ... away, parts in every dim order"
    return len(parts), [Phase(title, len(parts))], steps


def rabenseifner(topo: Topology, kind: str):
    """All-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather."""
    _check(topo, "rabenseifner")
    n = topo.n_chips
    chips = np.arange(n)
    lo, length, rs, undo = np.zeros(n, np.int64), n, [], []
    for d, b in _bit_steps(topo):
        peer, upper = _xor_peers(topo, d, b), (topo.coords[:, d] >> b) & 1
        length //= 2
        keep = lo + upper * length
        send = lo + (1 - upper) * length  # the half the partner keeps
        count = np.full(n, length)
        rs.append(Step(0, chips, peer, send, count, np.ones(n, bool), send))
        undo.append(Step(1, chips, peer, keep, count, np.zeros(n, bool), keep))
        lo = keep
    phases = [Phase("reduce-scatter by recursive halving", n),
              Phase("all-gather by recursive doubling", n)]  # fmt: skip
    return n, phases, rs + undo[::-1]


def bruck(topo: Topology, kind: str):
    """All-to-all: step (d, b) sends every chunk whose offset in dim d has bit b set."""
    _check(topo, "bruck", need_wrap=True)
    n = topo.n_chips
    chunk_coords = topo.coords  # chunk c of every chip, as coordinates
    steps = []
    for d, b in _bit_steps(topo):
        size = topo.shape[d]
        rel = (chunk_coords[None, :, d] - topo.coords[:, None, d]) % size  # [chip, chunk]
        low = (-rel) % (1 << b)  # how far the item has come along dim d
        moving = ((rel + 2 * low) >> b) & 1 == 1  # bit b of its offset in dim d
        src, chunk = np.nonzero(moving)
        hop = _peers(topo, d, np.full(n, 1 << b))  # chip (or chunk) 2^b on along dim d
        back = _peers(topo, d, np.full(n, -(1 << b)))
        one = np.ones_like(src)
        steps.append(Step(0, src, hop[src], chunk, one, np.zeros(len(src), bool), back[chunk]))
    return n, [Phase("send the half whose offset has bit b set, 2^b chips on", n)], steps


# ----- closed forms: (topo, kind, bytes per chip, beta, alpha) -> per step (bytes s, hops s) --
def recursive_doubling_costs(topo, kind, s, beta, alpha):
    return [(2**b * s / beta, 2**b * alpha) for _, b in _bit_steps(topo)]


def distance(n: int, rho: int) -> int:
    """Hops of a move by rho along a wrapped dim of n chips (the shorter way round)."""
    r = rho % n
    return min(r, n - r)


def _routes(n: int, rho: int, sign: int, parity: int, mirror: bool = False) -> int:
    """Routes of one step (evens move by rho, odds by -rho) crossing a link of direction `sign`
    leaving a chip of `parity`.

    A link is crossed by the routes that start in the d positions behind it; the movers (chips of
    one parity) make ceil(d / 2) of those when the link leaves a mover, floor(d / 2) otherwise
    (d / 2 either way when d is even). Evens move one way round (the way rho points, or the other
    way when mirrored; on a dim of 2 the one cable decides), odds the other.
    """
    d = distance(n, rho)
    evens_sign = 1 if (-rho if mirror else rho) % n <= n // 2 else -1
    movers = 0 if sign == evens_sign else 1  # parity of the chips moving in `sign` direction
    return (d + 1) // 2 if parity == movers else d // 2


def swing_costs(topo, kind, s, beta, alpha):
    """Per step: the longest route of any part, and the busiest link over the parts sharing it."""
    parts = [_swing_steps(topo, order, mirror) for order, mirror in _parts(topo)]
    return [step_cost(topo, group, s / len(parts), beta, alpha)
            for group in zip(*parts, strict=True)]  # fmt: skip


def step_cost(topo, group, message, beta, alpha):
    """(bytes s, hops s) of one step of parts (dim, signed distance, mirror), each sending
    `message` bytes per chip."""
    routes = max(
        sum(_routes(topo.shape[d], rho, sign, parity, m) for d, rho, m in group if d == dim)
        for dim, _, _ in group for sign in (1, -1) for parity in (0, 1)
    )  # fmt: skip
    hops = max(distance(topo.shape[d], rho) for d, rho, _ in group)
    return routes * message / beta, hops * alpha


def rabenseifner_costs(topo, kind, s, beta, alpha):
    """Halving steps (half of what is left, 2^b hops away), then their doubling twins reversed."""
    halving, message = [], s
    for _, b in _bit_steps(topo):
        message /= 2
        halving.append((2**b * message / beta, 2**b * alpha))
    return halving + halving[::-1]


def bruck_costs(topo, kind, s, beta, alpha):
    return [(2**b * s / 2 / beta, 2**b * alpha) for _, b in _bit_steps(topo)]
