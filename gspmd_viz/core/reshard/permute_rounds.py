"""Collective-permutes between shardings whose every new block lies inside an old one (steps.py
proposes them): who sends which piece to whom, in rounds where a holder is asked for several
pieces (an uneven split that does not nest: 4 experts over 8 devices to 4 over 4), and how many
rounds that takes, counted without pairing devices so a 64x64 mesh plans fast.
"""

import math

import numpy as np

from gspmd_viz.core.sharding.sharding import Sharding, ceil_div


def within(n: int, have: int, want: int) -> bool:
    """Does every shard of a dim of n split `want` ways that holds data lie, with its padding,
    inside the buffer of one shard of it split `have` ways?"""
    held, wanted = ceil_div(n, have), ceil_div(n, want)  # shard sizes
    return all(j * wanted % held + wanted <= held for j in range(want) if j * wanted < n)


def permute_rounds(src: Sharding, dst: Sharding, shape) -> list[list[tuple[int, int, tuple]]]:
    """Rounds of (source, target, offsets): every device whose dst shard holds data takes it
    from one device whose src shard contains it, sliced at `offsets` in that one's buffer,
    and each device sends at most once a round. A device holding its own keeps it (source =
    target, in round 0); the others are spread over the holders of their src shard, those
    not keeping their own first. A shard of padding only gets nothing (it is never read)."""
    hold, asked, offsets, valid = _asks(src, dst, shape)
    holders: dict[int, list[int]] = {}
    for dev, key in enumerate(hold.tolist()):
        holders.setdefault(key, []).append(dev)
    load = {int(dev): 1 for dev in np.flatnonzero(valid & (asked == hold))}
    rounds = [[(dev, dev, tuple(offsets[:, dev].tolist())) for dev in load]]
    for dev in np.flatnonzero(valid & (asked != hold)).tolist():
        source = min(holders[int(asked[dev])], key=lambda h: (load.get(h, 0), h))
        r = load.get(source, 0)
        load[source] = r + 1
        rounds.extend([] for _ in range(r + 1 - len(rounds)))
        rounds[r].append((source, dev, tuple(offsets[:, dev].tolist())))
    return rounds


def moving(rounds) -> list[list[tuple[int, int, tuple]]]:
    """The rounds of `permute_rounds` in which some piece leaves its device."""
    return [sends for sends in rounds if any(s != t for s, t, _ in sends)]


def round_count(src: Sharding, dst: Sharding, shape) -> int:
    """len(moving(permute_rounds(src, dst, shape))), counted without pairing devices (a
    64x64 mesh has 4096): per src shard c, H holders, K of them keeping their own, A other
    askers. Round 0 has a piece leave where some A > 0 meets a holder not keeping its own;
    the most loaded holders of c then send in rounds up to ceil((A + K) / H) - 1."""
    hold, asked, _, valid = _asks(src, dst, shape)
    total = math.prod(src.dim_shards(d) for d in range(len(shape)))
    holders = np.bincount(hold, minlength=total)
    askers = np.bincount(asked[valid], minlength=total)
    keeping = np.bincount(asked[valid & (asked == hold)], minlength=total)
    away = askers - keeping
    busy = away > 0
    if not busy.any():
        return 0
    first = bool(np.any(holders[busy] > keeping[busy]))
    last = int(np.max(-(-(away[busy] + keeping[busy]) // holders[busy])))
    return int(first) + max(0, last - 1)


def _asks(src: Sharding, dst: Sharding, shape):
    """Per device (arrays over device ids): the src shard it holds and the one its dst shard
    lies in (flat indices over src's shards), the offsets of its dst shard in that one's
    buffer ([ndim, devices]), and whether its dst shard holds any data."""
    held, wanted = src.shard_shape(shape), dst.shard_shape(shape)
    start = _block_index(dst, len(shape)) * np.array(wanted)[:, None]
    valid = np.all(start < np.array(shape)[:, None], axis=0)
    shards = [src.dim_shards(d) for d in range(len(shape))]
    size = np.maximum(np.array(held), 1)[:, None]  # a dim of 0 elements: shards of 0
    want = np.minimum(start // size, np.array(shards)[:, None] - 1)  # (clipped: padding only)
    hold = np.ravel_multi_index(tuple(_block_index(src, len(shape))), shards)
    return hold, np.ravel_multi_index(tuple(want), shards), start % size, valid


def _block_index(sharding: Sharding, ndim: int) -> np.ndarray:
    """[ndim, devices]: the shard of each tensor dim every device holds (shard_index)."""
    mesh = sharding.mesh
    grid = np.indices(mesh.sizes).reshape(len(mesh.sizes), -1)  # [axes, devices]
    coords = dict(zip(mesh.axis_names, grid, strict=True))
    index = np.zeros((ndim, mesh.size), int)
    for d in range(ndim):
        for axis in sharding.dim_axes(d):
            index[d] = index[d] * mesh.axis_size(axis) + coords[axis]
    return index
