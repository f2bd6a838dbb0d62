"""A short axis against the long one of a 3-D torus, and where going up off the top lands.

``plane_svg([plain, twisted])`` draws, per topology, the chips (short axis d0 up, long axis d2
across, d1 = 0) with their links, and above the top row a dashed "ghost" row: the chip that the
wraparound link leaving each top chip upwards reaches, labelled with its d2 (with "d1," in front
when the link leaves the plane, as a kx2kx2k twist does). Untwisted, it is the bottom chip of the
same column; twisted, the bottom chip k columns on.
"""

from __future__ import annotations

import html

from gspmd_viz.sim import Topology

STEP, LEFT, TOP, GAP = 40, 70, 40, 50


def _panel(topo: Topology, y0: float) -> tuple[list[str], float]:
    """SVG elements of one topology's plane, drawn from height y0; returns (elements, height)."""
    k, n = topo.shape[0], topo.shape[2]
    x = [LEFT + c * STEP for c in range(n)]
    y = [y0 + TOP + STEP * (k - a) for a in range(k)]  # row a; the ghost row sits at y0 + TOP
    out = [f'<text x="8" y="{y0 + 16}" font-size="14">{html.escape(topo.name)}</text>']
    for a in range(k):
        out.append(f'<line x1="{x[0]}" y1="{y[a]}" x2="{x[-1]}" y2="{y[a]}" stroke="#bbb"/>')
    for c in range(n):
        out.append(f'<line x1="{x[c]}" y1="{y[0]}" x2="{x[c]}" y2="{y[-1]}" stroke="#bbb"/>')
        top = topo.index((k - 1, 0, c))
        lands = next(topo.coord(m) for m in topo.neighbours(top) if topo.coord(m)[0] == 0)
        label = f"{lands[1]},{lands[2]}" if lands[1] else f"{lands[2]}"
        colour = "#1f77b4" if lands[2] == c else "#d62728"
        out.append(f'<line x1="{x[c]}" y1="{y[-1]}" x2="{x[c]}" y2="{y0 + TOP}" '
                   f'stroke="{colour}" stroke-width="2"/>')  # fmt: skip
        out.append(f'<circle cx="{x[c]}" cy="{y0 + TOP}" r="11" fill="white" stroke="{colour}" '
                   f'stroke-dasharray="3,2"/><text x="{x[c]}" y="{y0 + TOP + 4}" font-size="10" '
                   f'text-anchor="middle">{label}</text>')  # fmt: skip
        for a in range(k):
            out.append(f'<circle cx="{x[c]}" cy="{y[a]}" r="6" fill="#444"/>')
    for a in range(k):
        out.append(f'<text x="{LEFT - 30}" y="{y[a] + 4}" font-size="11">d0={a}</text>')
    for c in range(n):
        out.append(f'<text x="{x[c]}" y="{y[0] + 22}" font-size="11" text-anchor="middle">{c}'
                   "</text>")  # fmt: skip
    return out, TOP + STEP * k + 30


def plane_svg(topos: list[Topology]) -> str:
    """The d1 = 0 plane of each 3-D topology (shape k x . x n), one panel below the other."""
    for topo in topos:
        if topo.ndim != 3:
            raise ValueError(f"plane_svg draws 3-D topologies, got shape {topo.shape}")
    parts, y0 = [], 0.0
    for topo in topos:
        elements, height = _panel(topo, y0)
        parts += elements
        y0 += height + GAP
    width = max(LEFT + STEP * max(t.shape[2] for t in topos), 440)
    note = (f'<text x="8" y="{y0 - GAP + 16}" font-size="12">dashed: the chip reached going up '
            "off the top row, by its d2; below each column: its d2</text>")  # fmt: skip
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y0 - GAP + 24}">'
            + "".join(parts) + note + "</svg>")  # fmt: skip
