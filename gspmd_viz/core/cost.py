"""Time on a chip: what the partitioner weighs when it chooses a split, and the record it keeps.

core knows no chip by name. `gv.partition(prop, chip="tpu-v3")` looks the chip up in gv.sim
and hands core a `ChipCost`: plain numbers and one function (a collective's seconds from its
kind, bytes and group size: gv.sim.collective_time, a bidirectional ring over the mesh axis,
all-to-all limited by the ring's bisection).

Roofline per equation (scaling book, part 1): max(FLOPs / peak FLOP/s, HBM bytes / HBM
bandwidth). A collective costs its ring time. A split whose buffers would not fit in HBM costs
`OVER_HBM_S` plus the time to stream the excess: it cannot run, so it loses to any split that
fits. Compute and communication are added (no overlap): an upper bound, as XLA's cost model
also assumes for a single op.  # XLA: spmd_partitioner's choice in dot_handler.cc (by bytes
and FLOPs); GSPMD section 3.5
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gspmd_viz.core.collective import Collective
from gspmd_viz.core.spmd import Combine, Compute, Const, Reshard
from gspmd_viz.units import format_bytes, format_time

OVER_HBM_S = 1.0  # a split that does not fit: one second is far beyond any step here


@dataclasses.dataclass(frozen=True)
class ChipCost:
    """What the partitioner knows of a chip. `collective_seconds(kind, S, n)`: S as in
    gv.sim.collective_time (all-gather's result bytes, the operand's for the others)."""

    name: str
    peak_flops: float
    hbm_bytes: float
    hbm_bandwidth: float
    collective_seconds: Callable[[str, float, int], float] = dataclasses.field(repr=False)

    def compute_seconds(self, flops: float, hbm_bytes: float) -> float:
        """Roofline: bound by the FLOPs or by the bytes read and written, whichever is slower."""
        return max(flops / self.peak_flops, hbm_bytes / self.hbm_bandwidth)

    def comm_seconds(self, collectives) -> float:
        return sum(
            self.collective_seconds(c.kind, c.payload_bytes, c.group_size) for c in collectives
        )

    def memory_penalty(self, live_bytes: float) -> float:
        excess = live_bytes - self.hbm_bytes
        return OVER_HBM_S + excess / self.hbm_bandwidth if excess > 0 else 0.0


# --- the record: what the chosen plan costs -----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanCost:
    """Per device: FLOPs, wire bytes, estimated seconds (compute + communication, no overlap),
    and the peak of live buffers (inputs, every buffer until its last use, the outputs)."""

    chip: str
    flops: float
    wire_bytes: float
    compute_s: float
    comm_s: float
    peak_bytes: int

    @property
    def time_s(self) -> float:
        return self.compute_s + self.comm_s

    def __str__(self) -> str:
        return (
            f"on {self.chip}, per device: {self.flops:,.0f} FLOPs, "
            f"{format_bytes(self.wire_bytes)} on the wire, peak memory "
            f"{format_bytes(self.peak_bytes)}; estimated {format_time(self.time_s)} "
            f"(compute {format_time(self.compute_s)} + communication {format_time(self.comm_s)})"
        )


def _buffers(ins) -> list[tuple[str, int]]:
    """(name, bytes) of the buffers one instruction writes."""
    if isinstance(ins, Compute):
        outs = zip(ins.outs, ins.shardings, ins.eqn.outputs, strict=True)
        return [(n, s.shard_bytes(v.shape, v.dtype)) for n, s, v in outs]
    if isinstance(ins, Reshard):
        return [(ins.dst, ins.plan.dst.shard_bytes(ins.value.shape, ins.value.dtype))]
    if isinstance(ins, Combine):
        return [(ins.dst, ins.sharding.shard_bytes(ins.value.shape, ins.value.dtype))]
    if isinstance(ins, Const):
        return [(ins.name, int(ins.literal.value.nbytes))]
    return []


def _reads(ins) -> list[str]:
    if isinstance(ins, Compute):
        return [a for a in ins.ins if isinstance(a, str)]
    return [ins.src] if isinstance(ins, (Reshard, Combine)) else []


def peak_bytes(inputs: dict[str, int], instructions, outputs) -> int:
    """Peak of live buffers over the program: a buffer lives from its write to its last read
    (program inputs from the start, outputs to the end)."""
    last = {name: len(instructions) for name in outputs if isinstance(name, str)}
    for i, ins in enumerate(instructions):
        for name in _reads(ins):
            last[name] = max(last.get(name, i), i)
    live = dict(inputs)
    peak = sum(live.values())
    for i, ins in enumerate(instructions):
        live.update(_buffers(ins))
        peak = max(peak, sum(live.values()))
        for name in [n for n in live if last.get(n, -1) <= i]:
            del live[name]
    return peak


def plan_cost(chip: ChipCost, inputs: dict[str, int], instructions, outputs) -> PlanCost:
    collectives: list[Collective] = [
        c for ins in instructions for c in getattr(ins, "collectives", ())
    ]
    computes = [ins for ins in instructions if isinstance(ins, Compute)]
    return PlanCost(
        chip.name,
        float(sum(ins.flops for ins in computes)),
        float(sum(c.wire_bytes for c in collectives)),
        sum(chip.compute_seconds(ins.flops, ins.hbm_bytes) for ins in computes),
        chip.comm_seconds(collectives),
        peak_bytes(inputs, instructions, outputs),
    )
