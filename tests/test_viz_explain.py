"""The explain widget: every control through its options (the mesh, each annotation, good and
bad text, every source line clicked); what it shows is the report's own (gv.explain is the
oracle), errors stay one line inline, and the widget keeps working after them."""

import json

import jax
import jax.numpy as jnp
import pytest

import gspmd_viz as gv
from gspmd_viz.viz.explain.widget import ExplainWidget, parse_spec


def make(mesh, specs):
    def mlp(x, w1, w2):
        x = gv.mesh_split(x, mesh, specs["x"])
        w1 = gv.mesh_split(w1, mesh, specs["w1"])
        h = jax.nn.relu(x @ w1)
        w2 = gv.mesh_split(w2, mesh, specs["w2"])
        return h @ w2

    return mlp


ARGS = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
SPECS = {"x": "x, None", "w1": "None, y", "w2": "y, None"}


def _widget():
    return ExplainWidget(make, ARGS, mesh="x=2, y=4", specs=SPECS)


def _same_as_explain(w, mesh_text, specs):
    mesh = gv.Mesh(dict((k, int(v)) for k, v in (p.split("=") for p in mesh_text.split(", "))))
    want = gv.explain(make(mesh, specs), *ARGS, mesh=mesh)
    assert w.message.value == ""
    assert w.report.xla_bytes == want.xla_bytes
    assert w.report.line_bytes() == want.line_bytes()


def test_parse_spec_reads_every_form_and_refuses_bad_text():
    assert parse_spec("x, None") == ("x", None)
    assert parse_spec("(x y), -") == (("x", "y"), None)
    assert parse_spec("(x,y), None, x") == (("x", "y"), None, "x")
    assert parse_spec("") == ()
    with pytest.raises(ValueError, match="cannot read mesh axis"):
        parse_spec("x; import os")


def test_every_annotation_and_the_mesh_redraw_the_list():
    w = _widget()
    _same_as_explain(w, "x=2, y=4", {k: parse_spec(v) for k, v in SPECS.items()})
    for name, other in (("x", "None, y"), ("w1", "x, None"), ("w2", "None, None")):
        w.spec_texts[name].value = other
        specs = {k: parse_spec(t.value) for k, t in w.spec_texts.items()}
        _same_as_explain(w, "x=2, y=4", specs)
    w.mesh_text.value = "x=4, y=2"
    _same_as_explain(w, "x=4, y=2", {k: parse_spec(t.value) for k, t in w.spec_texts.items()})


def test_bad_text_is_one_inline_line_and_the_widget_recovers():
    w = _widget()
    good = w.report
    for control, bad in (
        (w.mesh_text, "x=2, q=4"),
        (w.mesh_text, "x=="),
        (w.spec_texts["x"], "x, ?"),
    ):
        before = control.value
        control.value = bad
        assert "gv-error" in w.message.value and "\n" not in w.message.value
        assert "Traceback" not in w.message.value
        assert w.report is good  # the last good report stays, greyed
        control.value = before
        assert w.message.value == ""


def test_clicking_each_line_shows_its_collectives_and_reason():
    w = _widget()
    report = w.report
    for k, button in enumerate(w.lines.children):
        line = report.code.first + k
        button.click()
        assert w.picked == line
        assert button.button_style == "warning"
        for e in report.by_line().get(line, []):
            assert e.collective.kind in w.detail.value
        if line not in report.line_bytes():
            assert "no collective" in w.detail.value
    hot = [b for b in w.lines.children if b.button_style == "info"]
    assert len(hot) == len(report.line_bytes()) - 1  # all highlighted lines but the picked one


def test_static_figure_and_state_are_small():
    w = _widget()
    svg = w.static_figure()
    assert svg.startswith("<svg") and svg.count("<rect") == 1 + len(w.report.line_bytes())
    state = [b.get_state() for b in (w.message, w.summary, w.detail, *w.lines.children)]
    assert len(json.dumps(state)) < 500_000
