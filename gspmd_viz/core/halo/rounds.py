"""The collective-permute rounds of one sharded dim's halo exchange, from a `HaloPlan`
(arithmetic.py): which slice of its own shard each source sends, to which receivers, in how
many permutes. Every sender of a round sends the same static slice (one program for all shards), so
a round whose pieces differ sends their hull.

Two packings, and the plan keeps the one whose slices sum to fewer elements (the bytes a device
that sends in every round sends; what both partitioners are compared by):
- by distance: one round per side and distance, trimmed to the hull of what its receivers'
  real windows read (XLA's ExchangeHalo sends the widest halo over every link), rounds of the
  same slice with distinct senders and receivers packed into one;
- by source (XLA's ExchangeHaloCompact): each source sends its next piece, nearest its
  receiver's window start first, unless that receiver already gets one in this round; fewer,
  wider rounds when the halos differ per shard.

`plan` below is a `halo.HaloPlan` (shard_size, shards, reads, needs, owned)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One collective-permute round: every source shard sends `[lo, hi)` of its own shard to
    the shard `distance` away on `side` ("left": the receivers' left halo, data flows to higher
    shard indices; "right": their right halo, data flows down). A packed round also carries
    other distances (either side) to receivers the first does not reach, from other senders."""

    side: str  # of the first distance; `sides` for a packed round
    distance: int  # the first; `distances` for a packed round
    lo: int
    hi: int
    pairs: tuple[tuple[int, int], ...]  # (source shard, target shard)
    landings: tuple[int, ...]  # per pair: where element `lo` lands, relative to the
    # receiver's own first element: lo + (source − target)·shard size

    @property
    def size(self) -> int:
        return self.hi - self.lo

    @property
    def distances(self) -> tuple[int, ...]:
        return tuple(sorted({abs(src - dst) for src, dst in self.pairs}))

    @property
    def sides(self) -> tuple[str, ...]:
        return tuple(s for s in ("left", "right") if any((a < b) == (s == "left")
                                                         for a, b in self.pairs))  # fmt: skip

    @property
    def packed(self) -> bool:
        """Several distances in one permute: the piece lands in a different place at each."""
        return len(set(self.landings)) > 1

    @property
    def at(self) -> int:
        """Where element `lo` lands at every receiver (a round of one distance)."""
        if self.packed:
            raise ValueError(f"a packed round lands per receiver: {self.landings}")
        return self.landings[0]


def _round_piece(plan, side: str, distance: int) -> Transfer | None:
    """The slice every source sends at this distance: the hull of what receivers read."""
    n, step = plan.shard_size, (-1 if side == "left" else 1)
    lo, hi, pairs = n, 0, []
    for dst, read in enumerate(plan.reads):
        src = dst + step * distance
        if not 0 <= src < plan.shards:
            continue
        own = plan.owned(src)
        a, b = max(read.start, own.start), min(read.stop, own.stop)
        if a < b:
            lo, hi = min(lo, a - n * src), max(hi, b - n * src)
            pairs.append((src, dst))
    if not pairs:
        return None
    return Transfer(side, distance, lo, hi, tuple(pairs), (lo + step * distance * n,) * len(pairs))


def _pack(a: Transfer, b: Transfer) -> Transfer | None:
    """Two rounds of the same slice whose sources and targets are all distinct as one
    collective-permute (rounds of different slices: `rounds_by_source`)."""
    pairs = a.pairs + b.pairs
    if len({s for s, _ in pairs}) < len(pairs) or len({d for _, d in pairs}) < len(pairs):
        return None
    if (a.lo, a.hi) != (b.lo, b.hi):
        return None
    return dataclasses.replace(a, pairs=pairs, landings=a.landings + b.landings)


def rounds_by_distance(plan) -> tuple[Transfer, ...]:
    """One round per side and distance, packed into an earlier one where they fit."""
    out: list[Transfer] = []
    for side in ("left", "right"):
        for distance in range(1, plan.shards):
            piece = _round_piece(plan, side, distance)
            if piece is None:
                continue
            for k, t in enumerate(out):
                packed = _pack(t, piece)
                if packed is not None:
                    out[k] = packed
                    break
            else:
                out.append(piece)
    return tuple(out)


def _pieces_by_source(plan) -> list[list[tuple[int, int, int, int]]]:
    """Per source shard, what each other shard reads of it: (where it sits in the receiver's
    window, receiver, lo, hi of the source's own shard), nearest the window's start first."""
    n, out = plan.shard_size, [[] for _ in range(plan.shards)]
    for dst, read in enumerate(plan.reads):
        for src in range(plan.shards):
            own = plan.owned(src)
            a, b = max(read.start, own.start), min(read.stop, own.stop)
            if src != dst and a < b:
                out[src].append((a - plan.needs[dst].start, dst, a - n * src, b - n * src))
    return [sorted(pieces) for pieces in out]


def _lopsided(lo: int, hi: int, a: int, b: int, n: int) -> bool:
    """A small left piece and a small right piece would make a hull of the whole shard."""
    return (lo > b and hi == n and a == 0) or (hi < a and lo == 0 and b == n)


def _greedy_round(plan, queues) -> Transfer:
    """Each source sends its next piece unless its receiver already gets one this round; the
    round sends the hull of the pieces taken (every sender the same static slice)."""
    n, pairs, lo, hi = plan.shard_size, [], plan.shard_size, 0
    for src, queue in enumerate(queues):
        if not queue:
            continue
        _, dst, a, b = queue[0]
        if pairs and (dst in {d for _, d in pairs} or _lopsided(lo, hi, a, b, n)):
            continue
        queue.pop(0)
        pairs.append((src, dst))
        lo, hi = min(lo, a), max(hi, b)
    src, dst = pairs[0]
    side = "left" if src < dst else "right"
    landings = tuple(lo + (s - d) * n for s, d in pairs)
    return Transfer(side, abs(src - dst), lo, hi, tuple(pairs), landings)


def rounds_by_source(plan) -> tuple[Transfer, ...]:
    """XLA's compact exchange (ExchangeHaloCompact): rounds of distinct senders and receivers,
    whatever their distance, each sending the hull of its senders' pieces."""
    queues, out = _pieces_by_source(plan), []
    while any(queues):
        out.append(_greedy_round(plan, queues))
    return tuple(out)


def cheapest_rounds(plan) -> tuple[Transfer, ...]:
    """The cheaper of the two packings (elements per sender summed over rounds): rounds by
    distance trim each slice to what its receivers read; rounds by source pack pieces of
    different distances into fewer, wider permutes."""
    by_distance, by_source = rounds_by_distance(plan), rounds_by_source(plan)
    return min(by_distance, by_source, key=lambda rounds: sum(t.size for t in rounds))
