"""The primitive registry: everything the reference GSPMD knows about a primitive, in one entry.

Propagation and partitioning never switch on primitive names: they read `entry_for(eqn)`.
An Entry holds
  rule            eqn -> FactorRule (families.py): which factors make up each operand/result dim
  combine         how partial results over a split reduction factor combine: "sum" (left
                  pending), "max"/"min" (all-reduced right away), "argmax"/"argmin" ((value,
                  index) pairs gathered and picked right away), None (the factor stays whole)
  result_shape    the param holding result 0's shape (rewritten to the local shape)
  operand_sizes   the param listing operand-0 sizes (whole dims rewritten to local sizes)
  counting_dim    the param naming the dim whose values are global positions (iota: add the
                  shard's offset)
  lookup_dims     eqn -> operand-0 dims read at data-dependent indices (a split one makes each
                  device look up only what it holds; results are pending sums)
  lookup_mode     eqn -> what an out-of-range index does: "clip" (clamped into range),
                  "fill" (the slice is the fill value) or "drop" (a scatter skips the
                  update), applied to global indices
  written_dims    eqn -> operand-0 dims a scatter writes at data-dependent indices (a split
                  one makes each device write only the rows it holds: lower.WriteAt)
  halo_free_dims  eqn -> {operand-0 dim: stride} of windowed dims whose windows tile the dim
                  exactly, so splitting them into whole windows needs no halo
  local_groups    (eqn, operand local shapes) -> group-count params for a device holding
                  some of the groups (a grouped conv split on its feature groups)
  variants        eqn -> the factor rules the partitioner costs instead of `rule` (a conv's
                  spatial dims as halos around the output or as partial sums over its taps),
                  the first numbering its factors as `rule` does
  halo            windowed dims may be split with a halo exchange (windowed_ops.window_of reads
                  the windows): collective-permutes of the neighbours' edges, no gather; a
                  shift (pad, slice, dynamic_slice at a constant start) is a 1-wide window
  identity        an annotation: nothing to compute on a device
  once            operands added into the result as they are (scatter-add's operand): when
                  the result is left a pending sum, one device of each group keeps them and
                  the others read zeros, so they are summed once
  edge            a loop's data-flow edge (records.Loop): its operands and results share one
                  sharding; partitioner.py runs the loop, nothing runs for the edge itself
  flops           FLOPs per point of the factor loop nest (split_cost.flops): 2 for a
                  multiply-add, 0 for data movement, 1 otherwise (set in FLOPS below)
  work            eqn -> FLOPs per point where XLA's cost analysis counts other than `flops`:
                  an argmax compares and selects a (value, index) pair per element, a
                  cumulative op sums a window as long as its dim, a convert counts one though
                  it only moves data (`point_flops` reads it)
To add a primitive: `register("name other_name", family, **facts)` below, once.
A primitive with no entry gets UNKNOWN: every dim stays whole and it runs replicated.
# Shardy: createOpShardingRule; XLA: SpmdPartitioningVisitor::Handle* per opcode
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace

from gspmd_viz.core.rules import families, families_pieces, gather_scatter
from gspmd_viz.core.rules.factors import FactorRule


@dataclass(frozen=True)
class Entry:
    rule: Callable[..., FactorRule]
    combine: str | None = None
    result_shape: str | None = None
    operand_sizes: str | None = None
    counting_dim: str | None = None
    lookup_dims: Callable[..., tuple[int, ...]] | None = None
    lookup_mode: Callable[..., str] | None = None
    written_dims: Callable[..., tuple[int, ...]] | None = None
    halo_free_dims: Callable[..., dict[int, int]] | None = None
    halo: bool = False
    variants: Callable[..., list[FactorRule]] | None = None
    local_groups: Callable[..., dict] | None = None
    identity: bool = False
    zero_padding: tuple[int, ...] = ()  # operands whose padded (uneven) shards must read 0
    once: tuple[int, ...] = ()  # operands summed into a pending result as they are
    known: bool = True
    edge: bool = False
    flops: int = 1
    work: Callable[..., float] | None = None


REGISTRY: dict[str, Entry] = {}
UNKNOWN = Entry(families.conservative, known=False)


def register(names: str, rule: Callable[..., FactorRule], **facts) -> Entry:
    """One entry for the primitives named in `names` (space separated)."""
    entry = Entry(rule, **facts)
    for name in names.split():
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is registered twice")
        REGISTRY[name] = entry
    return entry


def entry_for(eqn) -> Entry:
    return REGISTRY.get(eqn.primitive, UNKNOWN)


def is_known(primitive: str) -> bool:
    return primitive in REGISTRY


def point_flops(eqn) -> float:
    """FLOPs per point of the equation's factor loop nest, as XLA's cost analysis counts them."""
    entry = entry_for(eqn)
    return entry.work(eqn) if entry.work else entry.flops


_RULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Equation -> its rule


def rule_for(eqn) -> FactorRule:
    """The factor rule of one Equation (conservative for primitives not registered), made
    once while the equation lives: propagation and every plan's costing ask again."""
    rule = _RULES.get(eqn)
    if rule is None:
        rule = _RULES[eqn] = entry_for(eqn).rule(eqn)
    return rule


