"""The ledger at two sizes: one program partitioned at a toy size and at a real size on the
same mesh. The chooser weighs bytes, FLOPs and memory, and which operand is cheaper to move
depends on the sizes, so the same annotations can give another plan. `size_change_text` puts
both plans' totals side by side and lists every equation whose operands or results move by
other collectives (the ledger's rows, grouped by the equation they serve)."""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from gspmd_viz.core.spmd.run import SPMDProgram
from gspmd_viz.units import format_bytes
from gspmd_viz.viz.ledger.plan_cost import plan_text
from gspmd_viz.viz.ledger.widget import rows

__all__ = ["Move", "moves_by_equation", "size_change_text", "size_changes"]

SUMS = ("all-reduce", "reduce-scatter")


class Move(NamedTuple):
    what: str  # "all-gather(x) of e"
    local: str  # the per-device operand, "f32[512, 2048]"
    wire_bytes: float


def _label(spmd: SPMDProgram, index: int | None) -> str:
    if index is None:
        return "the program's outputs"
    return f"eqn {index} {spmd.program.equations[index].primitive}"


def moves_by_equation(spmd: SPMDProgram) -> dict[int | None, list[Move]]:
    """Equation index (None: the outputs) -> the collectives that move its operands or sum
    its partial results."""
    moves: dict[int | None, list[Move]] = defaultdict(list)
    for r in rows(spmd):
        c = r["collective"]
        # a sum resolves its producer's partial sums; other moves serve their consumer
        if c.kind in SUMS and r["node"] >= 0:
            index = r["node"]
        else:
            index = r["edge"][1] if r["edge"] is not None else None
        what = f"{c.kind}({','.join(c.axes)}) of {r['value']}"
        moves[index].append(Move(what, c.type_text(), c.wire_bytes))
    return dict(moves)


def _what(moves: list[Move]) -> list[str]:
    """What moves, without the sizes."""
    return sorted(m.what for m in moves)


def size_changes(small: SPMDProgram, large: SPMDProgram) -> list[tuple[str, list, list]]:
    """(equation, collectives at the small size, at the large size) wherever they differ
    (ignoring the sizes themselves). Both must be the same program traced at two sizes."""
    if len(small.program.equations) != len(large.program.equations):
        raise ValueError("size_changes compares one program at two sizes: these differ in shape")
    a, b = moves_by_equation(small), moves_by_equation(large)
    keys = sorted(set(a) | set(b), key=lambda k: (k is None, k or 0))
    return [
        (_label(small, k), a.get(k, []), b.get(k, []))
        for k in keys
        if _what(a.get(k, [])) != _what(b.get(k, []))
    ]


def size_change_text(small: SPMDProgram, large: SPMDProgram, chip: str = "tpu-v3") -> str:
    """Both plans' cost on `chip`, then each equation whose collectives change with size."""
    lines = [
        f"small: {plan_text(small, chip)}",
        f"large: {plan_text(large, chip)}",
    ]
    changes = size_changes(small, large)
    if not changes:
        lines.append("same collectives at both sizes: only their bytes and times grow")
    for where, before, after in changes:
        lines.append(f"{where}:")
        for size, moves in (("small", before), ("large", after)):
            lines += [f"  {size}  {m.what} {m.local}: {format_bytes(m.wire_bytes)}" for m in moves]
            lines += [f"  {size}  (nothing moves)"] if not moves else []
    return "\n".join(lines)
