"""jax.checkpoint's recomputation kept apart in the per-device program.

jax lowers a checkpoint with `prevent_cse` by passing the body's operands through an
optimization barrier: XLA cannot then merge the backward's recomputation with the equal values
the forward computed, so those die after the forward (the memory a checkpoint is for). Tracing
inlines the body (a `fresh` Call); the runner puts the same barrier on the buffers a fresh call
reads from outside, just before its first instruction runs.
# jax: remat lowering (optimization_barrier on the remat's operands when prevent_cse)
"""

from __future__ import annotations

import jax

from gspmd_viz.core.spmd.instructions import Compute
from gspmd_viz.core.spmd.loops_branches import defines, inner_instructions
from gspmd_viz.core.spmd.reduce_combine import ArgCombine

__all__ = ["barriers", "buffers_read", "fence", "fresh_call"]


def _equation(ins):
    """The equation an instruction computes or feeds (None: tied to none)."""
    return getattr(ins, "eqn", None) or getattr(ins, "consumer", None)


def fresh_call(ins, calls) -> int | None:
    """The outermost fresh call the equation `ins` computes or feeds was inlined from, if any."""
    eqn = _equation(ins)
    found, c = None, None if eqn is None else eqn.call
    while c is not None:
        found = c if calls[c].fresh else found
        c = calls[c].parent
    return found


def barriers(instructions, calls) -> dict[int, tuple[str, ...]]:
    """Instruction index -> the buffers to pass through one optimization barrier before that
    instruction runs: at each fresh call's first instruction, every buffer its instructions read
    but do not write (`instructions` in run order)."""
    members: dict[int, list] = {}  # fresh call -> [(index, instruction)]
    for i, ins in enumerate(instructions):
        c = fresh_call(ins, calls)
        if c is not None:
            members.setdefault(c, []).append((i, ins))
    fences: dict[int, tuple[str, ...]] = {}
    for found in members.values():
        read = set().union(*(buffers_read(ins) for _, ins in found))
        written = set().union(*(defines(ins) for _, ins in found))
        first = found[0][0]
        fences[first] = tuple(sorted({*fences.get(first, ()), *(read - written)}))
    return fences


def fence(env: dict, names: tuple[str, ...]) -> None:
    """Replace `names`' buffers in `env` by the same values behind an optimization barrier."""
    present = [n for n in names if n in env]
    if present:
        fenced = jax.lax.optimization_barrier([env[n] for n in present])
        env.update(zip(present, fenced, strict=True))


def buffers_read(ins) -> set[str]:
    """Names of the buffers one instruction (a loop or branch: its body too) reads."""
    names = set(ins.ins) if isinstance(ins, Compute) else {getattr(ins, "src", None)}
    if isinstance(ins, ArgCombine):
        names.add(ins.operand)
    for inner in inner_instructions(ins):
        names |= buffers_read(inner)
    names |= set(getattr(ins, "init", ())) | set(getattr(ins, "xs", ()))
    names.add(getattr(ins, "selector", None))
    return {n for n in names if isinstance(n, str)}
