"""Pipeline views: an animated Gantt of a simulated schedule, memory beneath, transfers on a torus.

``gantt(tl, until)`` draws every action that has started by time ``until`` (bars coloured by
microbatch, B hatched, W crossed, idle stage-time shaded grey) over the per-stage activation
memory. ``PipelineWidget`` is a frame index (Play + slider) over one recorded timeline plus
controls that record a new one. The transfers on a torus are in ``pipeline_torus``.
"""

from __future__ import annotations

import html
import json
import re

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gspmd_viz import pipeline as pipe
from gspmd_viz.viz.inline import error_html, inline_errors, stale_html

_PATTERN = {"F": "", "B": "/", "W": "x"}
_MEMORY_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                   "#7f7f7f"]  # fmt: skip
MAX_FRAMES = 120


def frame_times(tl: pipe.PipelineTimeline) -> np.ndarray:
    """Times the animation stops at: each distinct action start, then the end (at most 120)."""
    times = np.unique(np.append(tl.start, tl.makespan))
    if len(times) > MAX_FRAMES:
        times = times[np.linspace(0, len(times) - 1, MAX_FRAMES).round().astype(int)]
    return times


def _bars(tl, until: float) -> go.Bar:
    s = tl.schedule
    shown = tl.start < until
    kinds = [s.kind_names[k] for k in s.kind[shown]]
    mb, chunk = s.microbatch[shown], s.chunk[shown]
    tail = [f".{c}" if s.virtual > 1 else "" for c in chunk]
    label = [f"{k}{m}{t}" for k, m, t in zip(kinds, mb, tail, strict=True)]
    roomy = len(s.kind) <= 24 * s.stages  # labels only while bars are wide enough to read
    return go.Bar(
        orientation="h",
        y=s.stage[shown],
        base=tl.start[shown],
        x=np.minimum(tl.end[shown], until) - tl.start[shown],  # a running action grows
        text=label if roomy else None,
        textposition="inside",
        insidetextanchor="middle",
        textangle=0,
        hovertext=[f"stage {st}: {lb}" for st, lb in zip(s.stage[shown], label, strict=True)],
        hoverinfo="text",
        marker={
            "color": mb,
            "cmin": 0,
            "cmax": max(s.microbatches - 1, 1),
            "colorscale": "Turbo",
            "pattern": {
                "shape": [_PATTERN[k] for k in kinds],
                "fillmode": "overlay",
                "fgcolor": "white",
                "size": 6,
            },  # fmt: skip
            "line": {"width": 0.5, "color": "white"},
            "colorbar": {"title": {"text": "microbatch"}, "len": 0.6, "y": 0.72},
        },
        name="actions",
        showlegend=False,
    )


def _kind_legend() -> list[go.Bar]:
    """Legend-only entries for the three patterns."""
    names = {"F": "F forward", "B": "B backward", "W": "W weight gradient"}
    return [go.Bar(orientation="h", x=[None], y=[None], name=names[k],
                   marker={"color": "#888", "pattern": {"shape": p, "fgcolor": "white"}})
            for k, p in _PATTERN.items()]  # fmt: skip


def _memory_traces(tl, until: float) -> list[go.Scatter]:
    out = []
    for i in range(tl.schedule.stages):
        t, held = tl.memory(i)
        keep = t <= until
        colour = _MEMORY_COLOURS[i % len(_MEMORY_COLOURS)]
        out.append(go.Scatter(x=np.append(t[keep], until), y=np.append(held[keep], held[keep][-1]),
                              mode="lines", line={"shape": "hv", "color": colour, "width": 1.5},
                              name=f"stage {i}", legendgroup="memory"))  # fmt: skip
    return out


