"""Local lowering: run one equation on local (padded) shards instead of global arrays.

Everything here is a table keyed by primitive name, read by the partitioner (which never
branches on names itself):
  IDENTITY         annotations: nothing to compute on a device
  RESULT_SHAPE     the param holding the result's shape -> the local result shape
  OPERAND_SIZES    a param listing operand-0 sizes (whole dims) -> local sizes
  COUNTING_DIM     iota: the dim whose values are global indices -> add the shard offset
  COMBINE          how partial reductions over a split factor combine across devices
  HALO_FREE        windowed ops whose windows tile a dim exactly (window = stride, no padding
                   or dilation): split into whole windows, every shard computes alone.
  LOOKUP           gathers: operand dims read at data-dependent indices. Split over devices,
                   each device looks up only the indices it holds (others give 0) and the
                   results are pending sums (# XLA: gather with "index passthrough" masking)
Uneven shards are masked with the combine's identity before a reduction sees them.
# XLA: SpmdPartitioningVisitor::Handle* (one handler per opcode); masking as in
#      PartitionedHlo::PadWithValue(select(iota + offset < N, x, identity))
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

IDENTITY = frozenset({"sharding_constraint", "reshard"})
RESULT_SHAPE = {"broadcast_in_dim": "shape", "reshape": "new_sizes", "iota": "shape"}
OPERAND_SIZES = {"slice": "limit_indices", "gather": "slice_sizes", "dynamic_slice": "slice_sizes"}
COUNTING_DIM = {"iota": "dimension"}
GLOBAL_SHARDING_PARAMS = ("sharding", "out_sharding")
COMBINE = {
    "dot_general": "sum",
    "reduce_sum": "sum",
    "conv_general_dilated": "sum",
    "reduce_max": "max",
    "reduce_min": "min",
}


def _window_halo_free(dims, windows, strides, pads, dilations) -> dict[int, int]:
    """{dim: stride} for dims whose windows never overlap or leave a gap."""
    return {
        d: s
        for d, w, s, p, dil in zip(dims, windows, strides, pads, dilations, strict=True)
        if w == s and tuple(p) == (0, 0) and dil == (1, 1)
    }


def _reduce_window(eqn) -> dict[int, int]:
    p = eqn.params
    dil = list(zip(p["base_dilation"], p["window_dilation"], strict=True))
    n = len(p["window_dimensions"])
    return _window_halo_free(
        range(n), p["window_dimensions"], p["window_strides"], p["padding"], dil
    )


def _conv(eqn) -> dict[int, int]:
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    windows = [eqn.inputs[1].shape[d] for d in dn.rhs_spec[2:]]
    dil = list(zip(p["lhs_dilation"], p["rhs_dilation"], strict=True))
    return _window_halo_free(dn.lhs_spec[2:], windows, p["window_strides"], p["padding"], dil)


HALO_FREE = {
    "reduce_window_max": _reduce_window,
    "reduce_window_min": _reduce_window,
    "reduce_window_sum": _reduce_window,
    "conv_general_dilated": _conv,
}


def halo_free_dims(eqn) -> dict[int, int]:
    """Operand-0 dims of a windowed op that can be split without a halo: {dim: stride}."""
    return HALO_FREE[eqn.primitive](eqn) if eqn.primitive in HALO_FREE else {}


LOOKUP = {"gather": lambda params: tuple(params["dimension_numbers"].start_index_map)}


def indexed_dims(eqn) -> tuple[int, ...]:
    """Operand-0 dims a lookup primitive indexes with data (empty for other primitives)."""
    return LOOKUP[eqn.primitive](eqn.params) if eqn.primitive in LOOKUP else ()


def combine_of(primitive: str) -> str | None:
    """'sum' (pending sums), 'max'/'min' (all-reduce right away), or None (replicate)."""
    return COMBINE.get(primitive)


def identity_element(combine: str, dtype):
    dtype = np.dtype(dtype)
    if combine == "sum":
        return np.zeros((), dtype)
    if np.issubdtype(dtype, np.floating):
        return np.array(-np.inf if combine == "max" else np.inf, dtype)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is None:  # bool
        return np.array(combine == "min", dtype)
    return np.array(info.min if combine == "max" else info.max, dtype)


@dataclasses.dataclass(frozen=True)
class Mask:
    """Operand `operand`, dim `dim` (global size `size`) is split over `axes`: shard i starts
    at i * local size; positions >= size are padding, replaced by `fill`."""

    operand: int
    dim: int
    size: int
    axes: tuple[str, ...]
    fill: object


@dataclasses.dataclass(frozen=True)
class Offset:
    """Result dim `dim` counts global positions: add (shard index along `axes`) * local size."""

    dim: int
    axes: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Lookup:
    """A gather whose indexed operand dims are split: (dim, index component, axes, local size)
    per split dim; `offset_dims` are the result dims that come from the operand slice."""

    dims: tuple[tuple[int, int, tuple[str, ...], int], ...]
    offset_dims: tuple[int, ...]


def lookup_of(eqn, operand_sharding, operand_local) -> Lookup | None:
    dims = tuple(
        (d, c, operand_sharding.dim_axes(d), operand_local[d])
        for c, d in enumerate(indexed_dims(eqn))
        if operand_sharding.dim_axes(d)
    )
    return Lookup(dims, tuple(eqn.params["dimension_numbers"].offset_dims)) if dims else None


def local_params(eqn, operand_locals, result_locals) -> dict:
    """The equation's params rewritten for local shapes."""
    params = dict(eqn.params)
    for key in GLOBAL_SHARDING_PARAMS:
        if key in params:
            params[key] = None
    if eqn.primitive in RESULT_SHAPE:
        params[RESULT_SHAPE[eqn.primitive]] = tuple(result_locals[0])
    if eqn.primitive in OPERAND_SIZES:
        key, glob = OPERAND_SIZES[eqn.primitive], eqn.inputs[0].shape
        params[key] = tuple(
            loc if (p == g and loc != g) else p
            for p, g, loc in zip(params[key], glob, operand_locals[0], strict=True)
        )
    return params


