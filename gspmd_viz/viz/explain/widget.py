"""The explain widget: your function's source with the lines that cause collectives highlighted
and their bytes in the margin; click a line to see its collectives, the shardings meeting there
and the reason; change the mesh or an annotation and the list is rebuilt.

`ExplainWidget(make, args, mesh="x=2, y=4", specs={"x": "x, None"})`: `make(mesh, specs)`
returns the function to explain (its annotations read `specs[name]`, a spec tuple). Each
(mesh, specs) report is computed once (XLA compiles the function) and kept, so returning to a
setting redraws at once. User text is parsed, never evaluated; bad text shows one line inline.
"""

from __future__ import annotations

import re

import ipywidgets as widgets

from gspmd_viz.explain import explain
from gspmd_viz.units import format_bytes
from gspmd_viz.viz.arrays.notation import parse_mesh
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, inline_errors, stale_html
from gspmd_viz.viz.explain.source import line_detail, source_svg

LINE_CSS = (
    "<style>.gv-explain-line{font-family:monospace;white-space:pre;justify-content:flex-start;"
    "text-align:left;height:22px;margin:0}</style>"
)
_AXIS = re.compile(r"[A-Za-z_]\w*")


def parse_spec(text: str) -> tuple:
    """`x, None` -> ("x", None); `(x y), -` -> (("x", "y"), None): one entry per tensor dim,
    `None`, `-` or empty for a dim not split, axes in parentheses for several."""
    entries = re.findall(r"\([^)]*\)|[^,()]+", text)
    if not text.strip():
        return ()
    spec = []
    for entry in (e.strip() for e in entries):
        names = [n for n in re.findall(r"[^\s,()]+", entry) if n not in ("None", "-")]
        bad = [n for n in names if not _AXIS.fullmatch(n)]
        if bad:
            raise ValueError(f"cannot read mesh axis {bad[0]!r} in spec {text!r}")
        axes = tuple(names)
        spec.append(axes if entry.startswith("(") and len(axes) > 1 else (axes or (None,))[0])
    return tuple(spec)


class ExplainWidget:
    """Display with gv.viz.show(w) (live, plus a static picture) or `w.box`."""

    def __init__(
        self, make, args, mesh: str = "x=2, y=4", specs: dict | None = None, chip="tpu-v3"
    ):
        self.make, self.args, self.chip = make, tuple(args), chip
        self.mesh_text = widgets.Text(value=mesh, description="mesh", continuous_update=False)
        self.spec_texts = {
            name: widgets.Text(value=text, description=name, continuous_update=False)
            for name, text in (specs or {}).items()
        }
        self.message, self.detail, self.summary = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self.lines = widgets.VBox()
        self.lines.add_class("gv-explain-lines")
        self.summary.add_class("gv-explain-summary")
        self.detail.add_class("gv-explain-detail")
        self.report, self.picked, self._cache = None, None, {}
        controls = widgets.HBox([self.mesh_text, *self.spec_texts.values()])
        self.box = widgets.VBox(
            [
                controls,
                self.message,
                self.summary,
                self.lines,
                self.detail,
                widgets.HTML(LINE_CSS + STALE_CSS),
            ]
        )
        self.box.add_class("gv-explain")
        for w in (self.mesh_text, *self.spec_texts.values()):
            w.observe(self._on_setting, names="value")
        self._on_setting()

    # --- state ------------------------------------------------------------------------
    def _key(self):
        mesh = parse_mesh(self.mesh_text.value)
        specs = {name: parse_spec(w.value) for name, w in self.spec_texts.items()}
        return mesh, specs

    def _report(self, mesh, specs):
        key = (tuple(mesh.shape.items()), tuple(sorted(specs.items())))
        if key not in self._cache:
            self._cache[key] = explain(
                self.make(mesh, specs), *self.args, mesh=mesh, chip=self.chip
            )
        return self._cache[key]

    @inline_errors
    def _on_setting(self, change=None):
        self.report = self._report(*self._key())
        self.message.value = ""
        self.lines.remove_class("gv-stale")
        hot = sorted(self.report.line_bytes())
        self.picked = self.picked if self.picked in hot else (hot[0] if hot else None)
        self.summary.value = f"<code>{self.report.header()}</code>"
        self._build_lines()
        self._draw_lines()

    @inline_errors
    def pick(self, line: int):
        """Show the collectives, shardings and reasons of one line (what a click does)."""
        self.picked = line
        self._draw_lines()

    def fail(self, err):
        self.message.value = error_html(err)
        self.lines.add_class("gv-stale")
        self.detail.value = stale_html(self.detail.value) if self.detail.value else ""

    # --- drawing ----------------------------------------------------------------------
    def _build_lines(self):
        """One button per source line: bytes in the margin, line number, the code."""
        report, moved = self.report, self.report.line_bytes()
        buttons = []
        for k, text in enumerate(report.code.lines):
            line = report.code.first + k
            margin = format_bytes(moved[line]) if line in moved else ""
            b = widgets.Button(description=f"{margin:>9} {line:>4}  {text}", tooltip=f"line {line}")
            b.layout = widgets.Layout(width="100%")
            b.add_class("gv-explain-line")
            b.on_click(lambda _, line=line: self.pick(line))
            buttons.append(b)
        self.lines.children = buttons

    def _draw_lines(self):
        """Highlight the lines with collectives (the picked one apart) and show its detail."""
        report, moved = self.report, self.report.line_bytes()
        for k, b in enumerate(self.lines.children):
            line = report.code.first + k
            b.button_style = "warning" if line == self.picked else "info" if line in moved else ""
        self.detail.value = line_detail(report, self.picked) if self.picked else ""

    def static_figure(self) -> str:
        return source_svg(self.report, self.picked)
