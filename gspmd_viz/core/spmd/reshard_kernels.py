"""Reshard steps as one device runs them inside shard_map, on its local (padded) buffer: one
kernel per step kind (STEP_KERNELS, keyed like ReshardStep.kind) and a whole plan applied."""

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.reshard.permute_rounds import moving, permute_rounds
from gspmd_viz.core.spmd.local_kernels import axis_index


def fit_dim(x, dim: int, size: int):
    """Pad with zeros or trim `dim` to `size` (right side)."""
    have = x.shape[dim]
    if have > size:
        return jax.lax.slice_in_dim(x, 0, size, axis=dim)
    if have < size:
        pad = [(0, 0)] * x.ndim
        pad[dim] = (0, size - have)
        return jnp.pad(x, pad)
    return x


def _local(step, side: str, shape):
    return getattr(step, side).shard_shape(shape)


def _slice(step, x, shape):
    if not step.dims:  # blocks that do not nest, each device's inside its own: _moved_pieces
        return _moved_pieces(step, x, shape)
    (d,) = step.dims
    size = _local(step, "after", shape)[d]
    n = step.after.dim_shards(d) // step.before.dim_shards(d)
    x = fit_dim(x, d, max(x.shape[d], n * size))
    # [k] -> dynamic_slice(axes) -> [k / n]
    return jax.lax.dynamic_slice_in_dim(x, axis_index(step.axes) * size, size, axis=d)


def _all_gather(step, x, shape):
    (d,) = step.dims
    if d == 0:
        # [k, ..] -> all_gather(axes) -> [n k, ..]: d is outermost already, nothing to copy
        x = jax.lax.all_gather(x, step.axes, axis=0, tiled=True)
    else:
        # [.., k, ..] -> all_gather(axes) into a new outermost dim -> [n, .., k, ..] -> move it
        # beside dim d -> [.., n k, ..]. Gathering along an inner d itself makes XLA:CPU copy
        # the operand and the result into a layout with d outermost and copy the result back;
        # this way the move into place fuses into the reader when it can.
        pieces = jax.lax.all_gather(x, step.axes, axis=0)
        x = jnp.moveaxis(pieces, 0, d).reshape(*x.shape[:d], -1, *x.shape[d + 1 :])
    # -> trim to the new shard size
    return fit_dim(x, d, _local(step, "after", shape)[d])


def _reduce_scatter(step, x, shape):
    (d,) = step.dims
    x = fit_dim(x, d, step.collective.shape[d])
    # [n k'] -> psum_scatter(axes) -> [k'] (bools summed as int32: a pending sum of bools
    # holds one True at most, from the device that looked it up, so the cast back is an or)
    summed = x.astype(jnp.int32) if x.dtype == jnp.bool_ else x  # psum_scatter refuses bools
    return jax.lax.psum_scatter(summed, step.axes, scatter_dimension=d, tiled=True).astype(x.dtype)


def _all_reduce(step, x, shape):
    if step.dims:  # a gather by summing: most of the gathered dim is padding
        (d,) = step.dims
        k, n = x.shape[d], step.collective.group_size
        # [k] -> into zeros [n k] at my offset -> trim to the gathered size -> psum -> [k']
        zeros = jnp.zeros((*x.shape[:d], n * k, *x.shape[d + 1 :]), x.dtype)
        x = jax.lax.dynamic_update_slice_in_dim(zeros, x, axis_index(step.axes) * k, axis=d)
        x = fit_dim(x, d, step.collective.shape[d])
    return jax.lax.psum(x, step.axes).astype(x.dtype)  # bools: as in _reduce_scatter


def _all_to_all(step, x, shape):
    split, concat = step.dims
    x = fit_dim(x, split, step.collective.shape[split])
    if step.collective.group_size == 2:
        x = _swap_halves(step.axes, x, split, concat)
    else:
        # [.., k_concat, .., n k_split, ..] -> all_to_all(axes) -> [.., n k_concat, .., k_split, ..]
        x = jax.lax.all_to_all(x, step.axes, split, concat, tiled=True)
    return fit_dim(x, concat, _local(step, "after", shape)[concat])


