"""The per-device halo exchange: runs inside `jax.shard_map`, one program for every shard.

For each sharded spatial dim (one after the other, so the second exchange carries the first
one's halo rows along: that is how corner halos travel for 2-D spatial partitioning):

1. every `Transfer` of the plan is one `ppermute` of the same slice of every sender's shard;
2. the pieces, the shard itself and zero filler are concatenated in a static layout;
3. a `dynamic_slice` at the shard's own offset (a table indexed by `axis_index`) cuts the
   window-ready input [start(i), start(i) + ready_size): trimming a negative halo is just a
   later start;
4. elements outside [0, N) (padding, the uneven last shard's filler) become the pad value.

XLA: ExchangeHalo + ExchangeHaloAndGetValidData (spmd_partitioner_util.cc). Base dilation is
then applied locally (interior padding) and a second dynamic_slice aligns shard i's first
window, so the local op runs with no padding and no base dilation on the sharded dims.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.halo.arithmetic import HaloPlan
from gspmd_viz.core.halo.rounds import Transfer
from gspmd_viz.core.sharding.collective import Collective


@dataclasses.dataclass(frozen=True)
class SpatialSplit:
    """One spatially sharded dim: operand `dim` split over mesh `axis` as `plan` says."""

    dim: int
    axis: str | tuple[str, ...]
    plan: HaloPlan

    @property
    def split_axes(self) -> tuple[str, ...]:
        return (self.axis,) if isinstance(self.axis, str) else tuple(self.axis)


@dataclasses.dataclass(frozen=True)
class HaloPermute:
    """One collective-permute of an exchange, with the bytes each sender puts on the wire."""

    split: SpatialSplit
    transfer: Transfer
    shape: tuple[int, ...]  # per-device piece
    dtype: np.dtype
    source: str = ""  # the equation whose halo this is

    @property
    def bytes_per_sender(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def senders(self) -> int:
        return len(self.transfer.pairs)

    def collective(self, group_size: int) -> Collective:
        """As a ledger entry: a collective-permute over the split's mesh axis."""
        axes, dims = self.split.split_axes, (self.split.dim,)
        kind = "collective-permute"
        return Collective(kind, axes, self.shape, self.dtype, group_size, self.source, dims)


def _table(values, index):
    """values[index] for a traced shard index (XLA: TableLookup)."""
    return jnp.asarray(np.asarray(values, np.int32))[index]


def permute_blocks(x, axes, pairs):
    """jax.lax.ppermute between blocks of a dim split over `axes` (major first). ppermute
    numbers devices in the mesh's axis order, blocks count in the order of `axes`: with a dim
    split over ("y", "x") of a mesh (x, y), block 1 is device (x=1, y=0), ppermute's 2."""
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    mesh = jax.sharding.get_abstract_mesh()
    sizes = [mesh.shape[a] for a in axes]
    in_mesh_order = sorted(range(len(axes)), key=lambda k: mesh.axis_names.index(axes[k]))

    def device(block: int) -> int:
        coords = np.unravel_index(block, sizes)
        order = in_mesh_order
        return int(np.ravel_multi_index([coords[k] for k in order], [sizes[k] for k in order]))

    perm = [(device(src), device(dst)) for src, dst in pairs]
    return jax.lax.ppermute(x, axes if len(axes) > 1 else axes[0], perm=perm)


def _send(x, split: SpatialSplit, t: Transfer):
    # [.., shard, ..] -> slice [lo, hi) -> ppermute(axis) -> [.., hi - lo, ..]
    piece = jax.lax.slice_in_dim(x, t.lo, t.hi, axis=split.dim)
    return permute_blocks(piece, split.axis, t.pairs)


def _layout_bounds(plan: HaloPlan) -> tuple[int, int]:
    """Span of the assembled buffer relative to the own shard's first element."""
    n, size = plan.shard_size, plan.ready_size
    starts = [r.start - n * i for i, r in enumerate(plan.needs)]
    starts += [at for t in plan.transfers if t.packed for at in t.landings]
    ends = [s + size for s in starts] + [at + t.size for t in plan.transfers for at in t.landings]
    return min(0, *starts), max(n, *ends)


