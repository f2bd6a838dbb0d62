"""Small readings of the compiled module's text: computations, buffer types, the user line of
every instruction, and whether a loop body's value changes from one trip to the next."""

from __future__ import annotations

import math
import re

import numpy as np

from gspmd_viz.explain.compiled import frame_of, instructions, operands
from gspmd_viz.explain.source import user_line
from gspmd_viz.xla.compiled import _DTYPES, computations

_TYPE = re.compile(r"=\s*(\w+)\[([\d,]*)\]")
_GTE = re.compile(r"get-tuple-element\(%([\w.\-]+)\), index=(\d+)")
_FREE = ("constant(", "partition-id(", "replica-id(", "iota(")


def array_type(line: str) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, per-device shape) of an instruction with one array result (None: a tuple or
    a type we do not size)."""
    m = _TYPE.search(line)
    if not m or m.group(1) not in _DTYPES:
        return None
    return np.dtype(_DTYPES[m.group(1)]), tuple(int(n) for n in m.group(2).split(",") if n)


def buffer_bytes(line: str) -> int:
    typed = array_type(line)
    return 0 if typed is None else typed[0].itemsize * math.prod(typed[1])


def buffers(text: str) -> list[str]:
    """Instruction lines that own a buffer: those outside the computations a fusion or a
    reduction applies (their values live in registers, not in HBM)."""
    comps, _ = computations(text)
    inner = set(re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", text))
    return [line for name, lines in comps.items() if name not in inner for line in lines]


def user_lines(text: str, frames, code, lines=None) -> list[tuple[int, str]]:
    """(user line, instruction line) for every instruction whose frame reaches the function
    (of `lines`, default every line of the module)."""
    found = []
    for line in text.splitlines() if lines is None else lines:
        frame = frame_of(line)
        where = user_line(frames.chain(frame), code) if frame else None
        if where is not None:
            found.append((where.line, line))
    return found


def _invariant_slots(defined: dict[str, str]) -> tuple[str | None, set[int]]:
    """(the body's parameter, tuple slots the body passes through unchanged); `defined`:
    instruction name -> line, over the body."""
    param = next((n for n, x in defined.items() if "parameter(0)" in x), None)
    root = next(
        (x for x in defined.values() if x.lstrip().startswith("ROOT") and " tuple(" in x), None
    )
    if param is None or root is None:
        return param, set()
    slots = set()
    for i, name in enumerate(operands(root)):
        gte = _GTE.search(defined.get(name, ""))
        if gte and gte.group(1) == param and int(gte.group(2)) == i:
            slots.add(i)
    return param, slots


def loop_invariant(lines: list[str], name: str) -> bool:
    """Whether instruction `name` of a loop body computes the same value on every trip: it
    reads only constants and the tuple slots the body passes through unchanged."""
    defined = instructions("\n".join(lines))
    param, slots = _invariant_slots(defined)
    memo: dict[str, bool] = {}

    def same(n: str, depth: int) -> bool:
        if n not in memo:
            line = defined.get(n, "")
            gte = _GTE.search(line)
            if gte and gte.group(1) == param:
                memo[n] = int(gte.group(2)) in slots
            elif any(op in line for op in _FREE):
                memo[n] = True
            elif not line or "parameter(" in line or depth > 32:
                memo[n] = False
            else:
                memo[n] = all(same(o, depth + 1) for o in operands(line))
        return memo[n]

    return same(name, 0)
