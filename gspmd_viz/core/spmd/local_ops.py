"""Local lowering, as data: how one equation is rewritten to run on local (padded) shards
(local_kernels.py runs it).

Reads the equation's registry entry (registry.py), never its name: result_shape and
operand_sizes params are rewritten for local shapes, a counting_dim gets the shard's offset,
split lookup_dims look up only the indices a device holds (others give 0; the results are
pending sums: # XLA: gather with "index passthrough" masking), split written_dims write only
the rows a device holds (WriteAt), identity entries compute nothing.
Uneven shards are masked with the combine's identity before a reduction sees them.
# XLA: SpmdPartitioningVisitor::Handle* (one handler per opcode); masking as in
#      PartitionedHlo::PadWithValue(select(iota + offset < N, x, identity))
"""

import dataclasses

import jax
import numpy as np

from gspmd_viz.core.halo import windowed_ops
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.spmd.instructions import Compute

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


def on_one_device(operand: int, once, local_shape, axes) -> list[Mask]:
    """If `operand` is in `once` (Entry.once) and `axes` hold pending sums: it is kept by the
    first device along `axes`, zeros on the others (a Mask of dim 0 whose size is the local
    size: the others start past it), so summed over `axes` it counts once.
    # XLA: HandleScatter zeroes the operand off one partition"""
    return [Mask(operand, 0, local_shape[0], tuple(axes), 0)] if operand in once and axes else []


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


@dataclasses.dataclass(frozen=True)
class WriteAt:
    """A scatter whose written operand dims `dims` are split: indices are shifted into this
    device's block and an update another device writes is dropped. `last` is, per index
    component, the last start in range; `mode` "clip" clamps every component into range
    first, "drop" drops an update out of range (the local scatter only drops).
    # XLA: HandleScatter's operand-split case: local offsets and masks"""

    dims: tuple[LookupDim, ...]
    last: tuple[int, ...]
    mode: str


def write_at(eqn, operand_sharding, operand_local) -> WriteAt | None:
    entry, shape = entry_for(eqn), eqn.inputs[0].shape
    dn, window = eqn.params["dimension_numbers"], _window_sizes(eqn)
    dims = tuple(
        LookupDim(d, c, operand_sharding.dim_axes(d), operand_local[d], shape[d] - 1)
        for c, d in enumerate(dn.scatter_dims_to_operand_dims)
        if d in entry.written_dims(eqn) and operand_sharding.dim_axes(d)
    )
    if not dims:
        return None
    last = tuple(shape[d] - window[d] for d in dn.scatter_dims_to_operand_dims)
    return WriteAt(dims, last, entry.lookup_mode(eqn))


def _window_sizes(eqn) -> dict[int, int]:
    """Operand dim -> the update window's size along it (1 for an inserted dim)."""
    dn, upd = eqn.params["dimension_numbers"], eqn.inputs[2].shape
    skip = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(len(eqn.inputs[0].shape)) if d not in skip]
    sizes = {d: 1 for d in skip}
    sizes.update({d: upd[u] for d, u in zip(kept, dn.update_window_dims, strict=True)})
    return sizes


def write_params(params: dict) -> dict:
    """The local scatter drops what WriteAt marks (index -1), never clamps; the shifted
    indices are neither sorted nor unique any more."""
    drop = jax.lax.GatherScatterMode.FILL_OR_DROP
    return {**params, "mode": drop, "indices_are_sorted": False, "unique_indices": False}


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


def local_compute(q, ins, op_shardings, results, masks) -> Compute:
    """The local op of one equation split as `q` (split.EquationSplit) chose: params rewritten
    for local shapes, offsets, a split lookup."""
    eqn = q.eqn
    params = local_params(
        eqn,
        [s.shard_shape(v.shape) for s, v in zip(op_shardings, eqn.inputs, strict=True)],
        [s.shard_shape(v.shape) for s, v in zip(results, eqn.outputs, strict=True)],
    )
    offsets = counting_offsets(eqn, [s.spec for s in results])
    lookup, indexed = None, q.lookup or entry_for(eqn).written_dims
    if indexed:  # a gather reads (a scatter writes) the operand's split rows where they lie
        local = op_shardings[0].shard_shape(eqn.inputs[0].shape)
        at = lookup_of if q.lookup else write_at
        lookup = at(eqn, op_shardings[0], local)
    if isinstance(lookup, WriteAt):
        params = write_params(params)
    outs = tuple(v.name for v in eqn.outputs)
    return Compute(
        eqn, tuple(ins), outs, params, results, op_shardings, tuple(masks), offsets, lookup
    )


def reading(local: Compute, eqn, ins) -> Compute:
    """`local` (local_compute's op, made once per split of `eqn` or of a twin: an equation
    that differs from it only in its values' names) as `eqn`'s, reading the buffers `ins`."""
    made = object.__new__(Compute)  # a copy of `local` with its equation, operands and
    fields = made.__dict__  # results replaced, without the frozen dataclass's __init__
    fields.update(local.__dict__)  # setting its twelve fields one at a time (three times
    fields["eqn"], fields["ins"] = eqn, tuple(ins)  # faster: every pass, every equation)
    fields["outs"] = tuple([v.name for v in eqn.outputs])
    return made


def halo_fill(eqn, ins, k: int):
    """What the exchange of operand k's halos pads with: pad's padding value (a buffer name or a
    Literal from `ins`; None without them), what a max (min) pool never picks, or zero."""
    fill = windowed_ops.pad_value(eqn.eqn)
    if fill == windowed_ops.OPERAND_1:
        return None if ins is None else ins[1]
    if fill in (windowed_ops.LOWEST, windowed_ops.HIGHEST):
        combine = "max" if fill == windowed_ops.LOWEST else "min"
        return identity_element(combine, eqn.inputs[k].dtype)
    return fill
