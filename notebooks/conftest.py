"""Lessons are checked as nbval runs them: besides comparing every output with the committed one,
each lesson's exercises must be sealed (tests/lesson_seal.py). The answers are recorded in the
same kernel nbval runs the lesson in, so no lesson runs twice."""

import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.lesson_seal import CELL, recorded, recording_code, seal_problems  # noqa: E402

ANSWERS = Path(tempfile.mkdtemp(prefix="gv-seal-"))


def _nbval_cell(item) -> bool:
    return hasattr(item, "cell") and hasattr(item.parent, "kernel")


def _in_kernel(item, code: str) -> None:
    """Run `code` silently in the lesson's kernel before nbval runs the cell (nbval's own
    coverage set-up does the same)."""
    kernel = item.parent.kernel
    kernel.await_idle(kernel.kc.execute(code, silent=True, stop_on_error=False), 60)


def _answers_file(item) -> Path:
    return ANSWERS / f"{Path(str(item.parent.fspath)).stem}.jsonl"


@pytest.hookimpl(trylast=True)  # after pytest's own set-up has started the lesson's kernel
def pytest_runtest_setup(item):
    if not _nbval_cell(item):
        return
    if item.cell_num == 0:
        _in_kernel(item, recording_code(_answers_file(item)))
    index = next(i for i, c in enumerate(item.parent.nb.cells) if c is item.cell)  # all cells
    _in_kernel(item, f"{CELL} = {index}")


@pytest.hookimpl(trylast=True)  # after pytest's own teardown, which a failure here must not skip
def pytest_runtest_teardown(item, nextitem):
    """After a lesson's last cell: its checks' answers must not show above them."""
    if not _nbval_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    lesson = Path(str(item.parent.fspath))
    cells = nbformat.read(lesson, as_version=4).cells
    problems = seal_problems(cells, recorded(_answers_file(item)), lesson.stem)
    assert not problems, f"{lesson.name} is not sealed:\n" + "\n".join(problems)