def program_rules(program) -> list[FactorRule]:
    """rule_for of each of the program's equations, one rule made per kind (Program.kinds:
    equations that differ only in their values' names have one rule)."""
    made: dict[int, FactorRule] = {}
    rules = []
    for eqn in program.equations:
        rule = _RULES.get(eqn)
        if rule is None:
            kind = program.kinds[eqn]
            rule = made.get(kind)
            if rule is None:
                rule = made[kind] = entry_for(eqn).rule(eqn)
            _RULES[eqn] = rule
        rules.append(rule)
    return rules


# --- per-entry hooks ----------------------------------------------------------------------


def _window_halo_free(dims, windows, strides, pads, dilations) -> dict[int, int]:
    """{dim: stride} for dims whose windows never overlap or leave a gap."""
    return {
        d: s
        for d, w, s, p, dil in zip(dims, windows, strides, pads, dilations, strict=True)
        if w == s and tuple(p) == (0, 0) and dil == (1, 1)
    }


def _reduce_window_halo_free(eqn) -> dict[int, int]:
    p = eqn.params
    dil = list(zip(p["base_dilation"], p["window_dilation"], strict=True))
    n = len(p["window_dimensions"])
    return _window_halo_free(
        range(n), p["window_dimensions"], p["window_strides"], p["padding"], dil
    )


def _conv_halo_free(eqn) -> dict[int, int]:
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    windows = [eqn.inputs[1].shape[d] for d in dn.rhs_spec[2:]]
    dil = list(zip(p["lhs_dilation"], p["rhs_dilation"], strict=True))
    return _window_halo_free(dn.lhs_spec[2:], windows, p["window_strides"], p["padding"], dil)


def _conv_propagated(eqn) -> FactorRule:
    return families.conv(eqn, linked=False)


def _conv_variants(eqn) -> list[FactorRule]:
    """An ungrouped conv's spatial dims may each be split either way (families.conv): halos
    around the output rows, or partial sums over the window taps. The size rule's choice
    first (its factors are numbered as propagation's), the partitioner picks by bytes.
    # XLA: convolution_handler.cc tries both (split on the output's spatial dims, or on the
    window dims and all-reduced)"""
    p, usual = eqn.params, families.conv(eqn)
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        return [usual]
    spatial = range(len(p["window_strides"]))
    subsets = itertools.chain.from_iterable(
        itertools.combinations(spatial, r) for r in range(len(spatial) + 1)
    )
    others = {families.conv(eqn, frozenset(s)) for s in subsets} - {usual}
    return [usual, *sorted(others, key=str)]


def _scatter_halo_free(eqn) -> dict[int, int]:
    p, n = eqn.params, len(eqn.params["window_dimensions"])
    keys = p["window_dimensions"], p["window_strides"], p["padding"], [(1, 1)] * n
    return _window_halo_free(range(n), *keys)


