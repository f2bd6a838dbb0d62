"""Local lowering, as data: how one equation is rewritten to run on local (padded) shards
(kernels.py runs it).

Reads the equation's registry entry (registry.py), never its name: result_shape and
operand_sizes params are rewritten for local shapes, a counting_dim gets the shard's offset,
split lookup_dims look up only the indices a device holds (others give 0; the results are
pending sums: # XLA: gather with "index passthrough" masking), identity entries compute nothing.
Uneven shards are masked with the combine's identity before a reduction sees them.
# XLA: SpmdPartitioningVisitor::Handle* (one handler per opcode); masking as in
#      PartitionedHlo::PadWithValue(select(iota + offset < N, x, identity))
"""

import dataclasses

import jax
import numpy as np

from gspmd_viz.core.registry import entry_for

GLOBAL_SHARDING_PARAMS = ("sharding", "out_sharding")


def identity_element(combine: str, dtype):
    """What padding holds so a reduction never picks it (argmax pads like max)."""
    dtype, combine = np.dtype(dtype), combine.removeprefix("arg")
    if combine == "sum":
        return np.zeros((), dtype)
    if jax.dtypes.issubdtype(dtype, np.floating):  # bfloat16 too (numpy does not know it)
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
class LookupDim:
    """Operand dim `dim`, indexed by index component `component`, split over `axes` into
    blocks of `local` rows; global indices above `last` (or below 0) are out of range."""

    dim: int
    component: int
    axes: tuple[str, ...]
    local: int
    last: int


@dataclasses.dataclass(frozen=True)
class Lookup:
    """A gather whose indexed operand dims are split; `offset_dims` are the result dims that
    come from the operand slice; `mode` is what an out-of-range global index does ("clip":
    clamp it, "fill": the fill value, given by one device only)."""

    dims: tuple[LookupDim, ...]
    offset_dims: tuple[int, ...]
    mode: str


def lookup_of(eqn, operand_sharding, operand_local) -> Lookup | None:
    entry, shape = entry_for(eqn), eqn.inputs[0].shape
    start_index_map = eqn.params["dimension_numbers"].start_index_map
    dims = tuple(
        LookupDim(d, c, operand_sharding.dim_axes(d), operand_local[d], shape[d] - 1)
        for c, d in enumerate(start_index_map)
        if d in entry.lookup_dims(eqn) and operand_sharding.dim_axes(d)
    )
    if not dims:
        return None
    return Lookup(dims, tuple(eqn.params["dimension_numbers"].offset_dims), entry.lookup_mode(eqn))


def local_params(eqn, operand_locals, result_locals) -> dict:
    """The equation's params rewritten for local shapes."""
    params = dict(eqn.params)
    for key in GLOBAL_SHARDING_PARAMS:
        if key in params:
            params[key] = None
    entry = entry_for(eqn)
    if entry.result_shape:
        params[entry.result_shape] = tuple(result_locals[0])
    if entry.operand_sizes:
        key, glob = entry.operand_sizes, eqn.inputs[0].shape
        params[key] = tuple(
            loc if (p == g and loc != g) else p
            for p, g, loc in zip(params[key], glob, operand_locals[0], strict=True)
        )
    if entry.local_groups:
        params.update(entry.local_groups(eqn, operand_locals))
    return params


def counting_offsets(eqn, result_axes) -> tuple[Offset, ...]:
    """Offsets for results whose values are global indices (iota along a split dim)."""
    key = entry_for(eqn).counting_dim
    if key is None:
        return ()
    dim = eqn.params[key]
    axes = result_axes[0][dim]
    return (Offset(dim, axes),) if axes else ()
