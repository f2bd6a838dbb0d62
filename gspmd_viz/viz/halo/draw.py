"""The halo-exchange view: an image split into device tiles, replaying the halo plans.

``scene(...)`` computes everything once from `gv.halo_plan` (one plan per spatial dim) and the
collective-permutes `halo_permutes` records; ``svg(sc, step)`` draws one step of it:

    split -> pad -> one frame per collective-permute -> windows -> output

Devices are drawn apart ("exploded"), each box holding its own shard plus the halo strips it
receives, coloured by the device they come from; arrows are the permute's (source, target)
pairs with the bytes each link carries. A 1-D signal is an image one row high. Frames only read
the scene; `HaloWidget` (halo/widget.py) is a step index over it plus the controls.
"""

from __future__ import annotations

import colorsys
import dataclasses

import numpy as np

from gspmd_viz.core.halo.arithmetic import HaloPlan, halo_plan, padding_for
from gspmd_viz.core.halo.exchange import HaloPermute, SpatialSplit, halo_permutes
from gspmd_viz.units import format_bytes

GAP = 2  # cells between device boxes
MAX_WIDTH, MAX_HEIGHT = 860.0, 420.0  # px the boxes may fill
LABELLED_LINKS = 16  # arrows that carry a bytes label (every link of one permute sends as much)


@dataclasses.dataclass(frozen=True, eq=False)
class Scene:
    plans: tuple[HaloPlan, HaloPlan]  # rows (dim 0), columns (dim 1)
    permutes: tuple[HaloPermute, ...]

    @property
    def steps(self) -> tuple[str, ...]:
        perms = [f"exchange {i + 1}/{len(self.permutes)}" for i in range(len(self.permutes))]
        return ("split", "pad", *perms, "windows", "output")

    @property
    def grid(self) -> tuple[int, int]:
        return self.plans[0].shards, self.plans[1].shards

    def devices(self):
        """(device id, row shard, column shard), row-major over the tile grid."""
        rows, cols = self.grid
        return [(iy * cols + ix, iy, ix) for iy in range(rows) for ix in range(cols)]

    def bytes_sent(self) -> dict[int, int]:
        """Bytes each device sends over the whole exchange."""
        sent = dict.fromkeys(range(self.grid[0] * self.grid[1]), 0)
        for p in self.permutes:
            senders = {src for src, _ in p.transfer.pairs}
            for dev, iy, ix in self.devices():
                sent[dev] += p.bytes_per_sender * ((iy, ix)[p.split.dim] in senders)
        return sent


def _plan(size, shards, kernel, stride, dilation, base_dilation, padding) -> HaloPlan:
    pads = padding_for(padding, size, kernel, stride, dilation)
    return halo_plan(size, shards, kernel, stride, dilation, base_dilation, pads)


def scene(image=(12, 16), kernel=3, stride=1, dilation=1, base_dilation=1, padding="SAME",
          shards=(2, 4)) -> Scene:  # fmt: skip
    """Plans for a square `kernel` on an image of `image` = (rows, columns) split over
    `shards` = (row shards, column shards); an image one row high is a 1-D signal."""
    rows, cols = image
    if rows == 1 and shards[0] != 1:
        raise ValueError("a 1-D signal (one row) cannot split its rows: use 1 row shard")
    args = (kernel, stride, dilation, base_dilation, padding)
    col = _plan(cols, shards[1], *args)
    row = halo_plan(1, 1, 1) if rows == 1 else _plan(rows, shards[0], *args)
    splits = [SpatialSplit(0, "rows", row), SpatialSplit(1, "columns", col)]
    local = (row.shard_size, col.shard_size)
    return Scene((row, col), halo_permutes(splits, local, np.float32))


# ----- geometry: cells of one dim -> drawing units ------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Axis:
    plan: HaloPlan
    before: int  # cells drawn before each own shard (widest left halo)
    width: int  # cells of a device's slot
    per_shard: int  # elements each box holds: input elements, or output windows

    @classmethod
    def of(cls, plan: HaloPlan) -> _Axis:
        n, before = plan.shard_size, max(0, *plan.left)
        return cls(plan, before, before + n + max(0, *plan.right), n)

    @classmethod
    def of_output(cls, plan: HaloPlan) -> _Axis:
        c = plan.windows_per_shard
        return cls(plan, 0, c, c)

    def at(self, shard: int, element: float) -> float:
        """Drawing cell of global `element` in shard `shard`'s box."""
        return shard * (self.width + GAP - self.per_shard) + self.before + element

    @property
    def total(self) -> int:
        return self.plan.shards * (self.width + GAP) - GAP


