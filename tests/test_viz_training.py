"""The training widget, driven kernel-side through every control and bad text."""

import itertools

import pytest

from gspmd_viz.sim import training as st
from gspmd_viz.viz.common.inline import STALE_CSS
from gspmd_viz.viz.training import widget as vt


@pytest.fixture(scope="module")
def widget():
    return vt.TrainingWidget()


def test_every_model_pod_and_strategy_draws_or_explains(widget):
    for m, p, s in itertools.product(vt.MODELS, vt.PODS, st.STRATEGIES):
        widget.model.value, widget.pod.value, widget.strategy.value = m, p, s
        widget.split.value = "4" if "4x4x4" in p else "8"
        widget.batch.value, widget.microbatches.value = "4096", "4"
        assert widget.message.value == "", (m, p, s, widget.message.value)
        assert "MFU" in widget.text.value and widget.figure is not None
    widget.remat.value = not widget.remat.value
    assert widget.message.value == ""


def test_bad_text_shows_a_message_and_the_widget_keeps_working(widget):
    # (Layout has no opacity trait: the plot's layout.opacity once faded nothing in a browser)
    assert any(getattr(c, "value", None) == STALE_CSS for c in widget.children)
    widget.pod.value, widget.strategy.value = next(iter(vt.PODS)), "2d"
    for control, bad in (
        (widget.batch, "lots"),
        (widget.batch, "0"),
        (widget.split, "3"),
        (widget.microbatches, "-1"),
        (widget.batch, "1000"),
    ):
        good = control.value
        control.value = bad
        assert "gv-error" in widget.message.value, bad
        assert "gv-stale" in widget.plot._dom_classes  # greyed by STALE_CSS, among its children
        assert "gv-stale" in widget.text.value  # the summary of the last good step, greyed too
        control.value = good
        assert widget.message.value == "" and "gv-stale" not in widget.plot._dom_classes
        assert "gv-stale" not in widget.text.value


def test_widget_numbers_are_the_sim_models(widget):
    widget.model.value, widget.strategy.value, widget.batch.value = "1B", "dp+wus", "2048"
    mem, times, chip, lay = vt.evaluate(
        "1B", widget.pod.value, "dp+wus", 2048, 16, 16, widget.remat.value
    )
    assert f"MFU {times['mfu']:.1%}" in widget.text.value
    assert lay.data == 1024 and mem == st.memory(vt.model("1B"), lay, 2048)
    assert "<svg" in widget.static_svg()


def test_the_title_names_every_control_it_was_drawn_for():
    w = vt.TrainingWidget(model_name="6B", strategy="pipeline", batch="2048", split="8",
                          microbatches="4", remat=False)  # fmt: skip
    title = w.figure.layout.title.text
    assert title.startswith(f"6B model, batch 2048, {vt.DEFAULT_POD}<br>pipeline: data 128 x")
    assert "stages 8 x 4 microbatches; MFU" in title
    w.remat.value = True
    assert "microbatches, remat; MFU" in w.figure.layout.title.text


def test_static_bar_has_the_live_figure_colours(widget):
    live = {t.name: t.marker.color for t in widget.figure.data if t.xaxis == "x2"}
    assert live == vt.TIME_COLOURS
    for name, colour in live.items():
        assert f"fill='{colour}'><title>{name}</title>" in widget.static_svg()