def counting_offsets(eqn, result_axes) -> tuple[Offset, ...]:
    """Offsets for results whose values are global indices (iota along a split dim)."""
    if eqn.primitive not in COUNTING_DIM:
        return ()
    dim = eqn.params[COUNTING_DIM[eqn.primitive]]
    axes = result_axes[0][dim]
    return (Offset(dim, axes),) if axes else ()


# --- inside shard_map ----------------------------------------------------------------------


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
    """Shift data indices into this device's block; `valid`: which ones land in it."""
    valid = jnp.ones(indices.shape[:-1], bool)
    for _dim, c, axes, k in lookup.dims:
        start = _shard_start(axes, k).astype(indices.dtype)
        local = indices[..., c] - start
        valid &= (local >= 0) & (local < k)
        indices = indices.at[..., c].set(local)
    return indices, valid


def mask_lookup(out, valid, lookup: Lookup):
    valid = jnp.expand_dims(valid, lookup.offset_dims) if lookup.offset_dims else valid
    return jnp.where(valid, out, jnp.zeros((), out.dtype))


def run_local(eqn, params, args, masks=(), offsets=(), lookup=None):
    """Bind the primitive on local buffers (after masking padding); returns a list."""
    if eqn.primitive in IDENTITY:
        return list(args[: len(eqn.outputs)])
    args = list(args)
    for m in masks:
        args[m.operand] = apply_mask(args[m.operand], m)
    if lookup is not None:
        args[1], valid = local_indices(args[1], lookup)
    try:
        out = eqn.eqn.primitive.bind(*args, **params)
    except Exception as err:  # name the equation, say what to do
        raise NotImplementedError(
            f"eqn {eqn.index}: primitive {eqn.primitive!r} could not run on local shards "
            f"({type(err).__name__}: {err}). Leave its dims replicated (drop the annotation "
            "that splits them) or add a local-parameter rewrite in gspmd_viz/core/lower.py."
        ) from err
    outs = list(out) if eqn.eqn.primitive.multiple_results else [out]
    if lookup is not None:
        outs[0] = mask_lookup(outs[0], valid, lookup)
    for off in offsets:
        outs[0] = apply_offset(outs[0], off)
    return outs


def all_reduce(x, combine: str, axes):
    """Combine partial max/min results across devices right away."""
    op = {"max": jax.lax.pmax, "min": jax.lax.pmin, "sum": jax.lax.psum}[combine]
    return op(x, tuple(axes))
