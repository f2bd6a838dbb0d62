"""Halo rounds that can share one collective-permute.

`HaloPlan.transfers` has one round per (side, distance). When several rounds send the same
slice [lo, hi) of the senders' shards and no shard sends, or receives, in two of them, one
collective-permute carries them all: each device still sends at most one piece. A strided slice
is the typical case: `h[1::2]` of a dim split 8 ways (one row per shard) reads row 2j+1 into
shard j, from distances 1, 2, 3 and 4, one row each: one permute of a row instead of four.
# XLA: a collective-permute's source-target pairs may be any distance apart
"""

from __future__ import annotations

from gspmd_viz.core.halo import Transfer


def _fits(group: list[Transfer], t: Transfer) -> bool:
    head = group[0]
    senders = {src for g in group for src, _ in g.pairs}
    receivers = {dst for g in group for _, dst in g.pairs}
    return (
        (head.lo, head.hi) == (t.lo, t.hi)
        and senders.isdisjoint(src for src, _ in t.pairs)
        and receivers.isdisjoint(dst for _, dst in t.pairs)
    )


def merged_rounds(transfers) -> tuple[tuple[Transfer, ...], ...]:
    """The transfers grouped into collective-permutes, first fit, in their order."""
    groups: list[list[Transfer]] = []
    for t in transfers:
        group = next((g for g in groups if _fits(g, t)), None)
        if group is None:
            groups.append([t])
        else:
            group.append(t)
    return tuple(tuple(g) for g in groups)


def receivers_of(t: Transfer, shards: int) -> list[bool]:
    """Per shard: does it receive in round t (a table the per-device program indexes)."""
    targets = {dst for _, dst in t.pairs}
    return [k in targets for k in range(shards)]


def pairs_of(group) -> list[tuple[int, int]]:
    return [pair for t in group for pair in t.pairs]
