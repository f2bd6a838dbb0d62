"""The user's function as a picture: each line with the bytes its collectives move in the
margin, the lines that cause collectives highlighted (SVG for the static figure, HTML for the
detail of one line)."""

from __future__ import annotations

import html

from gspmd_viz.units import format_bytes

ROW, CHAR, MARGIN = 18, 7.4, 96  # px per line, per character, width of the bytes margin
HOT, PICKED = "#ffe6b3", "#ffc266"


def source_svg(report, picked: int | None = None) -> str:
    """The function's source, collective lines highlighted, bytes per line in the margin."""
    code, moved = report.code, report.line_bytes()
    code_width = MARGIN + 40 + CHAR * max((len(x) for x in code.lines), default=10)
    width = int(max(code_width, 4 + CHAR * len(caption(report))) + 16)
    height = ROW * (len(code.lines) + 1) + 8
    rows = [_text(4, 4, caption(report), "start", "#444")]
    for k, text in enumerate(code.lines):
        line, y = code.first + k, 4 + ROW * (k + 1)
        if line in moved:
            fill = PICKED if line == picked else HOT
            rows.append(f"<rect x='0' y='{y}' width='{width}' height='{ROW}' fill='{fill}'/>")
            rows.append(_text(MARGIN - 8, y, format_bytes(moved[line]), "end", "#8a4b00"))
        rows.append(_text(MARGIN + 30, y, str(line), "end", "#999"))
        rows.append(_text(MARGIN + 40, y, text, "start", "#222"))
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"font-family='DejaVu Sans Mono, monospace' font-size='12'>"
        f"<rect width='{width}' height='{height}' fill='white'/>{''.join(rows)}</svg>"
    )


def caption(report) -> str:
    """`mlp on Mesh(x=2, y=4): 1 collective, 1.5 KiB per device (reference 1.5 KiB)`."""
    n = len(report.entries)
    return (
        f"{report.function} on {report.mesh!r}: {n} collective{'s' * (n != 1)} in XLA's program, "
        f"{format_bytes(report.xla_bytes)} per device (reference {format_bytes(report.our_bytes)})"
    )


def _text(x: float, y: int, text: str, anchor: str, color: str) -> str:
    body = html.escape(text.replace("\t", "    "))
    return (
        f"<text x='{x:.0f}' y='{y + 13}' text-anchor='{anchor}' fill='{color}' "
        f"xml:space='preserve'>{body}</text>"
    )


def line_detail(report, line: int) -> str:
    """HTML: the collectives of one line, the shardings meeting there and the reasons."""
    entries = report.by_line().get(line, [])
    findings = [f for f in report.findings if f.line == line and f.kind != "memory"]
    if not entries and not findings:
        return f"<p>line {line}: no collective in XLA's compiled program.</p>"
    head = f"<p><b>line {line}</b> <code>{html.escape(report.code.text(line))}</code></p>"
    items = [
        f"<li><code>{html.escape(e.collective.describe())}</code><br>{html.escape(e.reason)}</li>"
        for e in entries
    ]
    items += [f"<li><b>{f.kind}</b>: {html.escape(f.message)}</li>" for f in findings]
    return head + "<ul>" + "".join(items) + "</ul>"
