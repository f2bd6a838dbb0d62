"""Gather the weight, or reduce the partial product: the two plans of a contraction whose
operands split different factors over the same mesh axis.

A weight split over two mesh axes (FSDP over "data" + tensor parallel over "model") meets
activations split over "data" on their batch (n devices on data, m on model; bytes per device):

    x[B@data, E] @ w[E@data, H@model]
    gather: all-gather w over data   [E@data, H@model] -> [E, H@model]      (n-1)/n E H/m
            local matmul             -> [B@data, H@model]
    reduce: all-to-all x             [B@data, E] -> [B, E@data]             (n-1)/n B E/n
            local matmul             -> [B, H@model]{sum over data}
            reduce-scatter           -> [B@data, H@model]                   (n-1)/n B H/m

The gather moves the weight, the reduce moves the activations in and the partial product out:
with a decode-size batch (or many FSDP devices) the reduce is the cheaper one, with a training
batch the gather. Both plans are among the candidates every equation weighs (each operand's own
split, choose_split.EquationSplit.candidates); `conflicts` names them, so the partitioner makes
sure both are costed, and `recorded` says what each costs and which split was kept, and why:
the first entry of the cost model's key (split_cost.rank) that tells them apart. The records
are `spmd.choices`; the ledger (viz/ledger/choices.py) and gv.explain's findings show them.
# XLA: dot_handler.cc weighs resharding one operand to the other's contracting split against
# replicating it; Shardy's insert_explicit_reshards test
# `dot_contracting_dim_and_result_dim_sharded_same_axis` names the reduce-scatter pattern
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.core.choice.choose_split import Costs, EquationSplit, frozen
from gspmd_viz.core.cost.split_cost import arrivals, flops, promised_by_any, rank
from gspmd_viz.core.program.trace import Value
from gspmd_viz.core.propagation.record import FactorAxes
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.units import format_bytes

__all__ = ["PLANS", "GatherOrReduce", "Plan", "conflicts", "recorded"]

PLANS = ("gather", "reduce")

# what each entry of split_cost.rank's key means, when it tells two splits apart
_KEY = ("it fits in memory", "no device repeats the work", "fewer bytes on the wire",
        "less compute", "fewer bytes held")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Plan:
    """One of the two plans: its factor split, the shardings the equation reads its operands in
    and leaves its first result in (pending sums included), the wire bytes the cost model
    charges it (operands fetched, partial sums combined, results handed on), its FLOPs per
    device, and its key in split_cost.rank."""

    split: FactorAxes
    operands: tuple[Sharding, ...]
    result: Sharding
    wire_bytes: float
    flops: float
    key: tuple


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Operand `summed` (a position in split_cost.arrivals) splits a contraction factor over
    `axis`, operand `kept` another factor over it; `gather` keeps `kept`'s split (gathers
    `summed` over the axis), `reduce` keeps `summed`'s (moves `kept` to it and reduces the
    partial product)."""

    axis: str
    summed: int
    kept: int
    gather: FactorAxes
    reduce: FactorAxes
    arrived: tuple  # (value, sharding) of each operand as it arrives (split_cost.arrivals)


@dataclasses.dataclass(frozen=True)
class GatherOrReduce:
    """What the ledger shows for one such equation: both plans' costs and what was kept."""

    eqn: int
    primitive: str
    axis: str
    gathered: str  # the operand the gather plan gathers over `axis` (the weight), as it arrives
    moved: str  # the operand the reduce plan moves to the contraction's split, as it arrives
    moved_to: str  # that operand as the reduce plan reads it
    gather: Plan
    reduce: Plan
    kept: str  # "gather", "reduce" or "another split"
    why: str
    weight_first: bool  # is `gathered` the equation's first operand of the two

    def text(self) -> str:
        """Three lines: what meets what over which axis, each plan's cost, what was kept."""
        rows = (
            (f"gather {self.gathered.split()[0]} over {self.axis}", self.gather, ""),
            (f"reduce over {self.axis}", self.reduce, f" ({self.moved_to_text()})"),
        )
        costs = [
            f"  {name:<22} {format_bytes(p.wire_bytes):>10} on the wire, "
            f"{p.flops:,.0f} FLOPs{extra}"
            for name, p, extra in rows
        ]
        pair = (self.gathered, self.moved)[:: 1 if self.weight_first else -1]
        head = f"eqn {self.eqn} {self.primitive}: {pair[0]} . {pair[1]}"
        return "\n".join([head, *costs, f"  kept {self.kept}: {self.why}"])

    def moved_to_text(self) -> str:
        """`x moved to f32[4, 256@data]`: what the reduce plan reads the moved operand as."""
        return f"{self.moved.split()[0]} moved to {self.moved_to}"


