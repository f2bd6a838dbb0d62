"""Reading XLA's propagated shardings out of one compile's HLO dump.

We compile with `xla_dump_to` and `xla_dump_hlo_pass_re="shardy-xla|sharding-propagation"`, so
XLA writes the module right after sharding propagation (`*after_shardy-xla*` with Shardy, or
`*after_sharding-propagation*` with the old GSPMD pass). Every instruction there carries
`sharding={...}` and `metadata={op_name="jit(f)/eqn12/dot_general"}`: the equation that made it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass

DUMP_OPTIONS = {"xla_dump_hlo_pass_re": "shardy-xla|sharding-propagation"}
_INSTR = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*(?P<type>\([^=]*?\)|[\w]+\[[\d,]*\](?:\{[\d,]*\})?)"
    r"\s+(?P<opcode>[\w\-]+)\((?P<rest>.*)$"
)
_TYPE = re.compile(r"^(?P<dtype>\w+)\[(?P<dims>[\d,]*)\]")
_EQN = re.compile(r"/eqn(\d+)/")
_PARAM = re.compile(r"^parameter\((\d+)\)")


@dataclass(frozen=True)
class Instruction:
    name: str
    dtype: str  # XLA short name: f32, s32, pred ("tuple" for tuples)
    shape: tuple[int, ...]
    opcode: str
    sharding: str | None  # HloSharding text, None when XLA left it unset
    eqn: int | None  # the jaxpr equation (from the op_name scope), if any
    parameter: int | None  # the entry parameter number, for parameters


def _braced(text: str, start: int) -> str:
    """The balanced `{...}` starting at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    raise ValueError(f"unbalanced braces in HLO: {text[start : start + 80]!r}")


def _attribute(rest: str, key: str) -> str | None:
    at = rest.find(f", {key}={{")
    return None if at < 0 else _braced(rest, at + len(key) + 3)


def parse_instruction(line: str) -> Instruction | None:
    m = _INSTR.match(line)
    if m is None:
        return None
    t = _TYPE.match(m["type"])
    dtype, shape = (
        ("tuple", ())
        if t is None
        else (t["dtype"], tuple(int(d) for d in t["dims"].split(",") if d))
    )
    rest = m["rest"]
    metadata = _attribute(rest, "metadata") or ""
    eqn = _EQN.search(metadata)
    param = _PARAM.match(m["opcode"] + "(" + rest)
    return Instruction(
        m["name"],
        dtype,
        shape,
        m["opcode"],
        _attribute(rest, "sharding"),
        int(eqn[1]) if eqn else None,
        int(param[1]) if param else None,
    )


def entry_instructions(hlo: str) -> list[Instruction]:
    """The instructions of the ENTRY computation, in text order."""
    return [i for i in map(parse_instruction, _entry_lines(hlo)) if i is not None]


def _entry_lines(hlo: str, head: str = "ENTRY ") -> list[str]:
    """The lines of the computation whose header starts with `head` (default: ENTRY)."""
    lines, inside = [], False
    for line in hlo.splitlines():
        if line.startswith(head):
            inside = True
        elif inside and line.startswith("}"):
            break
        elif inside:
            lines.append(line)
    return lines


def region_instructions(hlo: str) -> list[Instruction]:
    """The instructions of every `while` condition and body and every `conditional` branch
    (a loop's or cond's equations are scoped there), without their parameters (they are not
    the program's)."""
    bodies = dict.fromkeys(re.findall(r" while\(.*?(?:condition|body)=%([\w.\-]+)", hlo))
    bodies.update(dict.fromkeys(re.findall(r" while\(.*?body=%([\w.\-]+)", hlo)))
    for names in re.findall(r" conditional\(.*?branch_computations=\{([^}]*)\}", hlo):
        bodies.update(dict.fromkeys(n.strip().lstrip("%") for n in names.split(",")))
    lines = [ln for name in bodies for ln in _entry_lines(hlo, f"%{name} ")]
    found = [i for i in map(parse_instruction, lines) if i is not None]
    return [i for i in found if i.parameter is None]


def root_shardings(hlo: str) -> list[str]:
    """The sharding of each element of the ENTRY's ROOT tuple (the program's results), read
    where no equation scope names them (a loop's results come out of the `while` tuple)."""
    root = next((ln for ln in _entry_lines(hlo) if ln.lstrip().startswith("ROOT ")), "")
    text = _attribute(root, "sharding")
    if not text or " tuple(" not in root:  # one result
        return [text] if text else []
    if not text.startswith("{{"):
        return []
    parts, depth, start = [], 0, 1
    for i, ch in enumerate(text[1:-1], start=1):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:-1].strip()]


def propagated_hlo(lowered) -> str:
    """Compile `lowered` once and return the HLO text right after sharding propagation."""
    with tempfile.TemporaryDirectory(prefix="gv_xla_") as d:
        lowered.compile(compiler_options={"xla_dump_to": d, **DUMP_OPTIONS})
        names = sorted(os.listdir(d))
        for marker in ("after_shardy-xla", "after_sharding-propagation"):
            found = [n for n in names if marker in n and n.endswith(".txt")]
            if found:
                with open(os.path.join(d, found[-1])) as fh:
                    return fh.read()
    raise RuntimeError(
        "XLA wrote no HLO after sharding propagation; is the function annotated on a mesh with "
        "more than one device? (a single-device compile skips SPMD partitioning)"
    )
