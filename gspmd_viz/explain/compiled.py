"""XLA's compiled program for the user's function: its text, stack frames, collectives (each
with the frame that made it) and what the compiler said on stderr.

The compiler logs warnings such as "Involuntary full rematerialization" from C++ straight to
file descriptor 2; `compile_program` redirects that descriptor into a file for the length of the
compile, so nothing reaches the console or the log, and returns what was written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import tempfile

from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.explain.frames import FrameIndex, frame_index
from gspmd_viz.xla.compiled import lowered, parse_hlo_lines

_FRAME = re.compile(r"stack_frame_id=(\d+)")


@dataclasses.dataclass(frozen=True)
class XlaCollective:
    """One collective of XLA's compiled program, the HLO line it came from and its frame."""

    collective: Collective
    hlo: str  # the instruction's line in the compiled module
    frame: int  # stack_frame_id (0: none)

    @property
    def primitive(self) -> str:
        """The jaxpr primitive its op_name ends with (`jit(f)/dot_general` -> dot_general)."""
        return self.collective.source.rsplit("/", 1)[-1].split("[")[0]


@dataclasses.dataclass(frozen=True)
class CompiledProgram:
    text: str  # the compiled (partitioned) module
    frames: FrameIndex
    collectives: tuple[XlaCollective, ...]
    stderr: str  # what the compiler wrote to stderr while compiling
    memory: object  # compiled.memory_analysis() (None where the backend gives none)


@contextlib.contextmanager
def _captured_stderr(sink: list):
    """Point fd 2 at a temporary file; append what was written to `sink` on the way out."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode(errors="replace"))


def frame_of(line: str) -> int:
    found = _FRAME.search(line)
    return int(found.group(1)) if found else 0


def compile_program(fn, *args, mesh: Mesh, in_shardings=None, out_shardings=None):
    """Compile `jax.jit(fn)` on `mesh`'s devices (boundary pins as gv.xla.collectives takes
    them) and read the compiled module; the compiler's stderr is captured, not shown."""
    low = lowered(fn, *args, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings)
    said: list[str] = []
    with _captured_stderr(said):
        compiled = low.compile()
    text = compiled.as_text()
    proto = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    found = tuple(XlaCollective(c, line, frame_of(line)) for line, c in parse_hlo_lines(text, mesh))
    try:
        memory = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - a backend without memory analysis
        memory = None
    return CompiledProgram(text, frame_index(proto), found, "".join(said), memory)


_DEFINES = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CALL = re.compile(r"=\s*(?:\([^)]*\)|\S+)\s+[\w\-]+\(([^)]*)\)")


def instructions(text: str) -> dict[str, str]:
    """instruction name -> its line, over every computation of the module."""
    found = {}
    for line in text.splitlines():
        m = _DEFINES.match(line)
        if m:
            found[m.group(1)] = line
    return found


def operands(line: str) -> list[str]:
    """The instruction names a line reads (its operand list, before any attribute)."""
    m = _CALL.search(line)
    return _OPERAND.findall(m.group(1)) if m else []


def inherited_frame(line: str, defined: dict[str, str], hops: int = 12) -> int:
    """The frame of a line, or (a reshard XLA adds at a boundary has no metadata) of the
    nearest operand upstream that has one (0: none within `hops`)."""
    todo, seen = [line], set()
    while todo and hops > 0:
        current = todo.pop(0)
        hops -= 1
        if frame_of(current):
            return frame_of(current)
        for name in operands(current):
            if name in defined and name not in seen:
                seen.add(name)
                todo.append(defined[name])
    return 0