def _without(fa: FactorAxes, axis: str) -> FactorAxes:
    """fa with `axis` dropped from every factor (and a factor's later axes with it)."""
    out = {}
    for f, axes in fa.items():
        kept = axes[: axes.index(axis)] if axis in axes else axes
        if kept:
            out[f] = tuple(kept)
    return out


def _factors_over(q: EquationSplit, fa: FactorAxes, axis: str, summed: bool) -> list[int]:
    return [f for f, axes in fa.items() if axis in axes and q.summed(f) == summed]


def conflicts(q: EquationSplit, costs: Costs) -> list[Conflict]:
    """Each mesh axis over which one operand arrives with a contraction factor split and
    another with a factor it keeps (a batch, a head) split: `x[B@data, E] @ w[E@data, H]`.
    Only a contraction whose partial sums add up (a matmul's), two operands or more."""
    if q.combine != "sum" or not q.summed_factors:  # most equations: asked first, cached
        return []
    if sum(isinstance(v, Value) for v in q.eqn.inputs) < 2:
        return []
    arrived = arrivals(q, costs)
    values = tuple((v, sharding) for v, _, sharding, _ in arrived)
    found = []
    for axis in (a for a in q.mesh.axis_names if q.sizes[a] > 1):
        for i, (*_, summed) in enumerate(arrived):
            for k, (*_, kept) in enumerate(arrived):
                if i == k or not _factors_over(q, summed, axis, True):
                    continue
                if not _factors_over(q, kept, axis, False):
                    continue
                gather = q.sanitize({**_without(summed, axis), **kept})
                reduce = q.sanitize({**_without(kept, axis), **summed})
                if gather != reduce:
                    found.append(Conflict(axis, i, k, gather, reduce, values))
    return found


def _described(v, sharding) -> str:
    return f"{v.name} {sharding.describe(v.shape, v.dtype)}"


def _plan(q: EquationSplit, fa: FactorAxes, costs: Costs, ranked: dict) -> Plan:
    """`fa` as a Plan, its rank as choose_split.choose found it (`ranked`), else ranked here
    (choose takes a split free on the wire without ranking the others)."""
    key = ranked.get(frozen(fa))
    if key is None:
        key = rank(q, fa, costs, q.cost(fa, costs), promised_by_any([q], costs))
    operands = tuple(q.operand_sharding(fa, i) for i in range(len(q.eqn.inputs)))
    return Plan(fa, operands, q.result_sharding(fa, 0), key[2], flops(q, fa), key)


def _why(kept: Plan, other: Plan) -> str:
    """The first entry of the cost model's key that tells `kept` from `other`."""
    for name, ours, theirs in zip(_KEY, kept.key, other.key, strict=False):
        if ours < theirs:
            return name
        if ours > theirs:  # choose_split.choose takes a split free on the wire at once
            return "propagation's split sends nothing, so it is taken at once"
    return "as cheap: the first one found is kept"


def recorded(
    q: EquationSplit, conflict: Conflict, chosen: FactorAxes, costs: Costs, ranked: dict
) -> GatherOrReduce:
    """Both plans of `conflict` costed, beside the split the partitioner chose (`chosen`);
    `ranked`: the ranks choose_split.choose gave the splits it weighed (frozen split -> rank)."""
    plans = {name: _plan(q, getattr(conflict, name), costs, ranked) for name in PLANS}
    best = min(plans.values(), key=lambda p: p.key)
    kept = next((name for name, p in plans.items() if p.split == chosen), "another split")
    if kept in plans:
        other = plans["reduce" if kept == "gather" else "gather"]
        why = _why(plans[kept], other)
    else:
        why = "another split is cheaper still: " + _why(_plan(q, chosen, costs, ranked), best)
    e, arrived = q.eqn, conflict.arrived
    summed, moved = (_described(*arrived[k]) for k in (conflict.summed, conflict.kept))
    v = arrived[conflict.kept][0]
    moved_to = plans["reduce"].operands[e.inputs.index(v)].describe(v.shape, v.dtype)
    return GatherOrReduce(e.index, e.primitive, conflict.axis, summed, moved, moved_to,
                          *plans.values(), kept, why, conflict.summed < conflict.kept)  # fmt: skip