def gantt(tl: pipe.PipelineTimeline, until: float | None = None) -> go.Figure:
    """Stage x time Gantt of the actions started by `until` (default: all), memory beneath."""
    s, end = tl.schedule, tl.makespan
    until = end if until is None else float(until)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.68, 0.32],
                        vertical_spacing=0.06)  # fmt: skip
    idle = go.Bar(orientation="h", y=np.arange(s.stages), base=np.zeros(s.stages),
                  x=np.full(s.stages, end), marker={"color": "#e6e6e6"}, hoverinfo="skip",
                  name="idle (bubble)")  # fmt: skip
    fig.add_trace(idle, row=1, col=1)
    fig.add_trace(_bars(tl, until), row=1, col=1)
    for trace in _kind_legend()[: 3 if s.has_weight_actions else 2]:
        fig.add_trace(trace, row=1, col=1)
    for trace in _memory_traces(tl, until):
        fig.add_trace(trace, row=2, col=1)
    if until < end:
        fig.add_vline(x=until, line={"color": "black", "width": 1, "dash": "dot"})
    peak = max(tl.peak_activations, default=0.0)
    fig.update_yaxes(autorange="reversed", tickvals=list(range(s.stages)),
                     ticktext=[f"stage {i}" for i in range(s.stages)], row=1, col=1)  # fmt: skip
    fig.update_yaxes(title="activations<br>(microbatches)", range=[0, peak * 1.1 + 0.1],
                     row=2, col=1)  # fmt: skip
    fig.update_xaxes(range=[0, end])
    fig.update_xaxes(title="time (one microbatch's forward through a stage = F)", row=2, col=1)
    fig.update_layout(
        barmode="overlay",
        bargap=0.15,
        title={"text": _title(tl, until), "font": {"size": 13}},
        height=560,
        width=900,
        margin={"l": 10, "r": 10, "t": 70, "b": 40},
        plot_bgcolor="white",
        legend={"x": 1.1, "y": 0.25},
    )
    return fig


def _title(tl, until: float) -> str:
    s = tl.schedule
    v = f", V={s.virtual}" if s.virtual > 1 else ""
    ratio = f"F:B:W = {tl.forward:g}:{tl.backward:g}:{tl.weight:g}"
    return (
        f"{s.name}, S={s.stages}, M={s.microbatches}{v}, {ratio}<br>time {until:.4g} of "
        f"{tl.makespan:.4g} · bubble {tl.bubble_fraction:.1%} (grey) · peak activations "
        f"{max(tl.peak_activations):g} microbatches"
    )


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
        self.message, self.summary, self.plot = widgets.HTML(), widgets.HTML(), widgets.Output()
        self.timeline: pipe.PipelineTimeline | None = None
        self.figure: go.Figure | None = None
        self.times = np.zeros(1)
        rows = [
            widgets.HBox([self.schedule, self.ratio]),
            widgets.HBox([self.stages, self.microbatches, self.virtual]),
            widgets.HBox([self.play, self.frame]),
        ]
        super().__init__([*rows, self.message, self.summary, self.plot])
        self.add_class("gv-pipeline")
        for w in (self.schedule, self.stages, self.microbatches, self.virtual, self.ratio):
            w.observe(lambda _: self.rebuild(), "value")
        self.frame.observe(lambda ch: self.show(ch["new"]), "value")
        self.rebuild()

    @inline_errors
    def rebuild(self):
        """Record a new timeline for the controls; a bad combination is shown, never raised."""
        f, b, w = parse_ratio(self.ratio.value)
        sched = pipe.schedule(self.schedule.value, stages=self.stages.value,
                              microbatches=self.microbatches.value,
                              virtual=self.virtual.value)  # fmt: skip
        tl = pipe.simulate(sched, forward=f, backward=b, weight=w)
        self.message.value = ""
        self.timeline, self.times = tl, frame_times(tl)
        self.summary.value = f"<pre>{html.escape(self._about(tl), quote=False)}</pre>"
        last = len(self.times) - 1
        self.play.max = self.frame.max = last
        if self.frame.value == last:
            self.show(last)
        self.frame.value = last  # open on the whole run; Play replays it from the start

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
        """One line; the last good picture greyed. Frames stay on it until a good change: the
        slider must not redraw the old timeline as if it matched the controls."""
        self.message.value = error_html(err)
        if self.timeline is not None:  # the summary, too, describes the old timeline
            self.summary.value = stale_html(self.summary.value)
        self.timeline = None
        if self.figure is not None:  # grey out the last good picture: it no longer applies
            self.figure.update_traces(opacity=0.25)
            self.figure.update_layout(title_text="(stale: fix the input above)")
            self._draw(self.figure)

    @inline_errors
    def show(self, frame: int):
        if self.timeline is None:
            return
        frame = min(max(frame, 0), len(self.times) - 1)
        self.figure = gantt(self.timeline, until=float(self.times[frame]))
        self._draw(self.figure)

    def _draw(self, fig: go.Figure):
        # plotly's mimetype as Output widget state: a live kernel, nbconvert and nbval agree.
        bundle = {"application/vnd.plotly.v1+json": {**json.loads(fig.to_json()), "config": {}}}
        self.plot.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