def colour(device: int, devices: int, light: bool = True) -> str:
    r, g, b = colorsys.hls_to_rgb(device / max(devices, 1), 0.78 if light else 0.38, 0.6)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


class _SvgCanvas:
    """A list of SVG elements in cell units, scaled once at the end."""

    def __init__(self, cell: float):
        self.cell, self.items = cell, []

    def rect(self, x0, x1, y0, y1, fill, stroke="none", extra=""):
        c = self.cell
        self.items.append(
            f'<rect x="{x0 * c:.1f}" y="{y0 * c:.1f}" width="{(x1 - x0) * c:.1f}" '
            f'height="{(y1 - y0) * c:.1f}" fill="{fill}" stroke="{stroke}" {extra}/>'
        )

    def text(self, x, y, words, size=11, extra=""):
        c = self.cell
        self.items.append(
            f'<text x="{x * c:.1f}" y="{y * c:.1f}" font-size="{size}" {extra}>{words}</text>'
        )

    def arrow(self, a, b, label):
        c = self.cell
        (x0, y0), (x1, y1) = a, b
        self.items.append(
            f'<line x1="{x0 * c:.1f}" y1="{y0 * c:.1f}" x2="{x1 * c:.1f}" y2="{y1 * c:.1f}" '
            'stroke="#222" stroke-width="1.5" marker-end="url(#head)"/>'
        )
        if label:
            mid = ((x0 + x1) / 2, (y0 + y1) / 2)
            self.text(mid[0], mid[1] - 0.3, label, 10, 'text-anchor="middle" fill="#111"')

    def svg(self, width: float, height: float) -> str:
        c = self.cell
        defs = (
            '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" '
            'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#222"/></marker>'
            '<pattern id="pad" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f2f2f2"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#aaa" stroke-width="2"/></pattern>'
            f'<pattern id="cells" width="{c:.2f}" height="{c:.2f}" patternUnits="userSpaceOnUse">'
            f'<rect width="{c:.2f}" height="{c:.2f}" fill="none" stroke="#0002" '
            'stroke-width="0.6"/></pattern></defs>'
        )
        body = "".join(self.items)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * c:.0f}" '
            f'height="{height * c:.0f}" font-family="sans-serif">{defs}{body}</svg>'
        )

    def dot(self, x, y, fill):
        c = self.cell
        r = max(1.5, c * 0.16)
        self.items.append(f'<circle cx="{x * c:.1f}" cy="{y * c:.1f}" r="{r:.1f}" fill="{fill}"/>')


# ----- one frame --------------------------------------------------------------------------
def _cell(width: float, height: float) -> float:
    return max(3.0, min(28.0, MAX_WIDTH / width, MAX_HEIGHT / height))


def _extent(axis: _Axis, i: int, rng: range) -> tuple[float, float]:
    return axis.at(i, rng.start), axis.at(i, rng.stop)


def _own(axis: _Axis, i: int) -> range:
    n = axis.plan.shard_size
    return range(n * i, n * (i + 1))


def _padding_parts(rng: range, size: int) -> list[range]:
    """The parts of `rng` outside [0, size): what windows read as padding."""
    parts = [range(rng.start, min(0, rng.stop)), range(max(size, rng.start), rng.stop)]
    return [p for p in parts if len(p) > 0]


def _outside(own: range, needs: range) -> list[range]:
    """The parts of `own` that `needs` leaves out."""
    parts = [
        range(own.start, min(own.stop, needs.start)),
        range(max(own.start, needs.stop), own.stop),
    ]
    return [p for p in parts if len(p) > 0]


def _pad_rects(cv: _SvgCanvas, axes, iy: int, ix: int, rows: range, cols: range):
    """Hatch the parts of the box rows x cols outside the image (padding, uneven filler)."""
    ay, ax = axes
    ry, rx = _extent(ay, iy, rows), _extent(ax, ix, cols)
    for part in _padding_parts(cols, ax.plan.size):
        cv.rect(*_extent(ax, ix, part), *ry, "url(#pad)")
    for part in _padding_parts(rows, ay.plan.size):
        cv.rect(*rx, *_extent(ay, iy, part), "url(#pad)")


