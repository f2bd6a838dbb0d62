"""Follow the action in a big graphviz drawing: a focus window and a minimap from one SVG.

Graphviz lays the whole program out once per frame; `node_boxes` reads where each node landed
(in the SVG's own coordinates), `focus_svg` crops the drawing to the box around some nodes (the
active equation and its neighbours) by rewriting the SVG's viewBox, so they are on screen at
full size whatever the program's length, and `minimap_svg` draws the whole program small, text
stripped, with the focus window outlined on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NODE = re.compile(r'<g id="node\d+" class="node">\s*<title>([^<]+)</title>(.*?)</g>', re.S)
_PAIR = re.compile(r"(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)")
_ELLIPSE = re.compile(r'cx="(-?[\d.]+)" cy="(-?[\d.]+)" rx="([\d.]+)" ry="([\d.]+)"')
_TRANSLATE = re.compile(r'class="graph" transform="[^"]*translate\((-?[\d.]+) (-?[\d.]+)\)"')
_HEAD = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"\s+viewBox="([^"]+)"')


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def union(self, other: Box) -> Box:
        return Box(
            min(self.left, other.left),
            min(self.top, other.top),
            max(self.right, other.right),
            max(self.bottom, other.bottom),
        )

    def grown(self, width: float, height: float, pad: float) -> Box:
        """At least `width` x `height` (centred on this box), with `pad` around the content."""
        w = max(width, self.right - self.left + 2 * pad)
        h = max(height, self.bottom - self.top + 2 * pad)
        cx, cy = (self.left + self.right) / 2, (self.top + self.bottom) / 2
        return Box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)

    def contains(self, other: Box) -> bool:
        return (
            self.left <= other.left
            and self.top <= other.top
            and other.right <= self.right
            and other.bottom <= self.bottom
        )


def node_boxes(svg_text: str) -> dict[str, Box]:
    """Graphviz node name (`e12`, `in0`) -> its bounding box in the SVG's viewBox units."""
    shift = _TRANSLATE.search(svg_text)
    dx, dy = (float(shift.group(1)), float(shift.group(2))) if shift else (0.0, 0.0)
    boxes = {}
    for name, body in _NODE.findall(svg_text):
        xs, ys = [], []
        for x, y in _PAIR.findall(body):
            xs.append(float(x))
            ys.append(float(y))
        for cx, cy, rx, ry in _ELLIPSE.findall(body):
            xs += [float(cx) - float(rx), float(cx) + float(rx)]
            ys += [float(cy) - float(ry), float(cy) + float(ry)]
        if xs:
            boxes[name] = Box(min(xs) + dx, min(ys) + dy, max(xs) + dx, max(ys) + dy)
    return boxes


def window(svg_text: str, nodes, width: float, height: float, zoom_out: float = 2.0) -> Box | None:
    """A box of at least width x height around the first of `nodes` (the one to follow) and as
    many of the others as fit in `zoom_out` times that size, kept inside the drawing when it
    fits; None when the first node is not drawn."""
    boxes = node_boxes(svg_text)
    nodes = list(nodes)
    if not nodes or nodes[0] not in boxes:
        return None
    box = boxes[nodes[0]]
    for name in nodes[1:]:
        wider = box.union(boxes[name]) if name in boxes else box
        if (
            wider.right - wider.left <= zoom_out * width
            and wider.bottom - wider.top <= zoom_out * height
        ):
            box = wider
    return _inside(box.grown(width, height, pad=12), full_box(svg_text))


def _inside(box: Box, whole: Box) -> Box:
    """`box` shifted into `whole` along each axis where it fits."""
    dx = dy = 0.0
    if box.right - box.left <= whole.right - whole.left:
        dx = max(whole.left - box.left, 0) + min(whole.right - box.right, 0)
    if box.bottom - box.top <= whole.bottom - whole.top:
        dy = max(whole.top - box.top, 0) + min(whole.bottom - box.bottom, 0)
    return Box(box.left + dx, box.top + dy, box.right + dx, box.bottom + dy)


def _with_view(svg_text: str, box: Box, width: str, height: str) -> str:
    view = f"{box.left:.1f} {box.top:.1f} {box.right - box.left:.1f} {box.bottom - box.top:.1f}"
    head = f'<svg width="{width}" height="{height}" viewBox="{view}"'
    return _HEAD.sub(head, svg_text, count=1)


def focus_svg(svg_text: str, box: Box | None, width: int, height: int) -> str:
    """The drawing cropped to `box`, drawn `width` x `height` px (scaled down if the box is
    bigger than that); the whole drawing when there is nothing to follow."""
    if box is None:
        return svg_text
    return _with_view(svg_text, box, f"{width}px", f"{height}px")


def full_box(svg_text: str) -> Box:
    head = _HEAD.search(svg_text)
    x, y, w, h = (float(t) for t in head.group(3).split())
    return Box(x, y, x + w, y + h)


def minimap_svg(svg_text: str, box: Box | None, width: int, height: int) -> str:
    """The whole drawing fitted into `width` x `height` px, without text, the focus `box`
    outlined in blue."""
    whole = full_box(svg_text)
    w, h = max(whole.right - whole.left, 1), max(whole.bottom - whole.top, 1)
    scale = min(width / w, height / h)
    small = re.sub(r"<text[^>]*>.*?</text>\n?", "", svg_text, flags=re.S)
    small = re.sub(r"<!--.*?-->\n?", "", small, flags=re.S)
    small = _with_view(small, whole, f"{w * scale:.0f}px", f"{h * scale:.0f}px")
    if box is None:
        return small
    frame = (
        f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.right - box.left:.1f}" '
        f'height="{box.bottom - box.top:.1f}" fill="#1f77b4" fill-opacity="0.12" '
        f'stroke="#1f77b4" stroke-width="{2 / scale:.1f}"/>'
    )
    return small.replace("</svg>", frame + "</svg>")
