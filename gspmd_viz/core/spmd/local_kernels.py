"""One equation on local shards, as one device runs it inside shard_map: padding masks, shard
offsets, split lookups, binding the primitive on local shapes, and the right-away all-reduce of
partial max/min."""

import jax
import jax.numpy as jnp

from gspmd_viz.core.program.trace import FIRST_START, clamped_starts
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.spmd.local_ops import Lookup, Mask, Offset, WriteAt


def axis_index(axes):
    """Linear index of this device along `axes` (major first), as jax numbers them."""
    return jax.lax.axis_index(tuple(axes)) if axes else 0


def _shard_start(axes, local_size: int):
    return jax.lax.axis_index(tuple(axes)) * local_size


def apply_mask(x, mask: Mask):
    """select(iota + offset < N, x, identity)."""
    k = x.shape[mask.dim]
    pos = jax.lax.broadcasted_iota(jnp.int32, x.shape, mask.dim) + _shard_start(mask.axes, k)
    return jnp.where(pos < mask.size, x, jnp.asarray(mask.fill, x.dtype))


def apply_offset(x, offset: Offset):
    k = x.shape[offset.dim]
    return x + _shard_start(offset.axes, k).astype(x.dtype)


def local_indices(indices, lookup: Lookup):
    """Shift global indices into this device's block; `valid`: which results this device
    gives (the others become 0 in the pending sum).
    clip: indices are clamped globally first, so exactly one block holds each.
    fill: an index out of global range gets a locally out-of-range index on every device, so
    the local gather gives the fill value, kept by the device holding block 0 only."""
    valid = jnp.ones(indices.shape[:-1], bool)
    outside, first = jnp.zeros(indices.shape[:-1], bool), True
    for d in lookup.dims:
        i = indices[..., d.component]
        if lookup.mode == "clip":
            i = jnp.clip(i, 0, d.last)
        outside |= (i < 0) | (i > d.last)
        local = i - _shard_start(d.axes, d.local).astype(indices.dtype)
        valid &= (local >= 0) & (local < d.local)
        first &= axis_index(d.axes) == 0
        indices = indices.at[..., d.component].set(local)
    if lookup.mode == "fill":
        for d in lookup.dims:  # -1 is out of range in every block: the local gather fills
            indices = indices.at[..., d.component].set(
                jnp.where(outside, -1, indices[..., d.component])
            )
        valid = jnp.where(outside, first, valid)
    return indices, valid


def mask_lookup(out, valid, lookup: Lookup):
    valid = jnp.expand_dims(valid, lookup.offset_dims) if lookup.offset_dims else valid
    return jnp.where(valid, out, jnp.zeros((), out.dtype))


def written_indices(indices, at: WriteAt):
    """Global scatter indices -> this device's block; an update written elsewhere (or out of
    range under "drop") gets index -1 in every component, which the local scatter drops."""
    outside = jnp.zeros(indices.shape[:-1], bool)
    for c, last in enumerate(at.last):
        i = indices[..., c]
        if at.mode == "clip":
            i = jnp.clip(i, 0, last)
            indices = indices.at[..., c].set(i)
        outside |= (i < 0) | (i > last)
    for d in at.dims:
        local = indices[..., d.component] - _shard_start(d.axes, d.local).astype(indices.dtype)
        outside |= (local < 0) | (local >= d.local)
        indices = indices.at[..., d.component].set(local)
    return jnp.where(outside[..., None], jnp.asarray(-1).astype(indices.dtype), indices)


def run_local(eqn, params, args, masks=(), offsets=(), lookup=None):
    """Bind the primitive on local buffers (after masking padding); returns a list."""
    if entry_for(eqn).identity:
        return list(args[: len(eqn.outputs)])
    args = list(args)
    for m in masks:
        args[m.operand] = apply_mask(args[m.operand], m)
    if isinstance(lookup, WriteAt):
        args[1] = written_indices(args[1], lookup)
    elif lookup is not None:
        args[1], valid = local_indices(args[1], lookup)
    if eqn.primitive in FIRST_START:
        args = clamped_starts(eqn.primitive, args, params)
    try:
        out = eqn.eqn.primitive.bind(*args, **params)
    except Exception as err:  # name the equation, say what to do
        raise NotImplementedError(
            f"eqn {eqn.index}: primitive {eqn.primitive!r} could not run on local shards "
            f"({type(err).__name__}: {err}). Leave its dims replicated (drop the annotation "
            "that splits them) or name the params to rewrite in its entry (core/registry.py)."
        ) from err
    outs = list(out) if eqn.eqn.primitive.multiple_results else [out]
    if isinstance(lookup, Lookup):
        outs[0] = mask_lookup(outs[0], valid, lookup)
    for off in offsets:
        outs[0] = apply_offset(outs[0], off)
    return outs


def keeps_nan(combine: str, dtype) -> bool:
    """Does all_reduce combine these values with integer keys that keep a NaN (a float max or
    min) rather than with one pmax / pmin / psum?"""
    return combine in ("max", "min") and jnp.issubdtype(dtype, jnp.floating)


def all_reduce(x, combine: str, axes):
    """Combine partial max/min results across devices right away."""
    if keeps_nan(combine, x.dtype):
        return _nan_propagating(x, combine, tuple(axes))
    op = {"max": jax.lax.pmax, "min": jax.lax.pmin, "sum": jax.lax.psum}[combine]
    return op(x, tuple(axes))


def _nan_propagating(x, combine: str, axes):
    """pmax / pmin of floats that keeps a NaN, as jnp.max does (XLA:CPU's all-reduce max
    drops it): the same bytes as integer keys ordered like the floats, with every NaN made the
    largest key (max) or the smallest (min)."""
    bits = jnp.dtype(f"int{jnp.finfo(x.dtype).bits}")
    nan = jnp.asarray(jnp.nan if combine == "max" else -jnp.nan, x.dtype)
    i = jax.lax.bitcast_convert_type(jnp.where(jnp.isnan(x), nan, x), bits)
    flip = jnp.asarray(jnp.iinfo(bits).max, bits)
    key = jnp.where(i < 0, i ^ flip, i)  # negative floats: larger magnitude, smaller key
    key = (jax.lax.pmax if combine == "max" else jax.lax.pmin)(key, axes)
    return jax.lax.bitcast_convert_type(jnp.where(key < 0, key ^ flip, key), x.dtype)