def _assemble(x, split: SpatialSplit, received) -> tuple[jax.Array, int]:
    """Concatenate pieces (sorted by landing place) with zero filler, then write the packed
    rounds' pieces where each receiver's lands; returns (buffer, begin)."""
    begin, end = _layout_bounds(split.plan)
    static = [(t.at, p) for t, p in received if not t.packed]
    pieces = sorted([(0, x), *static], key=lambda item: item[0])
    parts, cursor = [], begin
    for at, piece in pieces:
        parts.append(_zeros_like_dim(x, split.dim, at - cursor))
        parts.append(piece)
        cursor = at + piece.shape[split.dim]
    parts.append(_zeros_like_dim(x, split.dim, end - cursor))
    buffer = jnp.concatenate([p for p in parts if p.shape[split.dim]], axis=split.dim)
    for t, piece in received:
        if t.packed:
            buffer = _land(buffer, piece, split, t, begin)
    return buffer, begin


def _landing_table(t: Transfer, shards: int, begin: int = 0) -> list[int]:
    """Per shard: where t's piece lands at it, less `begin` (0 at shards it sends nothing)."""
    at = [0] * shards
    for (_, dst), landing in zip(t.pairs, t.landings, strict=True):
        at[dst] = landing - begin
    return at


def _land(buffer, piece, split: SpatialSplit, t: Transfer, begin: int):
    """A packed round's piece written where this shard's lands (non-receivers keep theirs)."""
    at = _landing_table(t, split.plan.shards, begin)  # non-receivers rewrite what is there
    i = jax.lax.axis_index(split.axis)
    offset = _table(at, i)
    here = jax.lax.dynamic_slice_in_dim(buffer, offset, t.size, axis=split.dim)
    receives = _table([any(d == k for _, d in t.pairs) for k in range(len(at))], i)
    update = jnp.where(receives.astype(bool), piece, here)
    return jax.lax.dynamic_update_slice_in_dim(buffer, update, offset, axis=split.dim)


def _zeros_like_dim(x, dim: int, size: int):
    shape = list(x.shape)
    shape[dim] = max(size, 0)
    return jnp.zeros(shape, x.dtype)


def _mask_outside(y, split: SpatialSplit, first, pad_value):
    """Elements whose global index first + k is outside [0, N) become `pad_value`."""
    index = first + jax.lax.broadcasted_iota(jnp.int32, y.shape, split.dim)
    valid = (index >= 0) & (index < split.plan.size)
    return jnp.where(valid, y, jnp.asarray(pad_value, y.dtype))


def exchange_halo(x, split: SpatialSplit, pad_value):
    """Local shard -> its window-ready input [start(i), start(i) + ready_size) along `dim`.

    # [.., n, ..] -> ppermute per round -> concat -> dynamic_slice -> [.., ready_size, ..]
    """
    plan, dim = split.plan, split.dim
    if x.shape[dim] != plan.shard_size:
        raise ValueError(
            f"exchange_halo: dim {dim} of the local shard has {x.shape[dim]} elements, "
            f"the plan expects shards of {plan.shard_size}"
        )
    received = [(t, _send(x, split, t)) for t in plan.transfers]
    buffer, begin = _assemble(x, split, received)
    i = jax.lax.axis_index(split.axis)
    first = _table([r.start for r in plan.needs], i)
    offset = first - plan.shard_size * i - begin
    ready = jax.lax.dynamic_slice_in_dim(buffer, offset, plan.ready_size, axis=dim)
    return _mask_outside(ready, split, first, pad_value)


