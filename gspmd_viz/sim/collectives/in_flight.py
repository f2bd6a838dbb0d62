"""Pieces in flight: a payload split into pieces that follow one another through the steps.

Run as one piece, a schedule is lockstep: a step lasts its busiest link's bytes over beta plus
its longest route's hops times alpha, and the next step starts when it ends. The hop latency is
time in flight, though, not time on a link (LogGP's L against its per-byte gap G, Alexandrov et
al., SPAA 1995): while a message crosses its hops, the link it left can already carry other
bytes. Split the payload into k pieces that each run the whole schedule. A piece starts a step
once its previous step has ended (a barrier per piece, as in lockstep); a link carries one
piece's bytes at a time, first come first served; and a step's bytes take 1/k of the time. So
piece 2 sends while piece 1 is in flight, and latency overlaps bytes, which lockstep never
allows. The scaling book's estimate max(T_min X / 2, V / W) assumes that overlap.

The model charges nothing per message. Real DMA engines pay a start-up per transfer, so more
pieces are not free there: ``algorithm="auto"`` tries only ``PIECES``.

``run`` is the event loop the simulator (a clock per link) and the closed form (the busiest
link's clock) share: pieces take their steps in the order they become ready, ties going to the
lower piece.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

PIECES = (1, 2, 4)  # what algorithm="auto" tries
MAX_PIECES = 64  # the simulator times every piece's every step


def check_pieces(pieces) -> int:
    if isinstance(pieces, bool) or not isinstance(pieces, int) or not 1 <= pieces <= MAX_PIECES:
        raise ValueError(f"pieces must be a whole number from 1 to {MAX_PIECES}, got {pieces!r}")
    return pieces


def run(n_steps: int, pieces: int, advance: Callable[[int, int, float], float]) -> float:
    """Seconds until the last piece ends its last step. `advance(step, piece, ready)` times one
    piece's step that may start at `ready` and returns when it ends (its data has arrived)."""
    ready = [(0.0, piece, 0) for piece in range(pieces)]  # (ready at, piece, step)
    end = 0.0
    while ready and n_steps:
        t, piece, step = heapq.heappop(ready)
        done = advance(step, piece, t)
        if step + 1 < n_steps:
            heapq.heappush(ready, (done, piece, step + 1))
        end = max(end, done)
    return end


def closed_form(costs: list[tuple[float, float]], pieces: int = 1) -> float:
    """Seconds of steps with (bytes s, hops s) each for the whole payload, run in `pieces`
    pieces. One clock stands for every link, each step's busiest link counted on it: the
    simulator's time when every step loads every link equally. One piece is lockstep: the
    steps' times added up."""
    if pieces == 1:
        return sum(byte_s + hop_s for byte_s, hop_s in costs)
    link_free = 0.0

    def advance(step, piece, ready):
        nonlocal link_free
        byte_s, hop_s = costs[step]
        link_free = max(ready, link_free) + byte_s / pieces
        return link_free + hop_s

    return run(len(costs), pieces, advance)
