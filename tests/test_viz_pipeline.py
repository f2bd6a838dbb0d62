"""The pipeline Gantt replays the simulated timeline; the widget survives every control."""

import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.viz import pipeline as view
from gspmd_viz.viz import pipeline_torus

pipe = gv.pipeline


def _bars(fig):
    return next(t for t in fig.data if t.name == "actions")


def test_gantt_draws_every_action_where_the_timeline_put_it():
    tl = pipe.simulate(pipe.schedule("interleaved-1f1b", stages=4, microbatches=8, virtual=2))
    bars = _bars(view.gantt(tl))
    assert len(bars.x) == len(tl.start)
    assert np.array_equal(bars.base, tl.start) and np.allclose(bars.base + bars.x, tl.end)
    assert np.array_equal(bars.marker.color, tl.schedule.microbatch)
    assert {"", "/"} == set(bars.marker.pattern.shape)


def test_a_frame_shows_only_what_has_started_and_the_memory_so_far():
    tl = pipe.simulate(pipe.schedule("1f1b", stages=4, microbatches=8))
    times = view.frame_times(tl)
    assert times[0] == 0 and times[-1] == tl.makespan and len(times) <= view.MAX_FRAMES
    fig = view.gantt(tl, until=10.0)
    bars = _bars(fig)
    assert len(bars.x) == int((tl.start < 10.0).sum())
    assert max(bars.base + bars.x) <= 10.0
    memory = [t for t in fig.data if t.type == "scatter"]
    assert len(memory) == 4 and all(max(t.x) == 10.0 for t in memory)


def test_torus_transfers_draw_each_stage_pair_route():
    sched = pipe.schedule("circular", stages=8, microbatches=8, virtual=2)
    placed = pipe.place(8, gv.sim.torus((4, 4)))
    fig = pipeline_torus.torus_transfers(placed, sched, 2**20)
    routes = [t for t in fig.data if t.name in ("activations", "gradients")]
    assert len(routes) == len(placed.routes(sched)) == 16  # ring both ways, incl. 7 -> 0
    assert "1.0 MiB" in fig.layout.title.text


def test_parse_ratio():
    assert view.parse_ratio("1:2") == (1.0, 2.0, 0.0)
    assert view.parse_ratio(" 1 : 1.5 : 0.5 ") == (1.0, 1.5, 0.5)
    for bad in ("", "1", "a:b", "__import__('os'):1", "0:1", "1:2:3:4"):
        with pytest.raises(ValueError):
            view.parse_ratio(bad)


def _title(w):
    return w.figure.layout.title.text


def test_widget_every_control_every_option_both_ends():
    w = view.PipelineWidget()
    assert w.message.value == "" and "1f1b, S=4, M=8" in _title(w)
    for name in pipe.SCHEDULES:
        w.virtual.value = 1
        w.schedule.value = name
        assert w.message.value == "" and _title(w).startswith(name)
        assert "closed form" in w.summary.value
        for slider in (w.stages, w.microbatches, w.virtual):
            for end in (slider.max, slider.min):
                slider.value = end
                ok = w.message.value == ""
                drawn = w.timeline is not None and w.timeline.schedule.name == name
                assert ok == (drawn and _title(w).startswith(name)
                              and f"S={w.stages.value}, M={w.microbatches.value}"
                              in _title(w))  # fmt: skip
            w.stages.value, w.microbatches.value, w.virtual.value = 4, 8, 1
        assert w.message.value == ""
    w.frame.value = w.frame.min
    assert "time 0 of" in _title(w)
    w.frame.value = w.frame.max
    assert f"time {w.timeline.makespan:.4g} of" in _title(w)


def test_widget_bad_combinations_show_inline_and_recover():
    w = view.PipelineWidget(schedule="gpipe")
    w.virtual.value = 2
    assert "one chunk per stage" in w.message.value
    assert "stale" in _title(w) and all(t.opacity == 0.25 for t in w.figure.data)
    w.schedule.value = "interleaved-1f1b"
    assert w.message.value == "" and "V=2" in _title(w)
    w.microbatches.value = 6
    assert "multiple of 4" in w.message.value
    w.schedule.value = "circular"
    assert w.message.value == "" and "M=6, V=2" in _title(w)
    w.microbatches.value = 2
    assert "microbatches &gt;= stages" in w.message.value
    w.microbatches.value = 8
    w.ratio.value = "one:two"
    assert "F:B:W" in w.message.value
    w.ratio.value = "__import__('os').system('true')"  # never evaluated
    assert "numbers" in w.message.value
    w.ratio.value = "1:1:3"  # W > F: the simulator answers, the closed form says why not
    assert w.message.value == ""
    w.schedule.value = "zb-h1"
    w.virtual.value = 1
    assert "no closed form here" in w.summary.value and w.message.value == ""
    w.microbatches.value = 2
    assert "microbatches &gt;= 4" in w.message.value
    w.microbatches.value = 8
    assert w.message.value == "" and all(t.opacity is None for t in w.figure.data)


def test_static_svg_has_one_rectangle_per_action_and_per_stage():
    from gspmd_viz.viz.pipeline_static import gantt_svg

    tl = pipe.simulate(pipe.schedule("zb-h1", stages=4, microbatches=4), 1.0, 1.0, weight=1.0)
    svg = gantt_svg(tl)
    assert svg.startswith("<svg") and svg.count("<rect") == 4 + len(tl.start)
    assert f"bubble {tl.bubble_fraction:.1%}" in svg


def test_widget_state_syncs_and_frames_stay_greyed_after_bad_input():
    w = view.PipelineWidget()
    w.add_class("gv-test")  # the VBox's own state reaches the browser (a method named _send
    assert "gv-test" in w._dom_classes  # once shadowed ipywidgets' and broke every sync)
    w.ratio.value = "1:x"
    assert "F:B:W" in w.message.value and "stale" in _title(w) and "gv-stale" in w.summary.value
    w.frame.value = 0  # used to redraw the old timeline un-greyed under the error message
    assert "stale" in _title(w) and all(t.opacity == 0.25 for t in w.figure.data)
    w.ratio.value = "1:2"
    assert w.message.value == "" and "stale" not in _title(w) and "gv-stale" not in w.summary.value
