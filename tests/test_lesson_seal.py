"""The lessons' exercises are sealed (shared/DESIGN.md section 5).

Each lesson is run as committed, with `gspmd_viz.exercise.check` wrapped so that every check
also prints its answer on a marked line. Then, for every check:

- the answer's printed forms (its repr; a number also with thousands commas and as bytes,
  `3.0 KiB`; a tuple of ints also as an array type, `f32[2,4]`) appear in no output and no
  prose above the check, nor in the check cell's own output (the answer comes after a guess);
- the prediction it checks is assigned `None` in an earlier cell of its own: not the check
  cell, and not a cell that asserts or checks anything.

Lessons 05 and 07 are being sealed under their own issues: they are listed as strict xfails, so
this test says so until they pass, and fails when they do (then move them to LESSONS).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gspmd_viz.units import format_bytes

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
MARK = "SEALED-ANSWER "
LESSONS = [
    "01_sharding",
    "02_propagation",
    "03_partitioning",
    "03b_partitioning_models",
    "03c_partitioner_choices",
    "04_halo_exchange",
    "06_pipelines",
]
PENDING = {
    "05_torus_allreduce": "issue 48: exercises 1-4, 6 and 7 show their answers above the check",
    "07_training_at_scale": "issue 49: exercises 1 and 2 are answered by cells 6 and 10",
}

# Checks whose answer is, by design, one of the question's own printed inputs (which input
# carries through is what is asked), keyed by lesson and prediction name.
ANSWER_IS_AN_INPUT = {
    ("02_propagation", "qa_prediction"): "h takes the annotation of w1 that the question gives",
    ("02_propagation", "qe_prediction"): "a random puzzle: h takes one of the annotations drawn",
}

# Runs first in the kernel: every check also prints its answer, as JSON, on a marked line.
WRAP_CHECK = f"""
import json as _json
import gspmd_viz.exercise as _exercise
_ask = _exercise.check
def _sealed_check(prediction, answer, *args, **kwargs):
    if prediction is None:
        value = answer.item() if getattr(answer, "ndim", None) == 0 else answer  # numpy scalar
        print({MARK!r} + _json.dumps({{"repr": repr(value), "type": type(value).__name__,
                                      "value": value}}, default=repr))
    return _ask(prediction, answer, *args, **kwargs)
_exercise.check = _sealed_check
"""


def _run(lesson: str) -> list:
    nb = nbformat.read(NOTEBOOKS / f"{lesson}.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(WRAP_CHECK))
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    return nb.cells[1:]


def _output_text(cell) -> str:
    if cell.cell_type == "markdown":
        return cell.source
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        for mime in ("text/plain", "text/markdown"):
            parts.append(out.get("data", {}).get(mime, ""))
    return "\n".join(parts)


def _bounded(text: str) -> str:
    """A regex for `text` standing alone: not part of a longer number or word."""
    return rf"(?<![\w.,]){re.escape(text)}(?![\w]|[.,]\d)"


def printed_forms(answer: dict) -> list[str]:
    """Regexes for the ways a lesson would print this answer (answer: the marked JSON)."""
    value, kind = answer["value"], answer["type"]
    if kind == "bool":
        return [rf"\b{answer['repr']}\b"]
    if kind in ("int", "float"):
        numbers = {value, int(value)} if float(value).is_integer() else {value}
        texts = {t for n in numbers for t in (str(n), f"{n:,}")} | {format_bytes(value)}
        return [_bounded(t) for t in texts]
    forms = [re.escape(answer["repr"])]
    if kind == "str":
        forms.append(re.escape(value))
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        forms.append(r"\b[a-z]+\d+\[" + r", ?".join(map(str, value)) + r"\]")  # f32[2,4]
    return forms


def _check_calls(cell) -> list[str]:
    """The prediction names this cell's `check(...)` calls check."""
    tree = ast.parse(cell.source)
    return [
        node.args[0].id if isinstance(node.args[0], ast.Name) else ast.unparse(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check"
    ]


def _sets_to_none(source: str, name: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == name for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
        for node in tree.body
    )


def _prediction_problems(cells, index: int, name: str) -> list[str]:
    """The prediction must be set to None in an earlier cell that checks nothing."""
    where = [
        i
        for i, c in enumerate(cells[:index])
        if c.cell_type == "code" and _sets_to_none(c.source, name)
    ]
    if _sets_to_none(cells[index].source, name):
        return [f"cell {index}: {name} = None sits in the check cell itself"]
    if not where:
        return [f"cell {index}: no earlier cell sets {name} = None"]
    source = cells[where[-1]].source
    if "assert" in source or "check(" in source:
        return [f"cell {where[-1]}: {name} = None shares a cell with an assert or a check"]
    return []


def _answers(cell) -> list[dict]:
    lines = _output_text(cell).splitlines()
    return [json.loads(line[len(MARK) :]) for line in lines if line.startswith(MARK)]


def _own_output(cell) -> str:
    lines = _output_text(cell).splitlines()
    return "\n".join(ln for ln in lines if not ln.startswith((MARK, "predict first")))


def _leaks(cells, index: int, answer: dict) -> list[str]:
    """Cells at or above the check whose output or prose shows one of the answer's forms."""
    shown = [(index, _own_output(cells[index]))]
    if answer["type"] != "bool":  # True / False are everywhere: look in the check cell only
        shown = [(i, _output_text(c)) for i, c in enumerate(cells[:index])] + shown
    problems = []
    for i, text in shown:
        hits = [m.group(0) for form in printed_forms(answer) if (m := re.search(form, text))]
        if hits:
            problems.append(
                f"cell {index}'s answer {answer['repr']} is shown by cell {i}: {hits[0]!r}"
            )
    return problems


def seal_problems(cells, lesson: str = "") -> list[str]:
    problems = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or "check(" not in cell.source:
            continue
        names, answers = _check_calls(cell), _answers(cell)
        if len(answers) != len(names):
            problems.append(
                f"cell {index}: {len(names)} check(s) but {len(answers)} ran "
                "before a guess (is a prediction committed filled in?)"
            )
            continue
        for name, answer in zip(names, answers, strict=True):
            problems += _prediction_problems(cells, index, name)
            if (lesson, name) not in ANSWER_IS_AN_INPUT:
                problems += _leaks(cells, index, answer)
    return problems


def _lessons():
    yield from LESSONS
    for lesson, why in PENDING.items():
        yield pytest.param(lesson, marks=pytest.mark.xfail(strict=True, reason=why))


@pytest.mark.parametrize("lesson", list(_lessons()))
def test_no_answer_is_shown_before_its_check(lesson):
    problems = seal_problems(_run(lesson), lesson)
    assert not problems, "\n".join(problems)


def test_the_seal_finds_a_leak_and_a_shared_prediction():
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell
    shown = code("print(spec)")
    shown.outputs = [nbformat.v4.new_output("stream", text="spec: ('x', 'y', None, None)\n")]
    ask = code("p = None\nassert True")
    checked = code("check(p, answer)")
    answer = {"repr": "('x', 'y', None, None)", "type": "tuple", "value": ["x", "y", None, None]}
    checked.outputs = [nbformat.v4.new_output("stream", text=MARK + json.dumps(answer) + "\n")]
    problems = seal_problems([md("Which spec?"), shown, ask, checked])
    assert any("shown by cell 1" in p for p in problems), problems
    assert any("shares a cell with an assert" in p for p in problems), problems
    sealed = code("p = None")
    assert seal_problems([md("Which spec?"), sealed, checked]) == []
