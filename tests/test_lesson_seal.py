"""The seal's own logic on small hand-made lessons (the lessons themselves are checked as
nbval runs them: notebooks/conftest.py, tests/lesson_seal.py)."""

import nbformat
from nbclient import NotebookClient

from tests.lesson_seal import recorded, recording_code, seal_problems

md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
ANSWER = {"repr": "('x', 'y', None, None)", "type": "tuple", "value": ["x", "y", None, None]}


def _stream(cell, text: str):
    cell.outputs = [nbformat.v4.new_output("stream", text=text)]
    return cell


def test_the_seal_finds_a_leak_and_a_shared_prediction():
    shown = _stream(code("print(spec)"), "spec: ('x', 'y', None, None)\n")
    cells = [md("Which spec?"), shown, code("p = None\nassert True"), code("check(p, answer)")]
    problems = seal_problems(cells, {3: [ANSWER]})
    assert any("shown by cell 1" in p for p in problems), problems
    assert any("shares a cell with an assert" in p for p in problems), problems


def test_a_sealed_check_passes_and_a_missing_answer_is_named():
    cells = [md("Which spec?"), code("p = None"), code("check(p, answer)")]
    assert seal_problems(cells, {2: [ANSWER]}) == []
    assert "1 check(s) but 0 ran" in seal_problems(cells, {})[0]


def test_the_kernel_records_each_answer_with_its_cell(tmp_path):
    path = tmp_path / "answers.jsonl"
    cells = [
        code("from gspmd_viz.exercise import check"),
        code("p = None"),
        code("check(p, 6 * 7, 'why')"),
    ]
    nb = nbformat.v4.new_notebook(cells=[code(recording_code(path)), *cells])
    for i, cell in enumerate(nb.cells[1:]):  # as notebooks/conftest.py does before each cell
        cell.source = f"__gv_seal_cell = {i}\n" + cell.source
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert recorded(path) == {2: [{"repr": "42", "type": "int", "value": 42}]}
    assert "predict first" in nb.cells[3].outputs[0]["text"]  # the check itself is unchanged
