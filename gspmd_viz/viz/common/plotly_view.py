"""A plotly figure that a widget redraws in place.

A figure set as an Output widget's plotly mimetype output is drawn by JupyterLab's plotly
renderer as a new output each time: Plotly.react into a fresh node, then a redraw, a resize and a
PNG snapshot (measured in Chromium on lesson 01's layout figure: ~40 + 40 + 100 + 70 ms). Drawn in
place with one Plotly.react it takes ~30-50 ms. `PlotlyView` holds the figure as widget state
(`figure`, plain JSON); its front end (`_ESM`, an anywidget module) reacts to each new figure.

It draws with the plotly.js JupyterLab's plotly renderer loads (plotly.js sets window.Plotly when
it loads). A hidden Output holding an empty plotly figure makes the renderer load it; the view
waits for it up to 10 s; without it (a front end with no plotly renderer) the view
says so in place of the figure.
"""

from __future__ import annotations

import json

import anywidget
import ipywidgets as widgets
import plotly.io as pio
import traitlets

__all__ = ["PlotlyView", "plain"]

PLOTLY = "application/vnd.plotly.v1+json"
# An empty figure 1 px high: what makes JupyterLab's renderer load plotly.js.
_LOADER = {
    "data": [],
    "layout": {"height": 1, "width": 1, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}},
}

_ESM = """
async function plotly(tries) {
  for (let i = 0; i < tries && !window.Plotly; i++) {
    await new Promise((done) => setTimeout(done, 50));
  }
  return window.Plotly;
}

export default {
  async render({ model, el }) {
    const div = document.createElement("div");
    el.appendChild(div);
    const Plotly = await plotly(200);  // up to 10 s for the renderer to load plotly.js
    if (!Plotly) {
      div.textContent = "this figure needs JupyterLab's plotly renderer (pip install plotly)";
      return;
    }
    let drawing = Promise.resolve();
    const draw = () => {  // every figure, in the order sent, one draw at a time
      const f = model.get("figure");
      const args = [f.data || [], f.layout || {}, f.config || {}];
      drawing = drawing.then(() => Plotly.react(div, ...args));
    };
    draw();
    model.on("change:figure", draw);
    return () => {
      model.off("change:figure", draw);
      Plotly.purge(div);
    };
  },
};
"""


def plain(fig, config: dict | None = None) -> dict:
    """A plotly figure (go.Figure or its dict) as plain JSON, numpy arrays as lists."""
    return {**json.loads(pio.to_json(fig, validate=False)), "config": config or {}}


class _Canvas(anywidget.AnyWidget):
    _esm = traitlets.Unicode(_ESM).tag(sync=True)
    figure = traitlets.Dict().tag(sync=True)


class PlotlyView(widgets.VBox):
    """`view.show(figure_dict)`: plain JSON (`json.loads(pio.to_json(fig))`), drawn in place.
    `view.figure` is the figure last shown (observe "figure" to see each one sent); classes go
    on the view (e.g. gv-stale)."""

    figure = traitlets.Dict()  # kernel side only: the canvas sends it

    def __init__(self, **kwargs):
        self._canvas = _Canvas()
        loader = widgets.Output(layout=widgets.Layout(display="none"))
        loader.outputs = (
            {"output_type": "display_data", "data": {PLOTLY: _LOADER}, "metadata": {}},
        )
        super().__init__([loader, self._canvas], **kwargs)

    def show(self, figure: dict) -> None:
        self._canvas.figure = figure
        self.figure = figure