def _dilate_and_align(y, split: SpatialSplit, pad_value):
    """Window-ready elements -> window-ready positions: base dilation done locally, then shard
    i's first window start moved to position 0.  [.., ready_size, ..] -> [.., span, ..]"""
    plan, dim = split.plan, split.dim
    bd = plan.base_dilation
    span = plan.ready_span
    if bd == 1:
        return jax.lax.slice_in_dim(y, 0, span, axis=dim)
    dilated = (plan.ready_size - 1) * bd + 1
    high = max(0, bd - 1 + span - (bd - 1 + dilated))
    config = [(0, 0, 0)] * y.ndim
    config[dim] = (bd - 1, high, bd - 1)
    padded = jax.lax.pad(y, jnp.asarray(pad_value, y.dtype), config)
    offset = (bd - 1) - _table(plan.dilation_offsets, jax.lax.axis_index(split.axis))
    return jax.lax.dynamic_slice_in_dim(padded, offset, span, axis=dim)


def window_ready(x, splits, pad_value):
    """Exchange every split dim (in order), then dilate and align them: the local op then runs
    on these dims with padding (0, 0) and base dilation 1, keeping stride and window dilation."""
    for split in splits:
        x = exchange_halo(x, split, pad_value)
    for split in splits:
        x = _dilate_and_align(x, split, pad_value)
    return x


def _return_one(y, split: SpatialSplit):
    """[.., span, ..] (element start(i) + k at k) -> [.., n, ..]: each transfer of the exchange
    runs backwards, and what a shard computed for its neighbour's elements is added there."""
    plan, dim, n = split.plan, split.dim, split.plan.shard_size
    lefts = [n * i - r.start for i, r in enumerate(plan.needs)]  # where own element 0 sits
    landings = [a for t in plan.transfers for a in t.landings]
    margin = n + max(abs(v) for v in (*lefts, *plan.right, plan.ready_span, *landings))
    config = [(0, 0, 0)] * y.ndim
    config[dim] = (margin, margin, 0)
    padded = jax.lax.pad(y, jnp.zeros((), y.dtype), config)
    left = _table(lefts, jax.lax.axis_index(split.axis))
    own = jax.lax.dynamic_slice_in_dim(padded, left + margin, n, axis=dim)
    for t in plan.transfers:  # the receiver holds the sender's [lo, hi) at its landing
        at = _landing_table(t, plan.shards)
        start = left + margin + _table(at, jax.lax.axis_index(split.axis))
        piece = jax.lax.dynamic_slice_in_dim(padded, start, t.size, axis=dim)
        got = permute_blocks(piece, split.axis, [(dst, src) for src, dst in t.pairs])
        mine = jax.lax.slice_in_dim(own, t.lo, t.hi, axis=dim)
        own = jax.lax.dynamic_update_slice_in_dim(own, mine + got, t.lo, axis=dim)
    return own


def return_halo(y, splits):
    """The exchange transposed: a window-ready result (one scattered value per window) ->
    the local shard, halo contributions added to the shards that own them. Dims in reverse
    order, so the corners travel back with the first dim.  # XLA: HandleSelectAndScatter"""
    for split in reversed(splits):
        y = _return_one(y, split)
    return y


def halo_permutes(splits, local_shape, dtype, source: str = "") -> tuple[HaloPermute, ...]:
    """Every collective-permute `window_ready` issues, with its per-device piece shape."""
    shape, out = list(local_shape), []
    for split in splits:
        for t in split.plan.transfers:
            piece = list(shape)
            piece[split.dim] = t.size
            out.append(HaloPermute(split, t, tuple(piece), np.dtype(dtype), source))
        shape[split.dim] = split.plan.ready_size
    return tuple(out)


def bytes_sent_per_device(permutes, mesh_shape: dict[str, int]) -> dict[tuple, int]:
    """{mesh coordinate (as a tuple of axis indices) -> bytes it sends} over all permutes."""
    names = list(mesh_shape)
    sent: dict[tuple, int] = {}
    for coord in np.ndindex(*mesh_shape.values()):
        total = 0
        for p in permutes:
            axes = p.split.split_axes
            index = int(
                np.ravel_multi_index(
                    [coord[names.index(a)] for a in axes], [mesh_shape[a] for a in axes]
                )
            )
            total += p.bytes_per_sender * sum(src == index for src, _ in p.transfer.pairs)
        sent[tuple(coord)] = total
    return sent
