"""`make html`: every lesson as one self-contained HTML page that reads with the network off.

`python -m gspmd_viz.viz.export notebooks build/html` writes `NN_topic.html` per lesson
(`NNb_topic.html` for the second half of a lesson split in two) and deletes pages of lessons that
no longer exist. Plotly figures become live plots with plotly.js inlined once per page; widget
views are dropped in favour of the static picture their cell stores (`viz.common.static.show`):
embedding widget state would need the widget manager from a CDN, so the page would not be
self-contained. No MathJax, no require.js, nothing remote: formulas in markdown cells and in
`text/latex` outputs are converted to MathML when the page is written (`offline_math`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jinja2
import nbformat
from nbconvert import HTMLExporter
from plotly.offline import get_plotlyjs

from gspmd_viz.viz.offline_math import markdown_to_html

PLOTLY = "application/vnd.plotly.v1+json"
LATEX = "text/latex"
WIDGET = "application/vnd.jupyter.widget-view+json"
# Where MathJax would load: a rule that sets MathML's math font a little larger, to match the text.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}<style>math { font-size: 1.1em; }</style>{%- endblock -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


def _plot_html(figure: dict, div_id: str, with_library: bool) -> str:
    """A live plotly figure as HTML; the first one on the page carries plotly.js itself."""
    library = f"<script>{get_plotlyjs()}</script>" if with_library else ""
    data, layout = json.dumps(figure.get("data", [])), json.dumps(figure.get("layout", {}))
    return (
        f"{library}<div id='{div_id}' class='gv-plot'></div><script>"
        f"Plotly.newPlot('{div_id}', {data}, {layout}, {{displaylogo: false}});</script>"
    )


def offline_outputs(nb) -> int:
    """Rewrite outputs in place for an offline page; returns the number of live plots."""
    plots = 0
    for cell in nb.cells:
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET in data:
                continue  # its static picture follows in the next output
            if PLOTLY in data:
                html = _plot_html(data[PLOTLY], f"gv-plot-{plots}", plots == 0)
                out["data"] = {"text/html": html}
                plots += 1
            elif LATEX in data:
                data.setdefault("text/html", markdown_to_html(data.pop(LATEX)))
            kept.append(out)
        if cell.cell_type == "code":
            cell.outputs = kept
    nb.metadata.pop("widgets", None)
    return plots


class OfflineExporter(HTMLExporter):
    """nbconvert's lab page with markdown formulas as MathML instead of text for MathJax."""

    @jinja2.pass_context
    def markdown2html(self, context, source: str) -> str:
        # As HTMLExporter.markdown2html, with the MathML renderer.
        return markdown_to_html(
            source,
            attachments=context.get("cell", {}).get("attachments", {}),
            embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )


def exporter() -> HTMLExporter:
    loader = jinja2.DictLoader({"gv_offline.html.j2": OFFLINE_TEMPLATE})
    return OfflineExporter(
        template_name="lab", template_file="gv_offline.html.j2", extra_loaders=[loader]
    )


def export(notebooks: Path, out: Path) -> list[Path]:
    """One page per lesson in `notebooks`, named after it; pages of removed lessons go."""
    out.mkdir(parents=True, exist_ok=True)
    lessons = sorted(notebooks.glob("[0-9][0-9]*_*.ipynb"))
    if not lessons:
        raise FileNotFoundError(f"no lessons (NN_topic.ipynb) in {notebooks}")
    for stale in out.glob("*.html"):
        stale.unlink()
    html = exporter()
    pages = []
    for lesson in lessons:
        nb = nbformat.read(lesson, as_version=4)
        offline_outputs(nb)
        body, _ = html.from_notebook_node(nb, resources={"metadata": {"name": lesson.stem}})
        page = out / f"{lesson.stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
    return pages


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m gspmd_viz.viz.export NOTEBOOKS_DIR OUT_DIR")
    for page in export(Path(argv[0]), Path(argv[1])):
        print(f"wrote {page} ({page.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main(sys.argv[1:])