def _draw_box(cv: _SvgCanvas, sc: Scene, axes, dev: int, iy: int, ix: int, ready: bool):
    ay, ax = axes
    oy, ox = _extent(ay, iy, _own(ay, iy)), _extent(ax, ix, _own(ax, ix))
    cv.rect(*ox, *oy, colour(dev, len(sc.devices())))
    _pad_rects(cv, axes, iy, ix, _own(ay, iy), _own(ax, ix))
    if ready:  # a negative halo trims the shard: the elements no window reads fade
        rows, cols = _own(ay, iy), _own(ax, ix)
        keep = range(
            max(cols.start, ax.plan.needs[ix].start), min(cols.stop, ax.plan.needs[ix].stop)
        )
        for part in _outside(cols, ax.plan.needs[ix]):
            cv.rect(*_extent(ax, ix, part), *oy, "white", extra='fill-opacity="0.6"')
        for part in _outside(rows, ay.plan.needs[iy]):
            if keep:
                cv.rect(*_extent(ax, ix, keep), *_extent(ay, iy, part), "white",
                        extra='fill-opacity="0.6"')  # fmt: skip
    cv.rect(*ox, *oy, "none", "#555")


def _overlay(cv: _SvgCanvas, sc: Scene, axes, dev: int, iy: int, ix: int, ready: bool):
    """Padding hatch, cell grid, dashed window-ready outline and the device's name."""
    ay, ax = axes
    dark = colour(dev, len(sc.devices()), False)
    rows, cols = (ay.plan.needs[iy], ax.plan.needs[ix]) if ready else (_own(ay, iy), _own(ax, ix))
    ry, rx = _extent(ay, iy, rows), _extent(ax, ix, cols)
    if ready:
        _pad_rects(cv, axes, iy, ix, rows, cols)
        cv.rect(*rx, *ry, "url(#cells)", dark, 'stroke-dasharray="4 3" stroke-width="1.5"')
    else:
        cv.rect(*rx, *ry, "url(#cells)", "#555")
    top = min(ry[0], _extent(ay, iy, _own(ay, iy))[0])
    cv.text(min(rx[0], _extent(ax, ix, _own(ax, ix))[0]), top - 0.35, f"d{dev}", 10,
            f'fill="{dark}"')  # fmt: skip


def _piece(sc: Scene, axes, p: HaloPermute, src: int, dst: int, other: int, at_source: bool):
    """(x0, x1, y0, y1) of a permute's piece in the source's or the receiver's box."""
    d, t = p.split.dim, p.transfer
    axis, cross = axes[d], axes[1 - d]
    n = axis.plan.shard_size
    if at_source:
        along = (axis.at(src, n * src + t.lo), axis.at(src, n * src + t.hi))
    else:
        along = (axis.at(dst, n * src + t.lo), axis.at(dst, n * src + t.hi))  # lands in place
    rows = cross.plan.needs[other] if d == 1 else _own(cross, other)  # rows already exchanged
    if d == 1:
        rows = range(rows.start, rows.start + cross.plan.ready_size)
    across = _extent(cross, other, rows)
    return along + across if d == 1 else across + along


def _links(sc: Scene, p: HaloPermute):
    """(source device, target device, source shard, target shard, other shard) per link."""
    d = p.split.dim
    for other in range(sc.grid[1 - d]):
        for src, dst in p.transfer.pairs:
            ids = [(other, src), (other, dst)] if d == 1 else [(src, other), (dst, other)]
            devs = [iy * sc.grid[1] + ix for iy, ix in ids]
            yield devs[0], devs[1], src, dst, other


def _draw_received(cv: _SvgCanvas, sc: Scene, axes, p: HaloPermute):
    n_dev = len(sc.devices())
    for sdev, _, src, dst, other in _links(sc, p):
        box = _piece(sc, axes, p, src, dst, other, at_source=False)
        cv.rect(*box, colour(sdev, n_dev), colour(sdev, n_dev, False), 'stroke-width="0.8"')


