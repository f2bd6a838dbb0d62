"""The record of a partitioned program: what its chosen plan costs per device (FLOPs, wire bytes,
estimated time on a chip, peak live memory), read off its instructions. `spmd.cost` is one.
split_cost.py ranks one equation's candidate splits; this module costs the whole plan."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from gspmd_viz.core.cost.split_cost import ChipCost
from gspmd_viz.core.cost.staged_bytes import staging_bytes
from gspmd_viz.core.rules.registry import entry_for, point_flops, rule_for
from gspmd_viz.core.spmd.checkpoint_barriers import buffers_read
from gspmd_viz.core.spmd.instructions import (
    Combine,
    Compute,
    Const,
    Halo,
    MoveBlocks,
    Reshard,
    wire_bytes_of,
)
from gspmd_viz.core.spmd.local_kernels import keeps_nan
from gspmd_viz.core.spmd.loops_branches import RunCond, RunLoop, defines, inner_instructions
from gspmd_viz.units import format_bytes, format_time


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
    result dim that holds that factor alone (whole where none does). Kept on the op where
    the partitioner made it (`Compute.flops`: one op serves an equation's twins in every
    pass), else worked out."""
    if ins.flops is not None:
        return ins.flops
    return _local_flops(ins.eqn, ins.operand_shardings, ins.shardings)


@functools.lru_cache(maxsize=8192)
def _local_flops(eqn, operand_shardings: tuple, shardings: tuple) -> float:
    """compute_flops, once per (equation, shardings): every plan of one program asks again."""
    entry, rule = entry_for(eqn), rule_for(eqn)
    if entry.identity:
        return 0.0
    tensors = zip(
        rule.operands + rule.results,
        eqn.inputs + eqn.outputs,
        operand_shardings + shardings,
        strict=True,
    )
    local = {}
    for factors, v, s in tensors:
        if v.shape:
            for n, fs in zip(s.shard_shape(v.shape), factors, strict=True):
                if len(fs) == 1:
                    local.setdefault(fs[0], n)
    nest = math.prod(local.get(i, f.size) for i, f in enumerate(rule.factors))
    return float(point_flops(eqn) * nest)


def result_bytes(ins: Compute) -> tuple[int, ...]:
    """Bytes of each result's local shard of one local op, as computed (a window-ready result
    aside: `_written`). Kept on the op where the partitioner made it (`Compute.result_bytes`:
    one op serves an equation's twins in every pass), else worked out."""
    if ins.result_bytes is not None:
        return ins.result_bytes
    outs = zip(ins.shardings, ins.eqn.outputs, strict=True)
    return tuple([s.shard_bytes(v.shape, v.dtype) for s, v in outs])


# FLOPs an element of an all-reduce, as XLA's cost analysis counts them: a sum or a pmax
# does one; a float max/min combine nine, for the integer keys local_kernels.all_reduce makes and
# undoes around its pmax to keep a NaN (isnan, select, compare, xor, select; the pmax; compare,
# xor, select: test_xla_cost checks both against XLA's count)
ALL_REDUCE_FLOPS = 1
NAN_KEEPING_FLOPS = 9


def plan_flops(instructions) -> float:
    """Per-device FLOPs of a list of instructions (a loop's body times its trips; a branch:
    the costliest, one runs), all-reduces included (`collective_flops`). Each op counts once
    at its own shape, as XLA's cost analysis counts an unfused program (`gv.xla_cost`): the
    elementwise ops XLA fuses into a move's slices compute only the elements sliced."""
    total = 0.0
    for ins in instructions:
        if isinstance(ins, Compute):
            total += compute_flops(ins)
        elif isinstance(ins, RunLoop):
            total += ins.loop.trips * plan_flops(ins.cond + ins.body)
        elif isinstance(ins, RunCond):
            total += max(plan_flops(b) for b in ins.branches)
        else:
            total += collective_flops(ins)
    return total


def collective_flops(ins) -> float:
    """FLOPs of one instruction's all-reduces (a reshard's sums, a max/min combine): the
    other collectives only move data."""
    nan_keeping = isinstance(ins, Combine) and keeps_nan(ins.combine, ins.value.dtype)
    per_element = NAN_KEEPING_FLOPS if nan_keeping else ALL_REDUCE_FLOPS
    reduced = (c for c in costed_collectives(ins) if c.kind == "all-reduce")
    return float(sum(per_element * math.prod(c.shape) for c in reduced))


def costed_collectives(ins) -> list:
    """One instruction's collectives as costing reads them: a reshard's plan's own, not copies
    naming the reshard's value and reader (Reshard.collectives: a label costs nothing)."""
    return ins.plan.collectives if isinstance(ins, Reshard) else getattr(ins, "collectives", ())


def _is_annotation(ins) -> bool:
    """An annotation (sharding_constraint) computes nothing: its result is its operand's buffer."""
    return isinstance(ins, Compute) and entry_for(ins.eqn).identity


def _aliases(instructions) -> dict[str, str]:
    """Result name -> the buffer it names, for every annotation's result (loop and branch
    bodies included): the runner hands the operand on, and XLA compiles a constraint the
    value already meets to nothing."""
    alias: dict[str, str] = {}
    for ins in instructions:
        if not isinstance(ins, Compute):  # a local op has no body
            alias |= _aliases(inner_instructions(ins))
        elif _is_annotation(ins):
            for out, src in zip(ins.outs, ins.ins, strict=False):
                if isinstance(src, str):
                    alias[out] = alias.get(src, src)
    return alias