def _swap_halves(axes, x, split: int, concat: int):
    """An all-to-all over a pair of devices: each keeps the half of `split` that is its own
    and swaps the other, by one collective-permute. The same bytes as XLA's all-to-all, which
    XLA:CPU runs by copying both halves out to send and both in (its own to itself), holding
    one more copy of the operand than this does. It costs time on the CPU devices: XLA:CPU's
    collective-permute takes longer per call than its all-to-all (benchmarks/pair_swap.py)."""
    k, k_concat = x.shape[split] // 2, x.shape[concat]
    # per place in the pair: where its own half starts, where the one it sends starts, where
    # its result starts in [got, own, got] (looked up, not computed: no index arithmetic)
    starts = jnp.asarray([[0, k, k_concat], [k, 0, 0]], np.int32)
    mine, sent, result = _table_row(starts, axis_index(axes))
    # [.., k_concat, .., 2k, ..] -> my half, the other -> [.., k_concat, .., k, ..] each
    own = jax.lax.dynamic_slice_in_dim(x, mine, k, split, allow_negative_indices=False)
    out = jax.lax.dynamic_slice_in_dim(x, sent, k, split, allow_negative_indices=False)
    got = jax.lax.ppermute(out, tuple(axes), [(0, 1), (1, 0)])
    # -> [.., 3 k_concat, .., k, ..] -> place 0 takes [own, got], place 1 [got, own]
    # -> [.., 2 k_concat, .., k, ..] (XLA fuses the three into the slice)
    three = jnp.concatenate([got, own, got], axis=concat)
    return jax.lax.dynamic_slice_in_dim(
        three, result, 2 * k_concat, concat, allow_negative_indices=False
    )


def _table_row(table, row):
    """table[row] for a traced row, without jnp's wrap of negative indices."""
    return jax.lax.dynamic_index_in_dim(table, row, keepdims=False, allow_negative_indices=False)


def _moved_pieces(step, x, shape):
    """Each device's new shard: sliced out of its own buffer where it holds it, else sent by
    a holder, one collective-permute a round (`permute_rounds`; those keeping their own pass
    it to themselves in the first round, when it moves anything)."""
    mesh, local = step.before.mesh, step.after.shard_shape(shape)
    rounds = permute_rounds(step.before, step.after, shape)
    me = jax.lax.axis_index(mesh.axis_names)
    moves = moving(rounds)
    received = None
    if rounds[0] not in moves:  # [k_src] -> slice out my own new shard -> [k_dst]
        received = _piece(x, [(t, offsets) for _, t, offsets in rounds[0]], mesh.size, me, local)
    for sends in moves:
        # [k_src] -> slice out what my target this round needs -> [k_dst] -> ppermute -> [k_dst]
        piece = _piece(x, [(source, offsets) for source, _, offsets in sends], mesh.size, me, local)
        got = jax.lax.ppermute(piece, mesh.axis_names, [(s, t) for s, t, _ in sends])
        landed = np.zeros(mesh.size, bool)
        landed[[target for _, target, _ in sends]] = True
        received = got if received is None else jnp.where(jnp.asarray(landed)[me], got, received)
    return received


def _piece(x, slicers, devices: int, me, local):
    """The block of `local` shape each device in `slicers` (device, offsets) cuts from x."""
    offsets = np.zeros((devices, x.ndim), np.int32)
    for device, at in slicers:
        offsets[device] = at
    return jax.lax.dynamic_slice(x, tuple(jnp.asarray(offsets)[me]), local)


STEP_KERNELS = {  # ReshardStep.kind -> its kernel
    "slice": _slice,
    "all-gather": _all_gather,
    "reduce-scatter": _reduce_scatter,
    "all-reduce": _all_reduce,
    "all-to-all": _all_to_all,
    "collective-permute": _moved_pieces,
}


def apply_plan(plan, x):
    """Run a ReshardPlan on this device's local buffer (call inside shard_map)."""
    for step in plan.steps:
        x = STEP_KERNELS[step.kind](step, x, plan.shape)
    return x
