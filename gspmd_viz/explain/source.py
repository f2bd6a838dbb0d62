"""The user's function as source: its file, its lines, and which line a stack points at.

A stack (XLA's frame chain, or a jaxpr equation's traceback) runs from the innermost call out;
the line that belongs to the user is the first one inside the function they passed, so a
collective made in a helper (or in gv.mesh_split) is put on the line of the user's function
that called it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

from gspmd_viz.explain.frames import Location


@dataclasses.dataclass(frozen=True)
class UserCode:
    file: str
    first: int  # line number of the function's first line (its `def`)
    lines: tuple[str, ...]  # the function's source, one entry per line

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1

    def contains(self, location: Location) -> bool:
        return location.file == self.file and self.first <= location.line <= self.last

    def text(self, line: int) -> str:
        """The source text of one line of the function (stripped)."""
        return self.lines[line - self.first].strip() if self.first <= line <= self.last else ""


def user_code(fn) -> UserCode:
    """Where `fn` (or the function a jax.jit or functools.partial wraps) is written."""
    inner = inspect.unwrap(fn)
    while isinstance(inner, functools.partial):
        inner = inspect.unwrap(inner.func)
    code = getattr(inner, "__code__", None)
    if code is None:
        raise TypeError(f"gv.explain needs a Python function, got {type(fn).__name__}")
    try:
        lines, first = inspect.getsourcelines(inner)
    except (OSError, TypeError):  # defined where no source is kept (exec, the REPL)
        last = max((line for _, _, line in code.co_lines() if line), default=code.co_firstlineno)
        first, lines = code.co_firstlineno, [""] * (last - code.co_firstlineno + 1)
    return UserCode(code.co_filename, first, tuple(line.rstrip("\n") for line in lines))


def user_line(stack: list[Location], code: UserCode) -> Location | None:
    """The innermost location of the stack inside the user's function (None: outside it)."""
    return next((loc for loc in stack if code.contains(loc)), None)


def equation_stack(eqn) -> list[Location]:
    """A jaxpr equation's traceback as Locations, innermost first (none for the equations
    tracing made up, such as a loop's data-flow edges)."""
    traceback = eqn.source_info.traceback if eqn is not None else None
    frames = traceback.frames if traceback is not None else []
    return [Location(f.file_name, f.function_name, f.line_num) for f in frames]
