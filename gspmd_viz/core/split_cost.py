"""What a candidate split of one equation costs beyond its bytes: work done twice, FLOPs, time on
a chip, and memory. split.py ranks its candidates with `rank`.

Bytes alone let the planner buy a few bytes with redundant compute: gather an operand over a mesh
axis it was split on, then compute the same result on every device of that axis (1.35x XLA's
FLOPs on the zoo's training step). So a split's rank is, in order:
  1. over HBM: its local operands and results would not fit on the chip (it cannot run);
  2. work done twice: the devices along the mesh axes the operands promise (every operand
     holding a factor arrives split over them, or holds pending sums over them) but the split
     uses for no factor all compute the same thing: the product of those axes' sizes (1: no
     redundant work). A gather or copy counts too: whatever reads its replicated result would
     compute replicated as well. An axis one operand splits a factor over while another holds it
     whole promises nothing: gathering that operand is XLA's plan and often the cheaper one;
  3. wire bytes (split.EquationSplit.cost: operands fetched, results moved where wanted);
  4. time on the chip: local FLOPs at peak plus each collective's ring time (gv.sim's chip
     through `ChipCost`; core knows no chip by name), or the FLOPs alone without a chip;
  5. the bytes its local operands and results hold: of two splits equal so far, the one that
     holds less (a table looked up where its rows live, not gathered for the same bytes).
At the zoo's toy sizes a pure time model is latency-bound (~1 us a collective), so redundant
compute would look free: that is why it comes after the rule and the bytes, not before.
# XLA: dot_handler.cc weighs its strategies by FLOPs and bytes; GSPMD (2105.04663) section 3.5
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from gspmd_viz.core.program import Value
from gspmd_viz.core.reduce_combine import ArgCombine
from gspmd_viz.core.registry import entry_for, rule_for
from gspmd_viz.core.spmd import Combine, Compute, Const, Halo, MoveBlocks, Reshard
from gspmd_viz.core.spmd_regions import RunCond, RunLoop
from gspmd_viz.units import format_bytes, format_time


@dataclasses.dataclass(frozen=True)
class ChipCost:
    """What the partitioner knows of a chip: peak FLOP/s, HBM bytes and bandwidth, and a
    collective's seconds `collective_seconds(kind, S, n)` (S: all-gather's result bytes, the
    operand's for the others, as gv.sim.collective_time takes it)."""

    name: str
    peak_flops: float
    hbm_bytes: float
    hbm_bandwidth: float
    collective_seconds: Callable[[str, float, int], float] = dataclasses.field(repr=False)

    def comm_seconds(self, collectives) -> float:
        """Each collective's ring time, one after another, over all its trips."""
        return sum(
            c.trips * self.collective_seconds(c.kind, payload_bytes(c), c.group_size)
            for c in collectives
        )


def payload_bytes(c) -> float:
    """The S of the ring formulas: all-gather's result bytes, the operand's otherwise."""
    return c.operand_bytes * (c.group_size if c.kind == "all-gather" else 1)


# --- one equation under one split ---------------------------------------------------------------


