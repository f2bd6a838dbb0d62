"""Every widget without its own test of it: an exception nobody foresaw (not a ValueError from
bad input) shows as one line naming its type, the figure greys, and the widget recovers."""

import pytest

from gspmd_viz.viz.common import inline
from gspmd_viz.viz.pipeline import widget as pipeline_view
from gspmd_viz.viz.training import widget as training_view


def _boom(*args, **kwargs):
    raise RuntimeError("boom\nsecond line")


def test_error_line_names_the_type_unless_bad_input():
    assert inline.error_line(ValueError("bad size\nmore")) == "bad size"
    assert inline.error_line(RuntimeError("boom")) == "RuntimeError: boom"
    assert inline.error_line(KeyError()) == "KeyError"
    assert inline.error_line(ValueError()) == "ValueError"
    assert inline.error_line("") == "error"
    assert "&lt;b&gt;" in inline.error_html(ValueError("<b>"))  # escaped, never markup


@pytest.mark.parametrize(
    "make, module, target, poke",
    [
        (
            pipeline_view.PipelineWidget,
            pipeline_view.pipe,
            "simulate",
            lambda w, v: setattr(w.stages, "value", v),
        ),
        (
            training_view.TrainingWidget,
            training_view,
            "evaluate",
            lambda w, v: setattr(w.batch, "value", str(512 * v)),
        ),
    ],  # fmt: skip
)
def test_an_unforeseen_error_is_inline_and_the_widget_recovers(
    make, module, target, poke, monkeypatch
):
    w = make()
    assert w.message.value == ""
    monkeypatch.setattr(module, target, _boom)
    poke(w, 8)
    assert "RuntimeError: boom" in w.message.value and "second line" not in w.message.value
    monkeypatch.undo()
    poke(w, 4)
    assert w.message.value == ""
