"""Draw device orders of one mesh axis: the chips of a group on their line, the ring as arcs.

``ring_svg({"naive": d1, "place": d2}, "x")`` draws one row per order: group 0's chips at their
physical positions along the line they occupy, and an arc for every ring edge in mesh order,
labelled with its hops, so a long closing edge (7 hops on a line of 8) stands out against a
folded ring's two-hop edges.
"""

from __future__ import annotations

import html

import numpy as np

from gspmd_viz.sim import DeviceOrder

STEP, ROW, LEFT, TOP = 56, 120, 90, 30


def _line(order: DeviceOrder, axis: str) -> tuple[np.ndarray, int]:
    """(position along the line of each chip of group 0 in mesh order, the physical dim)."""
    coords = order.topo.coords[order.groups(axis)[0]]
    varying = [d for d in range(order.topo.ndim) if len(set(coords[:, d])) > 1]
    if len(varying) != 1:
        raise ValueError(f"axis {axis!r} spans dims {varying}: ring_svg draws one line of chips")
    return coords[:, varying[0]], varying[0]


def _arc(x0, x1, y, hops, colour) -> str:
    mid, rise = (x0 + x1) / 2, 10 + 9 * hops
    return (f'<path d="M{x0},{y} Q{mid},{y - 2 * rise} {x1},{y}" fill="none" stroke="{colour}" '
            f'stroke-width="2"/><text x="{mid}" y="{y - rise - 4}" font-size="11" '
            f'text-anchor="middle">{hops}</text>')  # fmt: skip


def _row(label, pos, y) -> list[str]:
    n = len(pos)
    out = [f'<text x="8" y="{y + 4}" font-size="13">{html.escape(label)}</text>']
    for i in range(n):
        a, b = int(pos[i]), int(pos[(i + 1) % n])
        colour = "#e4002b" if abs(a - b) > 2 else "#2171b5"
        out.append(_arc(LEFT + STEP * min(a, b), LEFT + STEP * max(a, b), y, abs(a - b), colour))
    for p in range(n):
        out.append(f'<circle cx="{LEFT + STEP * p}" cy="{y}" r="9" fill="#c7e9c0" stroke="#333"/>')
        mesh_index = int(np.nonzero(pos == p)[0][0])
        out.append(f'<text x="{LEFT + STEP * p}" y="{y + 24}" font-size="11" '
                   f'text-anchor="middle">{mesh_index}</text>')  # fmt: skip
    return out


def ring_svg(orders: dict[str, DeviceOrder], axis: str) -> str:
    """One row per order: chips of group 0 along their dim (number = mesh position), ring edges
    as arcs labelled with hops (red when longer than a folded ring's 2)."""
    rows, width = [], LEFT
    for k, (label, order) in enumerate(orders.items()):
        pos, dim = _line(order, axis)
        rows += _row(label, pos, TOP + ROW * (k + 1) - 30)
        width = max(width, LEFT + STEP * len(pos))
    height, width = TOP + ROW * len(orders), max(width, 600)
    caption = f"mesh axis {axis!r}, group 0 along dim {dim} (numbers: mesh position); arcs: hops"
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif"><text x="8" y="16" font-size="12">{html.escape(caption)}'
            "</text>")  # fmt: skip
    return head + "".join(rows) + "</svg>"