def _conv_local_groups(eqn, operand_locals) -> dict:
    """A device holding c of the C input features holds c / (C / G) of the G groups (batch
    groups: of the B images; at least one, when a group's own images are split too)."""
    lhs_spec, p = eqn.params["dimension_numbers"].lhs_spec, eqn.params
    key = "feature_group_count" if p["batch_group_count"] == 1 else "batch_group_count"
    dim, groups = lhs_spec[1 if key == "feature_group_count" else 0], p[key]
    if groups == 1:  # one group: a split input feature is a split contraction, still one group
        return {}
    per_group = eqn.inputs[0].shape[dim] // groups
    return {key: max(1, operand_locals[0][dim] // per_group)}


def _gather_indexed(eqn) -> tuple[int, ...]:
    """Indexed dims read one element each (a wider slice could straddle two shards); none
    when the mode is not one local_ops.py knows how to apply globally."""
    if _gather_mode(eqn) is None:
        return ()
    sizes = eqn.params["slice_sizes"]
    return tuple(d for d in eqn.params["dimension_numbers"].start_index_map if sizes[d] == 1)


def _gather_mode(eqn) -> str | None:
    # XLA clamps start indices, so jax's PROMISE_IN_BOUNDS clamps too (what one device does)
    name = getattr(eqn.params["mode"], "name", str(eqn.params["mode"]))
    return {"CLIP": "clip", "PROMISE_IN_BOUNDS": "clip", "FILL_OR_DROP": "fill"}.get(name)


def _pair_reduce_flops(eqn) -> float:
    """An argmax or argmin reduces (value, index) pairs: XLA counts 9 FLOPs (compares, NaN
    checks, selects) for each of the N - 1 steps that reduce N elements to one."""
    n = math.prod(eqn.inputs[0].shape[d] for d in eqn.params["axes"])
    return 9 * (n - 1) / n


def _one_flop(eqn) -> int:
    return 1


def _window_flops(eqn) -> int:
    """A cumulative op lowers to a reduce-window as long as its dim: N - 1 adds per result."""
    return eqn.inputs[0].shape[eqn.params["axis"]] - 1


# --- the entries --------------------------------------------------------------------------

register(
    "add sub mul div rem pow max min neg sign floor ceil round is_finite exp exp2 log log1p "
    "expm1 tanh tan logistic sin cos sqrt rsqrt cbrt abs erf erfc erf_inv lgamma digamma "
    "integer_pow square convert_element_type select_n eq ne lt le gt ge and or not xor "
    "stop_gradient copy copy_p reduce_precision nextafter atan2 clamp imag real conj "
    "shift_left shift_right_logical shift_right_arithmetic population_count "
    "add_any mul_add asin acos atan sinh cosh asinh acosh atanh lt_to",
    families.elementwise,
)
register("sharding_constraint reshard", families.elementwise, identity=True)
register("broadcast_in_dim", families.broadcast_in_dim, result_shape="shape")
register("reshape", families.reshape, result_shape="new_sizes")
register("transpose", families.transpose)
register("squeeze", families.squeeze)
register("dot_general", families.dot_general, combine="sum")
register("reduce_sum", families.reduce, combine="sum")
register("reduce_max", families.reduce, combine="max")
register("reduce_min", families.reduce, combine="min")
register("reduce_prod reduce_and reduce_or", families.reduce)
register("argmax", families.reduce, combine="argmax", work=_pair_reduce_flops)
register("argmin", families.reduce, combine="argmin", work=_pair_reduce_flops)
register("cumsum cumprod cummax cummin cumlogsumexp", families.cumulative, work=_window_flops)
register("sort", families.sort)
register("top_k", families.top_k)
register("slice", families.slice_, operand_sizes="limit_indices", halo=True)
register("dynamic_slice", families.dynamic_slice, operand_sizes="slice_sizes", halo=True)
register("dynamic_update_slice", families.dynamic_update_slice)
register("pad", families.pad, halo=True)
register("concatenate", families.concatenate, halo=True)
register("rev", families.rev)
register("stack", families_pieces.stack)
register("unstack", families_pieces.unstack)
register("tile", families_pieces.tile)
register("bitcast_convert_type", families_pieces.bitcast_convert)
register("iota", families.iota, result_shape="shape", counting_dim="dimension")
register(
    "gather",
    gather_scatter.gather,
    operand_sizes="slice_sizes",
    lookup_dims=_gather_indexed,
    lookup_mode=_gather_mode,
)
register(
    "scatter scatter-mul scatter-min scatter-max",
    gather_scatter.scatter,
    written_dims=gather_scatter.written_dims,
    lookup_mode=gather_scatter.scatter_mode,
)
register(
    "scatter-add",
    gather_scatter.scatter_add,
    combine="sum",
    written_dims=gather_scatter.written_dims,
    lookup_mode=gather_scatter.scatter_mode,
    once=(0,),
)
register(
    "conv_general_dilated",
    _conv_propagated,
    combine="sum",
    halo_free_dims=_conv_halo_free,
    halo=True,
    variants=_conv_variants,
    local_groups=_conv_local_groups,
)
register(
    "select_and_scatter_add",
    families.select_and_scatter_add,
    halo_free_dims=_scatter_halo_free,
    halo=True,
    zero_padding=(0,),  # a padding window must scatter nothing
)
register(
    "reduce_window_sum reduce_window_max reduce_window_min",
    families.reduce_window,
    halo_free_dims=_reduce_window_halo_free,
    halo=True,
)
register("loop_const loop_carry branch_operand branch_result", families.elementwise, edge=True)
register("loop_slice", families.loop_slice, edge=True)
register("loop_stack", families.loop_stack, edge=True)

# FLOPs per point of the factor loop nest, as XLA's cost analysis counts them: a multiply-add
# is 2, moving data is 0 (every other primitive: 1 per point)
FLOPS = {
    2: "dot_general conv_general_dilated",
    0: "sharding_constraint reshard broadcast_in_dim reshape transpose squeeze slice "
    "dynamic_slice dynamic_update_slice pad concatenate rev iota gather convert_element_type "
    "copy copy_p stop_gradient loop_const loop_carry branch_operand branch_result loop_slice "
    "loop_stack stack unstack tile",
}
for _n, _names in FLOPS.items():
    for _name in _names.split():
        REGISTRY[_name] = replace(REGISTRY[_name], flops=_n)
# a convert moves data (flops 0: gathering its narrower side is no work done twice), but XLA's
# cost analysis counts one FLOP an element
REGISTRY["convert_element_type"] = replace(REGISTRY["convert_element_type"], work=_one_flop)
