"""A matmul's operands and result, or one array before and after a reshard, as per-device blocks.

Lesson 03 compares the ways of splitting `C = A @ B`. Each array is drawn as its grid of blocks
(`arrays/blocks.py`: the blocks the layout figure draws), each block labelled with the devices that
hold it and coloured by the first of them; the arrow from the operands to the result carries the
collectives the partitioner inserted. A static picture: it reads without a kernel.
"""

from html import escape

from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.viz.arrays.blocks import blocks, device_label
from gspmd_viz.viz.halo.draw import colour

BOX = 110.0  # px: the longest side of each array
GAP = 34.0  # px between the drawings
TOP = 30.0  # px above the arrays for their names
MIN_BLOCK = (15.0, 26.0)  # px: the smallest block height and width drawn
TITLE_CHAR = 6.2  # px: the width of one character of an array's 11 px title, at most


def _text(x: float, y: float, text: str, size: int = 11, anchor: str = "middle") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'font-family="sans-serif">{escape(text)}</text>'
    )


def _array(x: float, name: str, sharding: Sharding, shape) -> tuple[list[str], float, float]:
    """The blocks of a 2-D array drawn at x: (svg items, width, height)."""
    if len(shape) != 2:
        raise ValueError(f"{name}: a matmul operand is 2-D, got shape {tuple(shape)}")
    rows, cols = shape
    tile_rows, tile_cols = sharding.tiles(2)
    scale = BOX / max(rows, cols)
    sy = max(scale, MIN_BLOCK[0] * tile_rows / rows)  # a block stays tall enough to label
    sx = max(scale, MIN_BLOCK[1] * tile_cols / cols)
    width, height = cols * sx, rows * sy
    items = [_text(x, TOP - 8, f"{name}: {sharding.describe(shape, 'float32')}", anchor="start")]
    devices = sharding.mesh.size
    for b in blocks(sharding, shape):
        (r0, c0), (r1, c1) = b.start, b.stop
        bx, by = x + c0 * sx, TOP + r0 * sy
        bw, bh = (c1 - c0) * sx, (r1 - r0) * sy
        items.append(
            f'<rect x="{bx:.1f}" y="{by:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
            f'fill="{colour(b.devices[0], devices)}" stroke="#333" stroke-width="1"/>'
        )
        items.append(_text(bx + bw / 2, by + bh / 2 + 3, device_label(b.devices, limit=2), 9))
    return items, width, height


def _arrow(x0: float, x1: float, y: float, label: str) -> list[str]:
    head = f"{x1 - 7:.1f},{y - 4:.1f} {x1:.1f},{y:.1f} {x1 - 7:.1f},{y + 4:.1f}"
    return [
        f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="#d62728" '
        'stroke-width="2"/>',
        f'<polygon points="{head}" fill="#d62728"/>',
        _text((x0 + x1) / 2, y - 8, label, 10),
    ]


def _picture(before: dict, after: tuple[str, tuple], label: str, width_arrow: float) -> str:
    """`before` = {name: (sharding, shape)} drawn left to right, an arrow carrying `label`, then
    `after` = (name, (sharding, shape)). The picture is as wide as the last title where that is
    wider than its array (a result with pending sums, `f32[4, 512@model]{sum over data}`)."""
    items, x, tallest = [], 0.0, 0.0
    for name, (sharding, shape) in before.items():
        drawn, w, h = _array(x, name, sharding, shape)
        items += drawn
        x, tallest = x + w + GAP, max(tallest, h)
    items += _arrow(x - GAP / 2, x + width_arrow, TOP + tallest / 2, label)
    drawn, w, h = _array(x + width_arrow + GAP / 2, after[0], *after[1])
    total_w, total_h = x + width_arrow + GAP / 2 + w + 4, TOP + max(tallest, h) + 6
    sharding, shape = after[1]
    title = f"{after[0]}: {sharding.describe(shape, 'float32')}"
    total_w = max(total_w, x + width_arrow + GAP / 2 + TITLE_CHAR * len(title) + 4)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="-2 0 {total_w + 2:.0f} {total_h:.0f}">{"".join(items + drawn)}</svg>'
    )


def matmul_svg(arrays: dict[str, tuple[Sharding, tuple]], collectives: str) -> str:
    """SVG of `arrays` = {"A": (sharding, shape), "B": ..., "C": ...} with `collectives` (a
    summary line such as "1 all-reduce; 6.0 KiB per device on the wire") on the arrow to C."""
    if list(arrays) != ["A", "B", "C"]:
        raise ValueError(f"arrays must be A, B and C in that order, got {list(arrays)}")
    before = {k: arrays[k] for k in "AB"}
    return _picture(before, ("C", arrays["C"]), collectives, 240.0)


def reshard_svg(src: Sharding, dst: Sharding, shape, moves: str) -> str:
    """SVG of one array before and after a reshard, `moves` (the plan's collectives) between."""
    return _picture({"before": (src, shape)}, ("after", (dst, shape)), moves, 300.0)
