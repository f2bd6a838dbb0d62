"""`make html` pages read offline: each lesson's page opens in Chromium with the network off and
draws every figure its notebook stores (plotly plots live, widget cells as static pictures) and
every formula of its markdown (as MathML, no LaTeX source left in the text)."""

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from plotly.offline import get_plotlyjs

from gspmd_viz.viz.export import export, offline_outputs

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
OUT = ROOT / "test-output"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
FIGURE_TYPES = ("image/png", "image/svg+xml")


def _expected_figures(lesson: Path) -> int:
    """Outputs that should draw a picture on the page, counted from the notebook itself."""
    nb = nbformat.read(lesson, as_version=4)
    offline_outputs(nb)
    count = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = data.get("text/html", "")
            if any(k in data for k in FIGURE_TYPES) or any(
                tag in html for tag in ("<svg", "<img", "gv-plot")
            ):
                count += 1
    return count


class _FormulaCounter(IPythonRenderer):
    """nbconvert's own renderer, counting the formulas it would hand to MathJax."""

    formulas = 0

    def inline_math(self, body):
        self.formulas += 1
        return super().inline_math(body)

    def block_math(self, body):
        self.formulas += 1
        return super().block_math(body)

    def latex_environment(self, name, body):
        self.formulas += 1
        return super().latex_environment(name, body)


def _markdown_sources(lesson: Path) -> list[str]:
    """What the page renders as markdown: markdown cells and `text/markdown` outputs."""
    cells = nbformat.read(lesson, as_version=4).cells
    outputs = [out.get("data", {}) for c in cells for out in c.get("outputs", [])]
    return [c.source for c in cells if c.cell_type == "markdown"] + [
        data["text/markdown"] for data in outputs if "text/markdown" in data
    ]


def _expected_formulas_and_dollars(lesson: Path) -> tuple[int, int]:
    """Formulas in the lesson's markdown, and the `\\$` escapes that should show as a plain `$`."""
    counter = _FormulaCounter(escape=False)
    markdown = _markdown_sources(lesson)
    for source in markdown:
        MarkdownWithMath(renderer=counter).render(source)
    return counter.formulas, sum(source.count("\\$") for source in markdown)


# Markdown text outside code, formulas drawn (a box of non-zero size), formulas left as source.
MATH = """() => {
  const cells = [...document.querySelectorAll('.jp-RenderedMarkdown')];
  const text = cells.map(c => { const k = c.cloneNode(true);
    k.querySelectorAll('code, pre').forEach(e => e.remove()); return k.textContent; }).join(' ');
  const drawn = [...document.querySelectorAll('.jp-RenderedMarkdown math')].filter(m => {
    const r = m.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length;
  return {text, drawn, source: document.querySelectorAll('.gv-tex-source').length};
}"""
FIRST_MATH_CELL = ".jp-MarkdownCell:has(math)"


# An output area counts as drawn when it holds a loaded image or a non-empty SVG.
DRAWN = """() => [...document.querySelectorAll('.jp-OutputArea-output')].filter(o =>
  [...o.querySelectorAll('img')].some(i => i.complete && i.naturalWidth > 0) ||
  [...o.querySelectorAll('svg')].some(s => s.getBoundingClientRect().width > 50)).length"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing")
    out = tmp_path_factory.mktemp("html")
    return {p.stem: p for p in export(ROOT / "notebooks", out)}


def test_one_page_per_lesson_named_after_it(pages):
    assert sorted(pages) == [lesson.stem for lesson in LESSONS]


def test_the_lessons_have_figures_to_draw():
    """The per-page count below is not vacuous: all but the reading-only lessons draw."""
    assert sum(_expected_figures(lesson) > 0 for lesson in LESSONS) >= len(LESSONS) - 1


def test_plotly_js_is_inlined_once_where_a_page_has_plots(pages):
    # README: a page with plots is about 5 MiB, its own plotly.js; the others about 0.5 MiB.
    library = get_plotlyjs()
    for stem, page in pages.items():
        html = page.read_text(encoding="utf-8")
        copies = html.count(library[:2000])
        assert copies == ("gv-plot-0" in html), (stem, copies)
        assert len(html.encode()) < copies * len(library.encode()) + 2**20, stem


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.stem for lesson in LESSONS])
def test_page_draws_every_figure_and_formula_with_the_network_off(pages, lesson):
    from playwright.sync_api import sync_playwright

    remote, errors = [], []
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
            context.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith(("file:", "data:"))
                    else (remote.append(route.request.url), route.abort())
                ),
            )
            page = context.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(pages[lesson.stem].as_uri(), wait_until="load")
            page.wait_for_timeout(1500)  # plotly draws after load
            drawn, math = page.evaluate(DRAWN), page.evaluate(MATH)
            page.screenshot(path=str(OUT / f"html-{lesson.stem}.png"), full_page=False)
            if math["drawn"]:  # lesson 04's notation table, 05's and 06's first formulas
                first = page.locator(FIRST_MATH_CELL).first
                first.screenshot(path=str(OUT / f"html-math-{lesson.stem}.png"))
        finally:
            browser.close()
    assert remote == [], f"the page asked the network for {remote}"
    assert errors == []
    assert drawn == _expected_figures(lesson), drawn  # 03c's prose and tables draw nothing
    formulas, escaped_dollars = _expected_formulas_and_dollars(lesson)
    assert (math["drawn"], math["source"]) == (formulas, 0)
    assert math["text"].count("$") == escaped_dollars, "a $ of LaTeX is visible"
    assert re.search(r"\\[A-Za-z]+", math["text"]) is None, "a TeX command is visible"