def _draw_arrows(cv: _SvgCanvas, sc: Scene, axes, p: HaloPermute):
    label = format_bytes(p.bytes_per_sender)
    for k, (_, _, src, dst, other) in enumerate(_links(sc, p)):
        if k == LABELLED_LINKS:
            label = ""  # the rest carry the same bytes: the caption says so
        a = _piece(sc, axes, p, src, dst, other, at_source=True)
        b = _piece(sc, axes, p, src, dst, other, at_source=False)
        cv.rect(*a, "none", "#111", 'stroke-width="2"')
        centre = [((a[0] + a[1]) / 2, (a[2] + a[3]) / 2), ((b[0] + b[1]) / 2, (b[2] + b[3]) / 2)]
        cv.arrow(centre[0], centre[1], label)


def _taps(plan: HaloPlan, window: int) -> list[int]:
    """Input elements a window's taps land on (holes of the base dilation skipped)."""
    pl, bd = plan.padding[0], plan.base_dilation
    spots = [plan.stride * window + t * plan.dilation for t in range(plan.window)]
    return [(q - pl) // bd for q in spots if (q - pl) % bd == 0]


def _draw_windows(cv: _SvgCanvas, sc: Scene, axes, dev: int, iy: int, ix: int):
    ay, ax = axes
    wy, wx = ay.plan.windows[iy], ax.plan.windows[ix]
    if not wy or not wx:
        return
    dark = colour(dev, len(sc.devices()), False)
    for j, style in ((0, 'stroke-width="2.5"'), (-1, 'stroke-dasharray="3 2"')):
        spans = (ax.plan.elements_under(wx[j]), ay.plan.elements_under(wy[j]))
        cv.rect(*_extent(ax, ix, spans[0]), *_extent(ay, iy, spans[1]), "none", dark, style)
    for ky in _taps(ay.plan, wy[0]):
        for kx in _taps(ax.plan, wx[0]):
            cv.dot(ax.at(ix, kx + 0.5), ay.at(iy, ky + 0.5), dark)


def _output_svg(sc: Scene) -> str:
    ay, ax = (_Axis.of_output(p) for p in sc.plans)
    cv = _SvgCanvas(_cell(ax.total + 2, ay.total + GAP + 1))
    cv.items.append(f'<g transform="translate({cv.cell:.1f},{GAP * cv.cell:.1f})">')
    for dev, iy, ix in sc.devices():
        c = (ay.plan.windows_per_shard, ax.plan.windows_per_shard)
        full = _extent(ay, iy, range(c[0] * iy, c[0] * (iy + 1)))
        fx = _extent(ax, ix, range(c[1] * ix, c[1] * (ix + 1)))
        cv.rect(*fx, *full, "url(#pad)")
        real = _extent(ay, iy, ay.plan.windows[iy]), _extent(ax, ix, ax.plan.windows[ix])
        cv.rect(*real[1], *real[0], colour(dev, len(sc.devices())))
        cv.rect(*fx, *full, "url(#cells)", "#555")
        cv.text(fx[0], full[0] - 0.35, f"d{dev}", 10)
    cv.items.append("</g>")
    return cv.svg(ax.total + 2, ay.total + GAP + 1)


def svg(sc: Scene, step: int) -> str:
    """Step `step` of `sc.steps` as an SVG string."""
    names = sc.steps
    if not 0 <= step < len(names):
        raise ValueError(f"step must be in 0..{len(names) - 1}, got {step}")
    if names[step] == "output":
        return _output_svg(sc)
    axes = _Axis.of(sc.plans[0]), _Axis.of(sc.plans[1])
    cv = _SvgCanvas(_cell(axes[1].total + 2, axes[0].total + GAP + 1))
    cv.items.append(f'<g transform="translate({cv.cell:.1f},{GAP * cv.cell:.1f})">')
    done = min(max(step - 1, 0), len(sc.permutes))  # permutes shown as received
    for dev, iy, ix in sc.devices():
        _draw_box(cv, sc, axes, dev, iy, ix, ready=step > 0)
    for p in sc.permutes[:done]:
        _draw_received(cv, sc, axes, p)
    for dev, iy, ix in sc.devices():
        _overlay(cv, sc, axes, dev, iy, ix, ready=step > 0)
        if names[step] == "windows":
            _draw_windows(cv, sc, axes, dev, iy, ix)
    if names[step].startswith("exchange"):
        _draw_arrows(cv, sc, axes, sc.permutes[step - 2])
    cv.items.append("</g>")
    return cv.svg(axes[1].total + 2, axes[0].total + GAP + 1)
