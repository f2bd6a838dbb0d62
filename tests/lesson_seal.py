"""The lessons' exercises are sealed: no output or prose above a check shows its answer.

The answers come from the lesson's own run under nbval (notebooks/conftest.py): before the
first cell, `recording_code` wraps `gspmd_viz.exercise.check` in the kernel so that every check
also appends its answer, with the index of the cell running it, to a file; nothing is printed,
so nbval still compares the outputs as committed. After the last cell, `seal_problems` reads
the committed lesson with those answers. For every check:

- the answer's printed forms (its repr; a number also with thousands commas and as bytes,
  `3.0 KiB`; a tuple of ints also as an array type, `f32[2,4]`) appear in no output and no
  prose above the check, nor in the check cell's own output (the answer comes after a guess);
- the prediction it checks is assigned `None` in an earlier cell of its own: not the check
  cell, and not a cell that asserts or checks anything.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from gspmd_viz import sim
from gspmd_viz.core.sharding.collective import KINDS
from gspmd_viz.units import format_bytes

CELL = "__gv_seal_cell"  # the kernel variable holding the index of the cell being run

# Checks whose answer is, by design, one of the question's own printed inputs (which input
# carries through is what is asked), keyed by lesson and prediction name.
ANSWER_IS_AN_INPUT = {
    ("02_propagation", "qa_prediction"): "h takes the annotation of w1 that the question gives",
    ("02_propagation", "qe_prediction"): "a random puzzle: h takes one of the annotations drawn",
    ("08_debugging_sharding", "rows_prediction"): "the question gives the 6 rows; where they end",
}


def recording_code(path: Path) -> str:
    """Kernel code: every later check(...) before a guess appends its answer to `path`."""
    return f"""
import json as _json
import gspmd_viz.exercise as _exercise
{CELL} = -1
_ask = _exercise.check
def _sealed_check(prediction, answer, *args, **kwargs):
    if prediction is None:
        value = answer.item() if getattr(answer, "ndim", None) == 0 else answer  # numpy scalar
        record = {{"cell": {CELL}, "repr": repr(value), "type": type(value).__name__,
                  "value": value}}
        with open({str(path)!r}, "a") as _f:
            _f.write(_json.dumps(record, default=repr) + "\\n")
    return _ask(prediction, answer, *args, **kwargs)
_exercise.check = _sealed_check
"""


def recorded(path: Path) -> dict[int, list[dict]]:
    """Cell index -> the answers its checks recorded (in order)."""
    answers: dict[int, list[dict]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            answers.setdefault(record.pop("cell"), []).append(record)
    return answers


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


UNIT = r"\s?(?:[KMGT]i?B|B|[µunm]?s|%)\b"  # a number with a unit is a size, time or share


def _bounded(text: str, unit_ok: bool = False) -> str:
    """A regex for `text` standing alone: not part of a longer number or word, and (a bare
    number) not a size, time or share printed with its unit."""
    after = r"(?![\w]|[.,]\d)" + ("" if unit_ok else f"(?!{UNIT})")
    return rf"(?<![\w.,]){re.escape(text)}{after}"


def printed_forms(answer: dict) -> list[str]:
    """Regexes for the ways a lesson would print this answer (answer: the marked JSON)."""
    value, kind = answer["value"], answer["type"]
    if kind == "bool":
        return [rf"\b{answer['repr']}\b"]
    if kind in ("int", "float"):
        numbers = {value, int(value)} if float(value).is_integer() else {value}
        texts = {t for n in numbers for t in (str(n), f"{n:,}")}
        return [_bounded(t) for t in texts] + [_bounded(format_bytes(value), unit_ok=True)]
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


def _own_output(cell) -> str:
    lines = _output_text(cell).splitlines()
    return "\n".join(ln for ln in lines if not ln.startswith("predict first"))


def _vocabulary(answer: dict) -> bool:
    words = {*KINDS, *sim.algorithms("all-reduce"), *sim.algorithms("all-to-all")}
    return answer["type"] == "bool" or (answer["type"] == "str" and answer["value"] in words)


def _question_start(cells, index: int) -> int:
    """The prose that asks the question the check at `index` answers: the last markdown cell
    above it."""
    return max((i for i in range(index) if cells[i].cell_type == "markdown"), default=0)


def _leaks(cells, index: int, answer: dict) -> list[str]:
    """Cells at or above the check whose output or prose shows one of the answer's forms. An
    answer from the subject's own vocabulary (True/False, a collective's kind, an algorithm's
    name) is printed all through a lesson: for those only the question's own cells count."""
    first = _question_start(cells, index) if _vocabulary(answer) else 0
    shown = [(i, _output_text(c)) for i, c in enumerate(cells[first:index], start=first)]
    shown = ([] if answer["type"] == "bool" else shown) + [(index, _own_output(cells[index]))]
    problems = []
    for i, text in shown:
        hits = [m.group(0) for form in printed_forms(answer) if (m := re.search(form, text))]
        if hits:
            problems.append(
                f"cell {index}'s answer {answer['repr']} is shown by cell {i}: {hits[0]!r}"
            )
    return problems


def seal_problems(cells, answers: dict[int, list[dict]], lesson: str = "") -> list[str]:
    """Every way the lesson `cells` (as committed) shows a check's answer before it is asked;
    `answers`: cell index -> the answers its checks computed (`recorded`)."""
    problems = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or "check(" not in cell.source:
            continue
        names, answers_here = _check_calls(cell), answers.get(index, [])
        if len(answers_here) != len(names):
            problems.append(
                f"cell {index}: {len(names)} check(s) but {len(answers_here)} ran "
                "before a guess (is a prediction committed filled in?)"
            )
            continue
        for name, answer in zip(names, answers_here, strict=True):
            problems += _prediction_problems(cells, index, name)
            if (lesson, name) not in ANSWER_IS_AN_INPUT:
                problems += _leaks(cells, index, answer)
    return problems
