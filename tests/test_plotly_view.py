"""PlotlyView (viz/common/plotly_view.py): the figure is widget state the front end redraws in
place; a hidden plotly output makes JupyterLab load plotly.js. The drawing itself is checked in
Chromium by the lesson 01 and 07 browser tests (the editor's and training widget's figures)."""

import json

import anywidget
import plotly.graph_objects as go

from gspmd_viz.viz.common.plotly_view import PLOTLY, PlotlyView


def test_the_figure_is_state_and_each_show_replaces_it():
    view = PlotlyView()
    first = json.loads(go.Figure(go.Bar(y=[1, 2]), {"title": {"text": "one"}}).to_json())
    view.show(first)
    assert view.figure == first
    second = {**first, "layout": {"title": {"text": "two"}}}
    view.show(second)
    assert view.figure["layout"]["title"]["text"] == "two"
    state = view._canvas.get_state()
    assert state["figure"] == second and "Plotly.react" in state["_esm"]


def test_a_hidden_empty_plotly_output_loads_plotly_js():
    loader, canvas = PlotlyView().children
    assert loader.layout.display == "none"
    (output,) = loader.outputs
    assert output["data"][PLOTLY]["data"] == [] and isinstance(canvas, anywidget.AnyWidget)


def test_classes_go_on_the_view():
    view = PlotlyView()
    view.add_class("gv-stale")
    assert "gv-stale" in view._dom_classes
