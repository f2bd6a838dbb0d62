"""gspmd_viz.viz.show: every figure or widget cell leaves a static picture for readers without
a kernel (GitHub, make html, a lesson opened un-run)."""

import base64
from pathlib import Path

import graphviz
import ipywidgets as widgets
import pytest

import gspmd_viz as gv
from gspmd_viz.viz import show
from gspmd_viz.viz.arrays.editor import ShardingEditor
from gspmd_viz.viz.arrays.layout import layout_figure
from gspmd_viz.viz.common import static
from gspmd_viz.viz.common.static import HIDE_STATIC_WHEN_LIVE, LIVE_TEXT, STATIC_TEXT, chromium

PNG = b"\x89PNG\r\n\x1a\n"


def _shown(obj, monkeypatch) -> list[dict]:
    """The mimetype bundles `show` hands to IPython's display, in order."""
    shown = []
    monkeypatch.setattr(static, "display", lambda data, raw=False: shown.append(data))
    show(obj)
    return shown


needs_chromium = pytest.mark.skipif(
    chromium() is None and not Path("/usr/bin/chromium").exists(), reason="no Chromium"
)


@needs_chromium
def test_a_plotly_figure_is_one_output_live_with_its_png(monkeypatch):
    fig = layout_figure(gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x",)), (7, 6))
    (bundle,) = _shown(fig, monkeypatch)
    live = bundle["application/vnd.plotly.v1+json"]
    assert live["layout"]["title"]["text"] == fig.layout.title.text
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(PNG)
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (fig.layout.width, fig.layout.height)  # drawn at its layout size


def test_a_graphviz_graph_is_stored_as_svg(monkeypatch):
    g = graphviz.Digraph()
    g.edge("x", "y")
    (bundle,) = _shown(g, monkeypatch)
    svg = bundle["image/svg+xml"]
    assert "<svg" in svg and svg.rstrip().endswith("</svg>") and ">x<" in svg


def test_svg_inside_html_is_cut_out_whole(monkeypatch):
    html = "<div><b>graph</b><svg width='10'><g/></svg><pre>table</pre></div>"
    (bundle,) = _shown(html, monkeypatch)
    assert bundle["image/svg+xml"] == "<svg width='10'><g/></svg>"


@needs_chromium
def test_a_widget_is_live_then_a_static_picture_that_hides_while_live(monkeypatch):
    editor = ShardingEditor(mesh="x=2, y=4", shape="7, 6", spec=("x", "y"))
    live, static = _shown(editor, monkeypatch)
    assert "application/vnd.jupyter.widget-view+json" in live and live["text/plain"] == LIVE_TEXT
    assert static["text/plain"] == STATIC_TEXT
    assert base64.b64decode(static["image/png"]).startswith(PNG)


def test_a_widget_without_a_view_or_figure_is_refused_clearly(monkeypatch):
    class NotAWidget:
        figure = None

    with pytest.raises(TypeError, match="not a widget"):
        _shown(NotAWidget(), monkeypatch)
    box = widgets.VBox()
    with pytest.raises(AttributeError):
        _shown(box, monkeypatch)  # a widget that says nothing about its picture


def test_the_hiding_rule_targets_only_the_output_after_a_live_widget():
    assert ":has(.gv-live) + .jp-OutputArea-child" in HIDE_STATIC_WHEN_LIVE