def _written(ins) -> dict[str, int]:
    """Buffer name -> bytes of the buffers one (non-region) instruction writes (none for an
    annotation)."""
    if _is_annotation(ins):
        return {}
    if isinstance(ins, Compute):
        found = dict(zip(ins.outs, result_bytes(ins), strict=True))
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


def _written_by(ins: Compute):
    """_written(ins).items() of a local op: most (no annotation, no window-ready result)
    write their results at their bytes, read off without a dict made."""
    if ins.ready or _is_annotation(ins):
        return _written(ins).items()
    return zip(ins.outs, result_bytes(ins), strict=True)


def peak_bytes(inputs: dict[str, int], instructions, outputs) -> int:
    """Peak of live buffers: a buffer lives from its write to its last read (inputs, which
    the caller keeps, and outputs: throughout), an annotation's result being its operand's
    buffer (`_aliases`), and a collective's staging copy while it runs (`staging_bytes`); a
    reshard of what is ready at the start runs first (`_in_issue_order`); a loop or branch
    adds its own inner peak while it runs, and leaves results as large as the buffers its
    body hands back."""
    alias = _aliases(instructions)
    instructions = _in_issue_order(instructions, alias)
    last = _last_reads(instructions, alias)
    last |= {alias.get(n, n): len(instructions) for n in [*outputs, *inputs] if isinstance(n, str)}
    live, total, dying = dict(inputs), sum(inputs.values()), {}  # dying: instruction ->
    for name in inputs:  # the buffers last read there
        dying.setdefault(max(0, last.get(name, -1)), []).append(name)
    peak = total
    for i, ins in enumerate(instructions):
        if isinstance(ins, Compute):  # a local op stages nothing
            written, staged = _written_by(ins), 0
        else:  # a collective stages copies; a loop or branch holds its inner peak
            written, staged, running = _moved_or_run(ins, alias)
            peak = max(peak, total + running)  # (before its results are written)
            written = written.items()
        for name, size in written:
            total += size - live.get(name, 0)
            live[name] = size
            dying.setdefault(max(i, last.get(name, -1)), []).append(name)
        peak = max(peak, total + staged)
        for name in dying.pop(i, ()):
            total -= live.pop(name, 0)
    return peak


def _moved_or_run(ins, alias: dict[str, str]) -> tuple[dict[str, int], int, int]:
    """For an instruction that is not a local op: (the buffers it writes, the staging copies
    its collectives hold beside its results, the inner peak a loop or branch holds beside the
    buffers live before it, its results as large as the buffers its body hands back)."""
    inner = inner_instructions(ins)
    if not inner:
        return _written(ins), staging_bytes(ins), 0
    sizes = {n: b for j in inner for n, b in _written(j).items()}
    outs = getattr(ins, "carry_out", ()) + getattr(ins, "y_out", ())
    written = zip(ins.outs, (sizes.get(alias.get(n, n), 0) for n in outs), strict=False)
    return dict(written), 0, peak_bytes({}, inner, ())


def _last_reads(instructions, alias: dict[str, str]) -> dict[str, int]:
    """Buffer -> the index of the last instruction that reads it (a local op: its operand
    names; others: `buffers_read`)."""
    last = {}
    for i, ins in enumerate(instructions):
        names = ins.ins if isinstance(ins, Compute) else buffers_read(ins)
        for n in names:
            if isinstance(n, str):
                last[alias.get(n, n)] = i
    return last


def _in_issue_order(instructions, alias: dict[str, str]) -> list:
    """`instructions` with the reshards whose sources are ready when they start (inputs; in a
    loop body its carries, constants and per-trip slices; or such a reshard's result) moved to
    the front: XLA:CPU's scheduler issues those collectives first, so their results live from
    the start (a weight gathered for a loop body's last matmul is held through its attention)."""
    made = {n for ins in instructions for n in defines(ins)}
    early, rest = [], []
    for ins in instructions:
        ready = isinstance(ins, Reshard) and alias.get(ins.src, ins.src) not in made
        (early if ready else rest).append(ins)
        if ready:
            made.discard(ins.dst)
    return early + rest


def plan_cost(spmd, chip: ChipCost | None) -> PlanCost:
    """What a partitioned program costs per device (on `chip`, if given)."""
    prop, flops_ = spmd.prop, plan_flops(spmd.instructions)
    inputs = {v.name: prop.sharding(v).shard_bytes(v.shape, v.dtype) for v in spmd.program.inputs}
    peak = peak_bytes(inputs, spmd.instructions, spmd.outputs)
    collectives = [c for ins in spmd.instructions for c in costed_collectives(ins)]
    wire = wire_bytes_of(collectives)
    if chip is None:
        return PlanCost(None, flops_, wire, None, None, peak)
    comm = chip.comm_seconds(collectives)
    return PlanCost(chip.name, flops_, wire, flops_ / chip.peak_flops, comm, peak)


def with_cost(spmd, chip: ChipCost | None):
    """`spmd` with its record `spmd.cost` (a PlanCost) set."""
    spmd.cost = plan_cost(spmd, chip)
    return spmd
