"""Formulas for pages read without MathJax: LaTeX becomes MathML when the page is written.

Which `$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]` and `\\begin{env}…\\end{env}` spans are math is decided
by nbconvert's own markdown parser, the one its pages hand to MathJax (code spans and `\\$` are
not math, as in JupyterLab). Each formula is converted by `latex2mathml`; Chromium and Firefox
draw MathML natively, so the page needs no script. A formula the converter cannot handle, or
converts with a TeX command or a bare `&` left in it or with a script or fraction missing a part
(latex2mathml turns `\\frac{a` into a one-child `<mfrac>`), is shown as its source in a `<code>`
span.
"""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ET
from html import escape

from latex2mathml.converter import convert
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

# What a failed conversion leaves behind: `\foo` as an identifier, `&` of an alignment as text.
LEFTOVER_TEX = re.compile(r"\\[A-Za-z]|&(?!#?\w+;)")
FALLBACK_CLASS = "gv-tex-source"
MATHML = "{http://www.w3.org/1998/Math/MathML}"
# MathML Core's elements with a fixed number of children.
ARITY = {"mfrac": 2, "mroot": 2, "msub": 2, "msup": 2, "msubsup": 3}
ARITY |= {"munder": 2, "mover": 2, "munderover": 3}


class UnrenderedFormula(UserWarning):
    """A formula on an offline page is shown as its LaTeX source."""


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """`<math>` for one formula, or its source in a `<code>` span (with a warning) if it fails."""
    try:
        mathml = convert(tex, display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises many types on input it cannot parse
        return _source_span(tex, f"latex2mathml failed ({type(err).__name__})")
    problem = _unconverted_part(mathml)
    if problem:
        return _source_span(tex, problem)
    return mathml


def _unconverted_part(mathml: str) -> str | None:
    """Why latex2mathml's answer is not a whole formula, or None if it is."""
    leftover = LEFTOVER_TEX.search(mathml)
    if leftover:
        return f"latex2mathml left {leftover.group()!r} unconverted"
    try:
        tree = ET.fromstring(mathml)
    except ET.ParseError as err:
        return f"latex2mathml wrote malformed MathML ({err})"
    for element in tree.iter():
        name = element.tag.removeprefix(MATHML)
        if name in ARITY and len(element) != ARITY[name]:
            return f"<{name}> has {len(element)} parts, not {ARITY[name]}"
    return None


def _source_span(tex: str, reason: str) -> str:
    warnings.warn(f"formula {tex!r}: {reason}; shown as source", UnrenderedFormula, stacklevel=2)
    return f'<code class="{FALLBACK_CLASS}">{escape(tex, quote=False)}</code>'


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer with formulas as MathML instead of text for MathJax."""

    def inline_math(self, body: str) -> str:
        return tex_to_mathml(body)

    def block_math(self, body: str) -> str:
        return tex_to_mathml(body, display=True)

    def latex_environment(self, name: str, body: str) -> str:
        return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)


def markdown_to_html(source: str, **renderer_options) -> str:
    """Markdown (with math) to HTML whose formulas are MathML."""
    renderer = MathMLRenderer(escape=False, **renderer_options)
    return MarkdownWithMath(renderer=renderer).render(source)
