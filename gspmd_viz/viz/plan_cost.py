"""The plan's cost in the ledger: per device FLOPs, wire bytes, peak memory and estimated time on
the chosen chip (split_cost.PlanCost, recomputed for that chip from the partitioner's record),
beside XLA's compiled program for the same program when it is known (xla_cost.Side: each
compiled program's own cost and memory analysis)."""

from __future__ import annotations

from gspmd_viz.core.split_cost import plan_cost
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.units import format_bytes

__all__ = ["plan_text"]


def _ratio(ours: float, xla: float) -> str:
    return f"{ours / xla:.2f}x" if xla else ("1.00x" if ours == xla else "n/a")


def xla_text(side) -> str:
    """Ours / XLA's per device, both compiled: FLOPs, memory, wire bytes, and the ratios."""
    o, x = side.ours, side.xla
    return (
        f"compiled, per device, ours / XLA's: FLOPs {o.flops:,.0f} / {x.flops:,.0f} "
        f"({_ratio(o.flops, x.flops)}), memory {format_bytes(o.memory)} / "
        f"{format_bytes(x.memory)} ({_ratio(o.memory, x.memory)}), wire "
        f"{format_bytes(o.wire_bytes)} / {format_bytes(x.wire_bytes)} "
        f"({_ratio(o.wire_bytes, x.wire_bytes)})"
    )


def plan_text(spmd, chip: str, xla=None) -> str:
    """`our plan on <chip>: ...` and, given `xla` (an xla_cost.Side), XLA's figures beside."""
    lines = [f"our plan on {chip}, {plan_cost(spmd, chip_cost(chip))}"]
    if xla is not None:
        lines.append(xla_text(xla))
    return "\n".join(lines)
