"""The training widget, driven kernel-side through every control and bad text."""

import itertools

import pytest

from gspmd_viz.sim import training as st
from gspmd_viz.viz import training as vt


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
        assert widget.plot.layout.opacity == "0.4"
        control.value = good
        assert widget.message.value == "" and widget.plot.layout.opacity == "1"


def test_widget_numbers_are_the_sim_models(widget):
    widget.model.value, widget.strategy.value, widget.batch.value = "1B", "dp+wus", "2048"
    mem, times, chip, lay = vt.evaluate(
        "1B", widget.pod.value, "dp+wus", 2048, 16, 16, widget.remat.value
    )
    assert f"MFU {times['mfu']:.1%}" in widget.text.value
    assert lay.data == 1024 and mem == st.memory(vt.model("1B"), lay, 2048)
    assert "<svg" in widget.static_svg()
