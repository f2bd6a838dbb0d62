"""The records of `gv.explain`: one Entry per collective of XLA's compiled program, Findings
beyond collectives, and the Report that prints them like a ledger, grouped by source line."""

from __future__ import annotations

import dataclasses
import textwrap

from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.explain.source import UserCode
from gspmd_viz.units import format_bytes, format_time

FINDING_KINDS = (
    "uneven annotation",
    "gather in loop",
    "involuntary rematerialization",
    "gather or reduce",
    "memory",
)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One collective of XLA's compiled program, put on the user's line and explained."""

    collective: Collective  # XLA's, per-device operand; source = its op_name
    hlo: str = dataclasses.field(repr=False)  # the instruction's line in the compiled module
    line: int  # line of the user's function it comes from
    equation: object  # the jaxpr Equation it comes from (None: none matched)
    seconds: float  # time on the report's chip (every trip)
    reason: str
    ours: tuple[Collective, ...]  # the reference partitioner's at the same place
    file: str = ""  # the file the user's function is written in

    @property
    def location(self) -> str:
        """`train.py:42`."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    @property
    def wire_bytes(self) -> float:
        return self.collective.wire_bytes

    @property
    def kind(self) -> str:
        return self.collective.kind

    @property
    def axes(self) -> tuple[str, ...]:
        return self.collective.axes

    def head(self) -> str:
        eqn = self.equation
        where = f"eqn {eqn.index} {eqn.primitive}" if eqn is not None else "no equation"
        return f"  {self.collective.describe()}  {format_time(self.seconds)}  [{where}]"


def wrapped(text: str, indent: str = "      ") -> str:
    return textwrap.fill(text, 96, initial_indent=indent, subsequent_indent=indent)


def reasons_text(entries: list[Entry]) -> list[str]:
    """Each collective's head line, each distinct reason once, after the collectives it
    explains (several collectives at one equation share one reason)."""
    out: list[str] = []
    for k, e in enumerate(entries):
        out.append(e.head())
        if k + 1 == len(entries) or entries[k + 1].reason != e.reason:
            out.append(wrapped(e.reason))
    return out


@dataclasses.dataclass(frozen=True)
class Finding:
    """Something beyond a collective worth the user's attention, on one line of theirs."""

    kind: str  # one of FINDING_KINDS
    line: int
    message: str
    bytes: float = 0.0  # what it costs per device (wire bytes, or buffer bytes for memory)

    def text(self) -> str:
        return textwrap.fill(
            f"line {self.line} [{self.kind}]: {self.message}",
            96,
            initial_indent="  ",
            subsequent_indent="      ",
        )


@dataclasses.dataclass(frozen=True)
class Report:
    function: str
    mesh: Mesh
    chip: str
    code: UserCode = dataclasses.field(repr=False)
    entries: tuple[Entry, ...]
    findings: tuple[Finding, ...]
    ours: tuple[Collective, ...] = dataclasses.field(repr=False)  # every reference collective
    compiled: object = dataclasses.field(repr=False, default=None)  # CompiledProgram

    @property
    def xla_bytes(self) -> float:
        return float(sum(e.wire_bytes for e in self.entries))

    @property
    def our_bytes(self) -> float:
        return float(sum(c.wire_bytes for c in self.ours))

    @property
    def seconds(self) -> float:
        return float(sum(e.seconds for e in self.entries))

    def by_line(self) -> dict[int, list[Entry]]:
        """line -> its entries, lines in source order."""
        found: dict[int, list[Entry]] = {}
        for e in sorted(self.entries, key=lambda e: e.line):
            found.setdefault(e.line, []).append(e)
        return found

    def line_bytes(self) -> dict[int, float]:
        return {line: sum(e.wire_bytes for e in es) for line, es in self.by_line().items()}

    def findings_of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def header(self) -> str:
        return (
            f"gv.explain({self.function}) on {self.mesh!r}, times on {self.chip}: "
            f"{len(self.entries)} collectives in XLA's compiled program, "
            f"{format_bytes(self.xla_bytes)} per device ({format_time(self.seconds)}); "
            f"the reference partitioner: {len(self.ours)}, {format_bytes(self.our_bytes)}"
        )

    def text(self) -> str:
        lines = [self.header()]
        for line, entries in self.by_line().items():
            total = format_bytes(sum(e.wire_bytes for e in entries))
            lines.append(f"line {line}  {self.code.text(line)}    # {total}")
            lines += reasons_text(entries)
        if self.findings:
            lines.append("findings:")
            lines += [f.text() for f in self.findings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()