def flops(q, fa) -> float:
    """Per-device FLOPs of equation `q` (split.EquationSplit) under split `fa`: its factor loop
    nest with split factors cut to their (padded) local size, times the primitive's FLOPs per
    point (2 for a multiply-add, 0 for data movement). A whole factor is whole everywhere."""
    entry = entry_for(q.eqn)
    if entry.identity:
        return 0.0
    local = (-(-f.size // q.size(fa.get(i, ()))) for i, f in enumerate(q.rule.factors))
    return float(entry.flops * math.prod(local))


def local_bytes(q, fa) -> int:
    """Bytes of the equation's local (padded) operands and results under split `fa`."""
    values = q.eqn.inputs + q.eqn.outputs
    shardings = [q.operand_sharding(fa, i) for i in range(len(q.eqn.inputs))]
    shardings += [q.result_sharding(fa, j) for j in range(len(q.eqn.outputs))]
    return sum(s.shard_bytes(v.shape, v.dtype) for v, s in zip(values, shardings, strict=True))


def twice(q, fa, costs) -> int:
    """How many devices compute each result of the equation under `fa` although its operands
    arrive split so that they need not: the product of the sizes of the mesh axes that
    `promised` names and `fa` splits no factor over. An op that only moves data computes
    nothing, so done whole it does nothing twice where it must gather anyway: a windowed op
    (concatenate, pad) may gather its operands once instead of exchanging a halo per operand,
    and a dynamic update of part of a split dim may gather it rather than move the split to
    another dim and back (XLA gathers); and over a mesh axis every reader asks for the result
    whole on, it is gathered anyway, so the bytes decide where (a widening convert gathers its
    narrower operand, as XLA does; a lookup gathers its table when that is smaller than the
    rows it looks up, and the matmul that reads them needs them whole over the table's axis)."""
    moves_only = entry_for(q.eqn).flops == 0
    if moves_only and (q.halo or _gathers_anyway(q, costs)):
        return 1
    used = {a for axes in fa.values() for a in axes}
    if moves_only:
        used |= _asked_whole_over(q, costs)
    return math.prod(q.sizes[a] for a in promised(q, costs) - used if q.sizes[a] > 1)


def arrivals(q, costs) -> list[tuple]:
    """(factors, sharding, the factor split it implies) of each operand as it arrives."""
    found = []
    for v, tensor in zip(q.eqn.inputs, q.rule.operands, strict=True):
        if isinstance(v, Value):
            sharding = costs.available(v)[0]
            found.append((tensor, sharding, q.from_tensor(tensor, sharding)))
    return found


def _gathers_anyway(q, costs) -> bool:
    """Does an operand arrive split on a factor the equation must hold whole (not a lookup's
    indexed dim, which splits: each device looks up the rows it holds)?"""
    return any(
        q.rule.factors[f].kind == "need_replication" and f not in q.lookup and q.size(a) > 1
        for _, _, split in arrivals(q, costs)
        for f, a in split.items()
    )


def _asked_whole_over(q, costs) -> set[str]:
    """The mesh axes over which all that read every result (its consumers, or the output) ask
    for it whole."""
    wanted = [costs.wanted(v) for v in q.eqn.outputs]
    if not all(wanted):  # nothing is known of a result's readers
        return set()
    return set.intersection(*(set(s.replicated_axes) for w in wanted for s in w))


def promised(q, costs) -> set[str]:
    """The mesh axes the operands' arrival shardings promise a split over: those every operand
    holding a factor splits it over, those of a factor every holder splits but over disjoint
    axes (`x[16, 32/y] @ w[32/x, 64]`: one of the two moves), and an operand's pending sums.
    A factor some operand holds whole promises nothing: splitting it would slice that operand
    and leave partial sums to move, and XLA gathers the split operand instead
    (`x[16, 32/y] @ w[32, 64]`: 1.5 KiB of x gathered, not 6 KiB of sums reduced)."""
    found: dict[int, list[set[str]]] = {}
    axes = set()
    for tensor, sharding, split in arrivals(q, costs):
        axes |= set(sharding.unreduced)
        for f in {f for fs in tensor for f in fs}:
            found.setdefault(f, []).append(set(split.get(f, ())))
    for sets in found.values():
        agreed = set.intersection(*sets)
        axes |= agreed if agreed or not all(sets) else set.union(*sets)
    return axes


def merged(candidates: list[dict]) -> list[dict]:
    """Each pair of candidate splits taken together (the second's axes win a shared factor):
    a lookup split where its table lives AND its batch where its ids live does no work twice,
    though neither the table's nor the ids' sharding alone implies it."""
    pairs = (({**a, **b}) for i, a in enumerate(candidates) for b in candidates[i + 1 :])
    return [fa for fa in pairs if fa not in candidates]


def rank(q, fa, costs, wire_bytes: float) -> tuple:
    """The key split.EquationSplit.choose minimizes (see the module text); `costs.chip` is a
    ChipCost or None."""
    chip, work, held = costs.chip, flops(q, fa), local_bytes(q, fa)
    if chip is None:
        return (False, twice(q, fa, costs), wire_bytes, work, held)
    return (held > chip.hbm_bytes, twice(q, fa, costs), wire_bytes, work / chip.peak_flops, held)


# --- the record: what the chosen plan costs, per device ------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanCost:
    """Per device: FLOPs, wire bytes, estimated seconds on the chip (compute at peak plus each
    collective's ring time, no overlap; None without a chip) and peak live memory (the
    largest sum of buffers alive at once: from a buffer's write to its last read)."""

    chip: str | None
    flops: float
    wire_bytes: float
    compute_s: float | None
    comm_s: float | None
    peak_bytes: int

    @property
    def time_s(self) -> float | None:
        return None if self.chip is None else self.compute_s + self.comm_s

    def __str__(self) -> str:
        head = (
            f"per device: {self.flops:,.0f} FLOPs, {format_bytes(self.wire_bytes)} on the wire, "
            f"peak memory {format_bytes(self.peak_bytes)}"
        )
        if self.chip is None:
            return head
        return (
            f"{head}; on {self.chip} about {format_time(self.time_s)} (compute "
            f"{format_time(self.compute_s)} + communication {format_time(self.comm_s)})"
        )


def compute_flops(ins: Compute) -> float:
    """FLOPs of one local op: each factor at its local size, read off the first operand or
    result dim that holds that factor alone (whole where none does)."""
    entry, rule, eqn = entry_for(ins.eqn), rule_for(ins.eqn), ins.eqn
    if entry.identity:
        return 0.0
    tensors = zip(
        rule.operands + rule.results,
        eqn.inputs + eqn.outputs,
        ins.operand_shardings + ins.shardings,
        strict=True,
    )
    local = {}
    for factors, v, s in tensors:
        if v.shape:
            for n, fs in zip(s.shard_shape(v.shape), factors, strict=True):
                if len(fs) == 1:
                    local.setdefault(fs[0], n)
    return float(entry.flops * math.prod(local.get(i, f.size) for i, f in enumerate(rule.factors)))


def plan_flops(instructions) -> float:
    """Per-device FLOPs of a list of instructions (a loop's body times its trips; a branch:
    the costliest, one runs)."""
    total = 0.0
    for ins in instructions:
        if isinstance(ins, Compute):
            total += compute_flops(ins)
        elif isinstance(ins, RunLoop):
            total += ins.loop.trips * plan_flops(ins.cond + ins.body)
        elif isinstance(ins, RunCond):
            total += max(plan_flops(b) for b in ins.branches)
    return total


def _written(ins) -> dict[str, int]:
    """Buffer name -> bytes of the buffers one (non-region) instruction writes."""
    if isinstance(ins, Compute):
        outs = zip(ins.outs, ins.shardings, ins.eqn.outputs, strict=True)
        found = {n: s.shard_bytes(v.shape, v.dtype) for n, s, v in outs}
        if ins.ready:  # a window-ready result: its own (wider) shape
            found[ins.outs[0]] = math.prod(ins.ready) * np.dtype(ins.eqn.outputs[0].dtype).itemsize
        return found
    if isinstance(ins, Reshard):
        return {ins.dst: ins.plan.dst.shard_bytes(ins.value.shape, ins.value.dtype)}
    if isinstance(ins, Combine | Halo | MoveBlocks):  # Halo: its window-ready span or so
        return {ins.dst: ins.sharding.shard_bytes(ins.value.shape, ins.value.dtype)}
    if isinstance(ins, Const):
        lit = ins.literal
        return {ins.name: math.prod(lit.shape) * np.dtype(lit.dtype).itemsize}
    return {}


def buffers_read(ins) -> set[str]:
    """Names of the buffers one instruction (a loop or branch: its body too) reads."""
    names = set(ins.ins) if isinstance(ins, Compute) else {getattr(ins, "src", None)}
    if isinstance(ins, ArgCombine):
        names.add(ins.operand)
    for inner in _inner(ins):
        names |= buffers_read(inner)
    names |= set(getattr(ins, "init", ())) | set(getattr(ins, "xs", ()))
    names.add(getattr(ins, "selector", None))
    return {n for n in names if isinstance(n, str)}


def _inner(ins) -> tuple:
    if isinstance(ins, RunLoop):
        return ins.cond + ins.body
    return tuple(i for b in ins.branches for i in b) if isinstance(ins, RunCond) else ()


def peak_bytes(inputs: dict[str, int], instructions, outputs) -> int:
    """Peak of live buffers: a buffer lives from its write to its last read (inputs, which
    the caller keeps, and outputs: throughout); a loop or branch adds its own inner peak while
    it runs, and leaves results as large as the buffers its body hands back."""
    last = {n: len(instructions) for n in [*outputs, *inputs] if isinstance(n, str)}
    for i, ins in enumerate(instructions):
        last |= {n: max(last.get(n, i), i) for n in buffers_read(ins)}
    live, peak = dict(inputs), sum(inputs.values())
    for i, ins in enumerate(instructions):
        inner = _inner(ins)
        written = _written(ins)
        if inner:
            sizes = {n: b for j in inner for n, b in _written(j).items()}
            peak = max(peak, sum(live.values()) + peak_bytes({}, inner, ()))
            outs = getattr(ins, "carry_out", ()) + getattr(ins, "y_out", ())
            written = dict(zip(ins.outs, (sizes.get(n, 0) for n in outs), strict=False))
        live |= written
        peak = max(peak, sum(live.values()))
        for name in [n for n in live if last.get(n, -1) <= i]:
            del live[name]
    return peak


def plan_cost(spmd, chip: ChipCost | None) -> PlanCost:
    """What a partitioned program costs per device (on `chip`, if given)."""
    prop, flops_ = spmd.prop, plan_flops(spmd.instructions)
    inputs = {v.name: prop.sharding(v).shard_bytes(v.shape, v.dtype) for v in spmd.program.inputs}
    peak = peak_bytes(inputs, spmd.instructions, spmd.outputs)
    if chip is None:
        return PlanCost(None, flops_, spmd.wire_bytes, None, None, peak)
    comm = chip.comm_seconds(spmd.collectives)
    return PlanCost(chip.name, flops_, spmd.wire_bytes, flops_ / chip.peak_flops, comm, peak)


def with_cost(spmd, chip: ChipCost | None):
    """`spmd` with its record `spmd.cost` (a PlanCost) set."""
    spmd.cost = plan_cost(spmd, chip)
    return spmd
