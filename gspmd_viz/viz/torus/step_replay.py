"""Replay a partitioned step's collectives on a pod: the torus view, one collective after another.

``step_records(spmd)`` turns the partitioner's ledger into the plain records ``gv.sim``
simulates (sim imports nothing from core); ``simulate(spmd, topo)`` places the program's mesh
on the pod and simulates every collective link by link (``sim.step_timeline``); ``StepReplay``
is a frame index (Play + slider) over that record, with a menu that jumps to a collective and a
table of every collective's time. Nothing here re-simulates.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from gspmd_viz import sim
from gspmd_viz.sim.steps.step_timeline import StepTimeline, simulate_step
from gspmd_viz.units import format_time
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, inline_errors
from gspmd_viz.viz.common.plotly_view import PlotlyView, plain
from gspmd_viz.viz.torus.frames import frames
from gspmd_viz.viz.torus.links import LINK_VIEW_CHIPS, svg
from gspmd_viz.viz.torus.widget import figure


def step_records(spmd) -> list[tuple]:
    """(kind, mesh axes, S bytes per device, runs) of every collective in a partitioned program;
    S as in the wire formulas (an all-gather's S is its gathered result)."""
    out = []
    for c in spmd.collectives:
        s = c.operand_bytes * (c.group_size if c.kind == "all-gather" else 1)
        out.append((c.kind, tuple(c.axes), float(s), int(c.trips)))
    return out


def simulate(spmd, topo: sim.Topology, chip="tpu-v3") -> StepTimeline:
    """The program's collectives on `topo`, its mesh placed by ``sim.placement.place``."""
    return simulate_step(step_records(spmd), dict(spmd.mesh.shape), topo, chip)


def table_html(tl: StepTimeline, current: int | None = None) -> str:
    """Every collective with its placement and time on the pod; `current` in bold."""
    head = "<tr><th>#</th><th>collective</th><th>runs</th><th>group</th><th>all groups at once</th>"
    head += "<th>one group alone</th></tr>"
    rows = []
    for c in tl.collectives:
        style = " style='font-weight:bold;background:#eef'" if c.index == current else ""
        group = f"{c.groups} x {'x'.join(map(str, c.sub.shape))}"
        cells = (c.index + 1, c.label, c.count, group, format_time(c.time_s),
                 format_time(c.closed_form_s))  # fmt: skip
        rows.append(f"<tr{style}>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in cells))
    total = f"<p>communication per step: {format_time(tl.time_s)}</p>"
    table = f"<table class='gv-step-table'>{head}{''.join(rows)}</table>"
    return f"{total}<div style='max-height:260px;overflow-y:auto'>{table}</div>"


class StepReplay(widgets.VBox):
    """Play every collective of a step on the pod, link by link; jump to one from the menu."""

    def __init__(self, tl: StepTimeline):
        if not tl.steps:
            raise ValueError("this step moves no bytes on the pod: nothing to replay")
        self.timeline, self.frames, self.figure = tl, frames(tl), None
        moving = [c for c in tl.collectives if c.n_steps]
        self.collective = widgets.Dropdown(
            options=[(f"{c.index + 1}. {c.label}", c.index) for c in moving],
            description="collective",
            layout=widgets.Layout(width="520px"),
        )
        n = len(self.frames)
        self.play = widgets.Play(interval=300, min=1, max=n, description="play")
        self.slider = widgets.IntSlider(min=1, max=n, description="step")
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.message, self.table, self.plot = widgets.HTML(), widgets.HTML(), PlotlyView()
        rows = [widgets.HBox([self.play, self.slider]), self.collective]
        super().__init__([widgets.HTML(STALE_CSS), *rows, self.message, self.plot, self.table])
        self.add_class("gv-step-replay")
        self.slider.observe(self._on_step, "value")
        self.collective.observe(self._on_collective, "value")
        self.show(0)

    @inline_errors
    def _on_step(self, change):
        self.show(change["new"] - 1)

    @inline_errors
    def _on_collective(self, change):
        """Jump to the collective's first step, unless the step shown is already one of its."""
        c = self.timeline.collectives[change["new"]]
        if not c.first_step <= self.slider.value - 1 < c.first_step + c.n_steps:
            self.slider.value = c.first_step + 1

    def collective_at(self, step: int) -> int:
        """Index of the collective whose run holds timeline step `step` (0-based)."""
        for c in self.timeline.collectives:
            if c.first_step <= step < c.first_step + c.n_steps:
                return c.index
        raise ValueError(f"step must be in 1..{len(self.frames)}, got {step + 1}")

    def show(self, step: int):
        """Draw timeline step `step` (0-based) and mark its collective in menu and table."""
        current = self.collective_at(step)
        self.figure = figure(self.frames, step)
        self.plot.show(plain(self.figure, {"displaylogo": False}))
        self.collective.value = current  # the step is one of its: no jump
        self.table.value = table_html(self.timeline, current)
        self.message.value = ""
        for view in (self.plot, self.table):
            view.remove_class("gv-stale")

    def fail(self, err: Exception):
        self.message.value = error_html(err)
        for view in (self.plot, self.table):
            view.add_class("gv-stale")

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus a static SVG of the current step and the table."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self.timeline.topo.n_chips <= LINK_VIEW_CHIPS:
            picture = svg(self.frames, self.slider.value - 1)
            bundle["text/html"] = picture + table_html(self.timeline, self.collective.value)
        return bundle
