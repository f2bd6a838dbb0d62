"""The pipeline Gantt replays the simulated timeline; the widget survives every control."""

import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.viz.pipeline import on_torus as pipeline_torus
from gspmd_viz.viz.pipeline import widget as view

pipe = gv.pipeline


def _cells(fig):
    """The actions heatmap: time edges, cell midpoints and codes (3*microbatch + kind)."""
    grid = next(t for t in fig.data if t.name == "actions")
    edges = np.asarray(grid.x, dtype=float)
    return edges, (edges[:-1] + edges[1:]) / 2, np.asarray(grid.z, dtype=float)


def test_gantt_draws_every_action_where_the_timeline_put_it():
    tl = pipe.simulate(pipe.schedule("interleaved-1f1b", stages=4, microbatches=8, virtual=2))
    s = tl.schedule
    edges, mid, codes = _cells(view.gantt(tl))
    for i in range(len(tl.start)):
        inside = (mid > tl.start[i]) & (mid < tl.end[i])
        assert inside.any() and (codes[s.stage[i], inside] == 3 * s.microbatch[i] + s.kind[i]).all()
    assert not np.isnan(codes).any()  # the whole run: every cell an action or idle


def test_grey_cells_are_the_bubble_of_the_closed_form():
    tl = pipe.simulate(pipe.schedule("1f1b", stages=4, microbatches=8), 1.0, 2.0)
    edges, _, codes = _cells(view.gantt(tl))
    idle = ((codes == -1) * np.diff(edges)).sum() / (4 * tl.makespan)
    assert idle == pytest.approx(pipe.bubble_fraction("1f1b", 4, 8, 1, 1.0, 2.0, 0.0))


def test_colours_follow_the_microbatch_and_tell_f_b_w_and_the_bubble_apart():
    from gspmd_viz.viz.pipeline import gantt as pg

    tl = pipe.simulate(pipe.schedule("zb-h1", stages=4, microbatches=8), 1.0, 1.0, weight=1.0)
    grid = next(t for t in view.gantt(tl).data if t.name == "actions")
    n = len(grid.colorscale)

    def colour(code):  # the colour the discrete scale gives `code` (zmin -1.5, zmax 3M - 0.5)
        at = (code - grid.zmin) / (grid.zmax - grid.zmin)
        return next(c for lo, c in grid.colorscale[::-1] if lo <= at)

    assert n == 2 * (1 + 3 * 8)
    assert colour(-1) == pg.IDLE
    kinds = [[colour(3 * m + k) for k in range(3)] for m in range(8)]
    assert len({c for row in kinds for c in row} | {pg.IDLE}) == 1 + 3 * 8
    base = pg.microbatch_colours(8)
    for m, (f, b, w) in enumerate(kinds):
        r, g, bl = (int(v) for v in base[m][4:-1].split(","))
        assert f == f"rgb({r},{g},{bl})"
        lightness = [sum(int(v) for v in c[4:-1].split(",")) for c in (f, b, w)]
        assert lightness[0] < lightness[1] < lightness[2]  # B lighter, W lighter still


def test_a_frame_shows_only_what_has_started_and_the_memory_so_far():
    tl = pipe.simulate(pipe.schedule("1f1b", stages=4, microbatches=8))
    times = view.frame_times(tl)
    assert times[0] == 0 and times[-1] == tl.makespan and len(times) <= view.MAX_FRAMES
    fig = view.gantt(tl, until=10.0)
    edges, mid, codes = _cells(fig)
    assert np.isnan(codes[:, mid > 10.0]).all() and not np.isnan(codes[:, mid < 10.0]).any()
    s = tl.schedule
    started = tl.start < 10.0
    shown = {int(c) for c in codes[~np.isnan(codes)] if c >= 0}
    assert shown == set(3 * s.microbatch[started] + s.kind[started])
    memory = [t for t in fig.data if t.type == "scatter" and t.legendgroup == "memory"]
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


def _greyed(w) -> bool:
    """The figure on screen is greyed by the gv-stale style the widget carries."""
    return "gv-stale" in w.plot._dom_classes and any(
        "gv-stale" in c.value for c in w.children if isinstance(c, type(w.message))
    )


def test_one_figure_per_change_and_none_for_a_bad_one():
    w = view.PipelineWidget()
    drawn = []
    w.plot.observe(lambda ch: drawn.append(ch["new"]), "figure")
    changes = (("stages", 8), ("stages", 2), ("microbatches", 32), ("schedule", "gpipe"))
    for control, value in changes:
        drawn.clear()
        getattr(w, control).value = value
        assert len(drawn) == 1 and w.message.value == ""
    w.frame.value = 0
    drawn.clear()
    w.virtual.value = 2  # gpipe has one chunk per stage: greyed by style, nothing redrawn
    assert "one chunk per stage" in w.message.value and drawn == [] and _greyed(w)
    w.schedule.value = "interleaved-1f1b"
    assert len(drawn) == 1 and not _greyed(w) and "V=2" in _title(w)


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
    assert _greyed(w)
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
    assert w.message.value == "" and not _greyed(w)


def test_static_svg_has_one_rectangle_per_action_and_per_stage():
    from gspmd_viz.viz.pipeline.static_gantt import gantt_svg

    tl = pipe.simulate(pipe.schedule("zb-h1", stages=4, microbatches=4), 1.0, 1.0, weight=1.0)
    svg = gantt_svg(tl)
    assert svg.startswith("<svg") and svg.count("<rect") == 4 + len(tl.start)
    assert f"bubble {tl.bubble_fraction:.1%}" in svg


def test_widget_state_syncs_and_frames_stay_greyed_after_bad_input():
    w = view.PipelineWidget()
    w.add_class("gv-test")  # the VBox's own state reaches the browser (a method named _send
    assert "gv-test" in w._dom_classes  # once shadowed ipywidgets' and broke every sync)
    w.ratio.value = "1:x"
    assert "F:B:W" in w.message.value and _greyed(w) and "gv-stale" in w.summary.value
    w.frame.value = 0  # used to redraw the old timeline un-greyed under the error message
    assert _greyed(w) and "time 33 of" in _title(w)
    w.ratio.value = "1:2"
    assert w.message.value == "" and not _greyed(w) and "gv-stale" not in w.summary.value


def test_play_pauses_when_the_last_frame_is_drawn():
    w = view.PipelineWidget()
    w.frame.value = 0
    w.play.playing = True
    w.frame.value = w.frame.max - 1
    assert w.play.playing
    w.frame.value = w.frame.max
    assert not w.play.playing and f"time {w.timeline.makespan:.4g} of" in _title(w)
