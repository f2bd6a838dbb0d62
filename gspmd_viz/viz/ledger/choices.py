"""The partitioner's choices between two plans, as the ledger shows them: where a contraction's
operands split different factors over one mesh axis (a weight over FSDP's "data" axis, the
activations' batch over it too), the cost of gathering the weight and of reducing the partial
product instead, and which was kept and why (core/choice/gather_or_reduce.py records them;
nothing is recomputed here)."""

from __future__ import annotations

__all__ = ["choices_text"]


def choices_text(spmd) -> str:
    """One block per equation that weighed gathering against reducing ('' when none did)."""
    return "\n".join(choice.text() for choice in spmd.choices)
