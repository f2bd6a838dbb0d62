"""Offline pages draw formulas as MathML: what is math, what each formula becomes, and what
happens to a formula the converter cannot handle (its source in a `<code>` span, never a broken
page)."""

import nbformat
import pytest
from bs4 import BeautifulSoup

from gspmd_viz.viz.export import export, offline_outputs
from gspmd_viz.viz.offline_math import FALLBACK_CLASS, UnrenderedFormula, markdown_to_html


def _soup(markdown: str) -> BeautifulSoup:
    return BeautifulSoup(markdown_to_html(markdown), "html.parser")


def test_inline_formula_becomes_mathml_in_its_sentence():
    soup = _soup(r"each shard holds $n=\lceil N/S\rceil$ elements")
    (math,) = soup.find_all("math")
    assert math["display"] == "inline"
    assert math.get_text() == "n=⌈N/S⌉"  # the ceiling brackets, not the TeX commands
    assert soup.get_text().strip() == "each shard holds n=⌈N/S⌉ elements"


def test_display_formula_becomes_a_block_fraction():
    soup = _soup(r"$$\frac{S-1}{M+S-1}$$")
    (math,) = soup.find_all("math")
    assert math["display"] == "block"
    numerator, denominator = math.find("mfrac").find_all(recursive=False)
    assert (numerator.get_text(), denominator.get_text()) == ("S−1", "M+S−1")


def test_latex_environment_becomes_display_math():
    (math,) = _soup(r"\begin{equation} a=b \end{equation}").find_all("math")
    assert (math["display"], math.get_text()) == ("block", "a=b")


@pytest.mark.parametrize(
    "markdown, text",
    [
        (r"costs \$5 and \$10 a month", "costs $5 and $10 a month"),
        ("run `echo $HOME $PATH` first", "run echo $HOME $PATH first"),
        ("one price: $5", "one price: $5"),
    ],
    ids=["escaped-dollars", "code-span", "single-dollar"],
)
def test_dollars_that_are_not_math_stay_text(markdown, text):
    soup = _soup(markdown)
    assert soup.find("math") is None
    assert soup.get_text().strip() == text


@pytest.mark.parametrize(
    "tex, reason",
    [(r"\frac{a", "parts"), (r"\unknowncommand x", "unconverted"), ("}{", "failed")],
    ids=["fraction-missing-a-part", "unknown-command", "unparsable"],
)
def test_formula_the_converter_cannot_handle_shows_its_source(tex, reason):
    with pytest.warns(UnrenderedFormula, match=reason):
        soup = _soup(f"before ${tex}$ after")
    assert soup.find("math") is None
    (code,) = soup.find_all("code", class_=FALLBACK_CLASS)
    assert code.get_text() == tex
    assert soup.get_text().strip() == f"before {tex} after"


def test_latex_output_becomes_mathml():
    nb = nbformat.v4.new_notebook()
    output = nbformat.v4.new_output(
        "display_data", data={"text/latex": r"$\displaystyle x^2$", "text/plain": "x**2"}
    )
    nb.cells = [nbformat.v4.new_code_cell("Math('x^2')", outputs=[output])]
    offline_outputs(nb)
    data = nb.cells[0].outputs[0]["data"]
    assert "text/latex" not in data
    (math,) = BeautifulSoup(data["text/html"], "html.parser").find_all("math")
    assert math.find("msup").get_text() == "x2"


def test_exported_page_has_mathml_and_no_mathjax(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(r"The bubble is $\frac{S-1}{M+S-1}$.")]
    nbformat.write(nb, tmp_path / "01_math.ipynb")
    (page,) = export(tmp_path, tmp_path / "html")
    html = page.read_text()
    assert "mathjax" not in html.lower()
    cell = BeautifulSoup(html, "html.parser").select_one(".jp-RenderedMarkdown")
    assert cell.find("mfrac") is not None
    assert "$" not in cell.get_text() and "\\frac" not in cell.get_text()
