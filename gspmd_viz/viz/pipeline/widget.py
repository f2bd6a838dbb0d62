"""Pipeline widget: an animated Gantt of a simulated schedule, memory beneath.

The figure is ``gantt.gantt`` (re-exported here); ``PipelineWidget`` is a frame index
(Play + slider) over one recorded timeline plus controls that record a new one. The transfers on
a torus are in ``on_torus``.
"""

from __future__ import annotations

import html
import re

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from gspmd_viz import pipeline as pipe
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, inline_errors, stale_html
from gspmd_viz.viz.common.playback import pause_at_end
from gspmd_viz.viz.common.plotly_view import PlotlyView, plain
from gspmd_viz.viz.pipeline.gantt import MAX_FRAMES, frame_times, gantt, gantt_spec

__all__ = ["MAX_FRAMES", "PipelineWidget", "frame_times", "gantt", "parse_ratio"]


# ----- the widget --------------------------------------------------------------------------------
_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)(?:\s*:\s*(\d+(?:\.\d+)?))?\s*$")


def parse_ratio(text: str) -> tuple[float, float, float]:
    """'1:2' or '1:1:1' -> (F, B, W); plain numbers only, never evaluated."""
    m = _RATIO.match(text or "")
    if not m:
        raise ValueError(f"F:B:W {text!r}: write two or three numbers like 1:2 or 1:1:1")
    f, b, w = (float(g) if g else 0.0 for g in m.groups())
    if f <= 0 or b <= 0:
        raise ValueError("forward and backward times must be positive (e.g. 1:2)")
    return f, b, w


class PipelineWidget(widgets.VBox):
    """Pick a schedule, S, M, V and F:B:W; press Play to watch the stages fill and drain."""

    def __init__(self, schedule="1f1b", stages=4, microbatches=8, virtual=1, ratio="1:2"):
        self.schedule = widgets.Dropdown(options=pipe.SCHEDULES, value=schedule,
                                         description="schedule")  # fmt: skip
        wide = {"description_width": "initial"}
        self.stages = widgets.IntSlider(value=stages, min=2, max=8, description="stages S",
                                        style=wide)  # fmt: skip
        self.microbatches = widgets.IntSlider(value=microbatches, min=1, max=32,
                                              description="microbatches M", style=wide)  # fmt: skip
        self.virtual = widgets.IntSlider(value=virtual, min=1, max=4, description="chunks V",
                                         style=wide)  # fmt: skip
        self.ratio = widgets.Text(value=ratio, description="F:B:W", placeholder="1:2 or 1:1:1")
        self.play = widgets.Play(interval=250, min=0, max=1, description="play")
        self.frame = widgets.IntSlider(min=0, max=1, description="frame")
        widgets.jslink((self.play, "value"), (self.frame, "value"))
        pause_at_end(self.play, self.frame)
        self.message, self.summary, self.plot = widgets.HTML(), widgets.HTML(), PlotlyView()
        self.timeline: pipe.PipelineTimeline | None = None
        self.spec: dict | None = None  # the figure drawn last, as plain dicts
        self.times = np.zeros(1)
        self._rebuilding = False
        rows = [
            widgets.HBox([self.schedule, self.ratio]),
            widgets.HBox([self.stages, self.microbatches, self.virtual]),
            widgets.HBox([self.play, self.frame]),
        ]
        super().__init__([*rows, self.message, self.summary, self.plot, widgets.HTML(STALE_CSS)])
        self.add_class("gv-pipeline")
        for w in (self.schedule, self.stages, self.microbatches, self.virtual, self.ratio):
            w.observe(lambda _: self.rebuild(), "value")
        self.frame.observe(lambda ch: self._rebuilding or self.show(ch["new"]), "value")
        self.rebuild()

    @property
    def figure(self) -> go.Figure | None:
        """The figure drawn last (a plotly Figure, for tests and static views)."""
        return None if self.spec is None else go.Figure(self.spec, _validate=False)

    @inline_errors
    def rebuild(self):
        """Record a new timeline for the controls; a bad combination is shown, never raised.
        One figure per change: moving the frame slider's end must not draw a frame too."""
        f, b, w = parse_ratio(self.ratio.value)
        sched = pipe.schedule(self.schedule.value, stages=self.stages.value,
                              microbatches=self.microbatches.value,
                              virtual=self.virtual.value)  # fmt: skip
        tl = pipe.simulate(sched, forward=f, backward=b, weight=w)
        self.timeline, self.times = tl, frame_times(tl)
        last = len(self.times) - 1
        self._rebuilding = True
        try:  # open on the whole run; Play replays it from the start
            self.play.max = self.frame.max = last
            self.frame.value = last
        finally:
            self._rebuilding = False
        self._draw(last)
        self.message.value = ""
        self.summary.value = f"<pre>{html.escape(self._about(tl), quote=False)}</pre>"
        self.plot.remove_class("gv-stale")

    def _about(self, tl) -> str:
        s = tl.schedule
        try:
            closed = pipe.bubble_fraction(s.name, s.stages, s.microbatches, s.virtual,
                                          tl.forward, tl.backward, tl.weight)  # fmt: skip
            formula = f"closed form {closed:.1%}"
        except ValueError as err:
            formula = f"no closed form here: {err}"
        return f"{tl.summary()}\nsimulated bubble {tl.bubble_fraction:.1%}; {formula}"

    def fail(self, err: Exception):
        """One line; the last good picture and summary greyed (CSS: nothing redrawn). Frames
        stay on it until a good change: the slider must not redraw the old timeline as if it
        matched the controls."""
        self.message.value = error_html(err)
        if self.timeline is not None:  # the summary, too, describes the old timeline
            self.summary.value = stale_html(self.summary.value)
        self.timeline = None
        self.plot.add_class("gv-stale")

    @inline_errors
    def show(self, frame: int):
        if self.timeline is not None:
            self._draw(frame)

    def _draw(self, frame: int):
        frame = min(max(frame, 0), len(self.times) - 1)
        self.spec = gantt_spec(self.timeline, until=float(self.times[frame]))
        self.plot.show(plain(self.spec))
