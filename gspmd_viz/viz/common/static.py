"""Static pictures for readers without a kernel: GitHub, `make html`, a lesson opened un-run.

`show(obj)` is the one call a lesson needs in a figure or widget cell:

- a plotly figure is displayed once, as plotly's mimetype (live in JupyterLab) with a PNG of it
  in the same output (what GitHub and the HTML export draw, and what nbval skips);
- a graphviz graph is displayed as SVG (never `<graphviz.graphs.Digraph at 0x...>`);
- a widget is displayed live, followed by a static picture of its current state. The picture
  hides itself while the live widget is on the page (a CSS rule that only the rendered widget
  carries), so live controls and a stale picture are never seen together.

A widget says what to draw with `static_figure()` (a plotly figure, a graphviz graph or SVG
text); without it, its `figure` attribute is used. Its live view is the widget itself or its
`box`. PNGs come from headless Chromium (kaleido is not installed); without Chromium the static
output carries only its text.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from pathlib import Path

import ipywidgets as widgets
import plotly
import plotly.graph_objects as go
from IPython.display import display

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
# The live widget carries this rule; it hides the output right after it: the static picture.
HIDE_STATIC_WHEN_LIVE = (
    "<style>.jp-OutputArea-child:has(.gv-live) + .jp-OutputArea-child,"
    ".output_area:has(.gv-live) + .output_area{display:none}</style>"
)
STATIC_TEXT = "[static picture of the widget above, as this cell left it]"
LIVE_TEXT = "[live widget: run the lesson to use it; below is a picture of its last state]"


def chromium() -> str | None:
    found = (shutil.which(name) for name in CHROMIUM)
    return next((p for p in found if p), None)


def _page(figure: go.Figure) -> str:
    """A self-contained page holding only the figure, drawn without animation."""
    body = figure.to_html(
        include_plotlyjs=PLOTLY_JS.as_uri(), full_html=False, config={"staticPlot": True}
    )
    return f"<html><body style='margin:0;background:white'>{body}</body></html>"


def plotly_png(figure: go.Figure, timeout: float = 60) -> bytes | None:
    """PNG of a plotly figure at its layout size, drawn by headless Chromium (None without)."""
    browser = chromium()
    if browser is None:
        return None
    width = int(figure.layout.width or 800)
    height = int(figure.layout.height or 500)
    with tempfile.TemporaryDirectory(prefix="gv-static-") as tmp:
        page, png = Path(tmp) / "figure.html", Path(tmp) / "figure.png"
        page.write_text(_page(figure))
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--allow-file-access-from-files", f"--user-data-dir={tmp}/profile",
               "--force-device-scale-factor=1", f"--window-size={width},{height}",
               "--virtual-time-budget=5000", f"--screenshot={png}", page.as_uri()]  # fmt: skip
        subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        return png.read_bytes() if png.exists() else None


def _svg(obj) -> str | None:
    if isinstance(obj, str) and "<svg" in obj and "</svg>" in obj:  # SVG, or HTML holding one
        return obj[obj.index("<svg") : obj.rindex("</svg>") + len("</svg>")]
    if hasattr(obj, "pipe") and hasattr(obj, "source"):  # a graphviz graph
        return obj.pipe(format="svg").decode()
    return None


def static_bundle(obj, text: str) -> dict:
    """Mimetype bundle of a static picture of `obj` (figure, graph or SVG), plus `text`."""
    bundle = {"text/plain": text}
    if isinstance(obj, go.Figure):
        png = plotly_png(obj)
        if png is not None:
            bundle["image/png"] = base64.b64encode(png).decode()
        return bundle
    svg = _svg(obj)
    if svg is None:
        raise TypeError(f"no static picture for {type(obj).__name__}: give a plotly figure, "
                        "a graphviz graph or SVG text")  # fmt: skip
    bundle["image/svg+xml"] = svg
    return bundle


def _live_view(widget) -> widgets.Widget:
    view = widget if isinstance(widget, widgets.Widget) else getattr(widget, "box", None)
    if not isinstance(view, widgets.Widget):
        raise TypeError(f"{type(widget).__name__} is not a widget and has no widget .box")
    return view


def _static_of(widget):
    if hasattr(widget, "static_figure"):
        return widget.static_figure()
    return widget.figure


def show(obj) -> None:
    """Display `obj` live and leave a static picture of it for readers without a kernel."""
    if isinstance(obj, go.Figure):
        live = {"application/vnd.plotly.v1+json": obj.to_plotly_json()}
        display({**static_bundle(obj, "[plotly figure]"), **live}, raw=True)
        return
    if _svg(obj) is not None:
        display(static_bundle(obj, "[figure]"), raw=True)
        return
    live = widgets.VBox([_live_view(obj), widgets.HTML(HIDE_STATIC_WHEN_LIVE)])
    live.add_class("gv-live")
    bundle = live._repr_mimebundle_()  # the widget view, with a readable text fallback
    display({**bundle, "text/plain": LIVE_TEXT}, raw=True)
    display(static_bundle(_static_of(obj), STATIC_TEXT), raw=True)
