"""The plan's cost in the ledger: per device FLOPs, wire bytes, peak memory and estimated time on
the chosen chip (plan_cost.PlanCost, recomputed for that chip from the partitioner's record),
beside XLA's compiled program for the same program when it is known (xla.cost.Side: each
compiled program's own cost and memory analysis)."""

from __future__ import annotations

from gspmd_viz.core.cost.plan_cost import plan_cost
from gspmd_viz.partition_on_chip import chip_cost

__all__ = ["plan_text"]


def xla_text(side) -> str:
    """Ours / XLA's per device, both compiled: FLOPs, memory, wire bytes, and the ratios."""
    ratios = ", ".join(
        f"{name} {side.ratio(field):.2f}x"
        for name, field in (("FLOPs", "flops"), ("memory", "memory"), ("wire", "wire_bytes"))
    )
    return f"compiled, per device, ours / XLA's: {side.text()}\n  ratios: {ratios}"


def plan_text(spmd, chip: str, xla=None) -> str:
    """`our plan on <chip>: ...` and, given `xla` (an xla.cost.Side), XLA's figures beside."""
    lines = [f"our plan on {chip}, {plan_cost(spmd, chip_cost(chip))}"]
    if xla is not None:
        lines.append(xla_text(xla))
    return "\n".join(lines)
