"""Layout figure: which device holds which block of an array of any rank.

The last two tensor dims are drawn as a grid of blocks (a 1-D array is one row); leading dims
become facets, one per block along them (4-D: a grid of facets). Every block is coloured by its
shard and labelled with the devices holding it, so replication shows as several devices on one
block. Padding of uneven shards is greyed and hatched. A bar panel below gives each device's
bytes, coloured like the block it holds. Unlike jax.debug.visualize_array_sharding this works
for any rank and for thousands of devices (labels give way to hover text when blocks get small).
"""

import functools
import json
from itertools import product

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.viz.arrays.blocks import Block, blocks, device_label, summary


def _palette(hues: int = 16, stride: int = 5) -> list[str]:
    """64 distinct soft colours (16 hues x 4 tones) for dark text; consecutive shards are 5
    hues apart, so neighbours never look alike. Beyond 64 shards colours repeat."""
    tones = ((70, 82), (55, 70), (60, 90), (45, 62))  # (saturation %, lightness %)
    return [
        f"hsl({(i * stride % hues) * 360 // hues},{sat}%,{light}%)"
        for sat, light in tones
        for i in range(hues)
    ]


PALETTE = _palette()
MAX_FACETS = 8  # per leading dim; more blocks than this are summarised in the facet title
MAX_LABELS = 64  # cells per facet that still get a printed device label
PAD_FILL = "rgba(120,120,120,0.55)"


def _device_colorscale() -> list:
    n = len(PALETTE)
    scale = []
    for i, colour in enumerate(PALETTE):
        scale += [[i / n, colour], [(i + 1) / n, colour]]
    return scale


def _facets(tiles: tuple[int, ...], lead: int) -> list[tuple[int, ...]]:
    """Block indices along the leading dims that get a facet (at most MAX_FACETS each)."""
    return list(product(*[range(min(t, MAX_FACETS)) for t in tiles[:lead]]))


def _numbers(cells: list[Block], tiles) -> np.ndarray:
    """[cells] each block's palette colour: its shard number in C order, folded. Beyond 64
    shards every fold turns the hues by 8 (opposite ones), so a 64-wide grid's rows differ and
    never show as stripes along one dim."""
    index = np.array([b.index for b in cells]).reshape(len(cells), len(tiles))
    number = np.ravel_multi_index(index.T, tiles)
    return (number + 8 * (number // len(PALETTE))) % len(PALETTE)


def _block_grid(cells: list[Block], tiles, ndim: int, itemsize: int, hover: bool) -> dict:
    """Heatmap arrays for one facet: rows = blocks of dim -2 (or one row), cols = dim -1;
    per-block hover text only when asked (small facets)."""
    n_rows = tiles[-2] if ndim >= 2 else 1
    rows = [b.index[-2] if ndim >= 2 else 0 for b in cells]
    cols = [b.index[-1] for b in cells]
    z = np.zeros((n_rows, tiles[-1]))
    z[rows, cols] = _numbers(cells, tiles)
    text = np.empty((n_rows, tiles[-1]), dtype=object)
    text[rows, cols] = _objects(device_label(b.devices, limit=4) for b in cells)
    notes = None
    if hover:
        notes = np.empty((n_rows, tiles[-1]), dtype=object)
        notes[rows, cols] = _objects(
            f"block {b.box()}<br>devices {device_label(b.devices, limit=12)}"
            f"<br>{b.size * itemsize} B data + {b.padding * itemsize} B padding"
            for b in cells
        )
    return {"z": z, "text": text, "hover": notes}


def _objects(items) -> np.ndarray:
    """A 1-D object array (strings stay whole when assigned into a grid)."""
    items = list(items)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _edges(sharding: Sharding, shape, dim: int) -> list[int]:
    """Block boundaries along one dim in padded element coordinates."""
    k = sharding.shard_shape(shape)[dim]
    return [i * k for i in range(sharding.dim_shards(dim) + 1)]


def _padding_rects(shape, padded) -> list[tuple[float, float, float, float]]:
    """Rectangles (x0, x1, y0, y1) of the padded area beyond the real array, in one facet."""
    ndim = len(shape)
    rows = (shape[-2], padded[-2]) if ndim >= 2 else (1, 1)
    rects = []
    if padded[-1] > shape[-1]:
        rects.append((shape[-1], padded[-1], 0, rows[1]))
    if rows[1] > rows[0]:
        rects.append((0, shape[-1], rows[0], rows[1]))
    return rects


def _facet_title(sharding: Sharding, shape, key: tuple[int, ...]) -> str:
    parts = []
    for d, i in enumerate(key):
        k = sharding.shard_shape(shape)[d]
        lo, hi = min(i * k, shape[d]), min((i + 1) * k, shape[d])
        more = sharding.dim_shards(d) - MAX_FACETS
        tail = f" (+{more} more blocks)" if more > 0 and i == MAX_FACETS - 1 else ""
        parts.append(f"dim {d} [{lo}:{hi}]{tail}")
    return ", ".join(parts)


def _figure_height(ndim: int, n_rows: int) -> int:
    return (260 if ndim > 1 else 130) * n_rows + 240 + 90 * n_rows


def _layout_title(sharding: Sharding, shape, dtype, title: str | None) -> dict:
    head, _, tail = summary(sharding, shape, dtype).partition(": ")
    subtitle = f"{tail}; grey hatching = padding"
    return {
        "text": title or head,
        "font": {"size": 16},
        "subtitle": {"text": subtitle, "font": {"size": 13, "color": "#333"}},
    }


def _axis_title(sharding: Sharding, shape, dim: int) -> str:
    axes = sharding.dim_axes(dim)
    how = f"split over {'×'.join(axes)}" if axes else "not split"
    return f"dim {dim} (size {shape[dim]}, {how})"


def layout_figure(sharding: Sharding, shape, dtype="float32", title: str | None = None):
    """Plotly figure of the blocks of an array of `shape` under `sharding` (rank 1 to 4+)."""
    # plain dicts, unvalidated: plotly's property validation took ~200 ms of a ~250 ms redraw
    # (test_viz_arrays checks that validating the result changes nothing)
    return go.Figure(layout_dict(sharding, shape, dtype, title), _validate=False)


def layout_dict(sharding: Sharding, shape, dtype="float32", title: str | None = None) -> dict:
    """`layout_figure` as plotly's plain {"data", "layout"} dict (numpy arrays inside): what a
    widget sends without the figure's deep copy (~100 ms for 4096 devices)."""
    shape = tuple(int(n) for n in shape)
    ndim, tiles = len(shape), sharding.tiles(len(shape))
    itemsize = np.dtype(dtype).itemsize
    lead = max(ndim - 2, 0)
    facets = _facets(tiles, lead)
    n_cols = min(tiles[lead - 1], MAX_FACETS) if lead else 1
    n_rows = len(facets) // n_cols
    skeleton, axes = _subplot_grid(n_rows, n_cols, ndim)
    layout = json.loads(skeleton)
    if lead:  # subplot titles, facet by facet
        for note, key in zip(layout["annotations"], facets, strict=True):
            note["text"] = _facet_title(sharding, shape, key)
    data: list[dict] = []
    all_blocks = blocks(sharding, shape)
    padded = tuple(sharding.shard_shape(shape)[d] * tiles[d] for d in range(ndim))
    for f, key in enumerate(facets):
        row, col = f // n_cols + 1, f % n_cols + 1
        cells = [b for b in all_blocks if b.index[:lead] == key]
        facet = _Panel(data, layout, *axes[row, col])
        _draw_facet(facet, sharding, shape, padded, cells, col, itemsize, row == n_rows)
    _draw_bytes(_Panel(data, layout, *axes[n_rows + 1, 1]), sharding, all_blocks, tiles, itemsize)
    layout.update(
        title=_layout_title(sharding, shape, dtype, title),
        height=_figure_height(ndim, n_rows),
        width=max(640, min(1200, 260 * n_cols + 120)),
        margin={"l": 60, "r": 20, "t": 100, "b": 50},
        plot_bgcolor="white",
        showlegend=False,
    )
    return {"data": data, "layout": layout}


@functools.lru_cache(maxsize=64)
def _subplot_grid(n_rows: int, n_cols: int, ndim: int) -> tuple[str, dict]:
    """make_subplots' layout (JSON; facet titles as placeholders) and each subplot's axes:
    facets in n_rows x n_cols, the bytes panel spanning the row beneath."""
    grid = make_subplots(
        rows=n_rows + 1,
        cols=n_cols,
        specs=[[{}] * n_cols] * n_rows + [[{"colspan": n_cols}] + [None] * (n_cols - 1)],
        row_heights=[1.0] * n_rows + [0.45 * max(1, n_rows) ** 0.5],
        subplot_titles=["facet"] * (n_rows * n_cols) if ndim > 2 else None,
        vertical_spacing=90 / _figure_height(ndim, n_rows),
        horizontal_spacing=min(0.06, 0.3 / n_cols),
    )
    cells = [(r, c) for r in range(1, n_rows + 1) for c in range(1, n_cols + 1)]
    axes = {}
    for row, col in [*cells, (n_rows + 1, 1)]:
        sub = grid.get_subplot(row, col)
        axes[row, col] = (sub.xaxis.plotly_name, sub.yaxis.plotly_name)
    return grid.layout.to_json(), axes


class _Panel:
    """One subplot of a figure being built as dicts: add traces to it, set its axes."""

    def __init__(self, data: list, layout: dict, xaxis: str, yaxis: str):
        self.data, self.layout, self.xaxis, self.yaxis = data, layout, xaxis, yaxis

    def add(self, kind: str, **trace) -> None:
        """A trace; properties given as None are left unset (plotly's meaning of None)."""
        ref = {"xaxis": "x" + self.xaxis[5:], "yaxis": "y" + self.yaxis[5:]}  # xaxis3 -> x3
        self.data.append({"type": kind, **_set(trace), **ref})

    def axes(self, x: dict, y: dict) -> None:
        """Set the axes; fixed margins (the template's automargin made plotly.js lay the
        figure out twice per draw: ~45 of ~70 ms for 8 devices)."""
        self.layout[self.xaxis].update(_set(x), automargin=False)
        self.layout[self.yaxis].update(_set(y), automargin=False)


def _set(props: dict) -> dict:
    return {k: v for k, v in props.items() if v is not None}


def _draw_facet(panel, sharding, shape, padded, cells, col, itemsize, bottom) -> None:
    ndim, tiles = len(shape), sharding.tiles(len(shape))
    labels = (tiles[-2] if ndim >= 2 else 1) * tiles[-1] <= MAX_LABELS
    grid = _block_grid(cells, tiles, ndim, itemsize, hover=labels)
    x = _edges(sharding, shape, ndim - 1)
    y = _edges(sharding, shape, ndim - 2) if ndim >= 2 else [0, 1]
    panel.add(
        "heatmap",
        z=grid["z"],
        x=x,
        y=y,
        text=grid["text"],
        # big facets hover the device list only: the long per-block text would cost the
        # 4096-device frame ~0.5 MB
        customdata=grid["hover"],
        hovertemplate=("%{customdata}" if labels else "devices %{text}") + "<extra></extra>",
        colorscale=_device_colorscale(),
        zmin=-0.5,
        zmax=len(PALETTE) - 0.5,
        showscale=False,
        xgap=1.5 if labels else 0,
        ygap=1.5 if labels else 0,
    )
    _draw_padding(panel, shape, padded)
    if labels:  # drawn last, so padding hatching never covers a device label
        panel.add("scatter", **_labels(cells, ndim))
    x_axis = {"range": [0, x[-1]], "tickvals": x if len(x) <= 17 else None, "showgrid": False}
    y_axis = {"range": [y[-1], 0], "tickvals": y if len(y) <= 17 else None, "showgrid": False,
              "showticklabels": ndim >= 2}  # fmt: skip
    if bottom:
        x_axis["title"] = {"text": _axis_title(sharding, shape, ndim - 1)}
    if ndim >= 2 and col == 1:
        y_axis["title"] = {"text": _axis_title(sharding, shape, ndim - 2)}
    panel.axes(x_axis, y_axis)


def _draw_padding(panel, shape, padded) -> None:
    """Hatch the padding an uneven split adds on the right of each dim."""
    for x0, x1, y0, y1 in _padding_rects(shape, padded):
        panel.add(
            "scatter",
            x=[x0, x1, x1, x0, x0],
            y=[y0, y0, y1, y1, y0],
            mode="lines",
            fill="toself",
            line={"width": 0},
            fillcolor=PAD_FILL,
            fillpattern={"shape": "/", "fgcolor": "white", "bgcolor": PAD_FILL, "size": 8},
            hoverinfo="skip",
            name="padding",
        )


def _labels(cells: list[Block], ndim: int) -> dict:
    """Device labels at the centre of each block's real data (of its padding if it has none)."""

    def centre(b: Block, d: int) -> float:
        stop = b.stop[d] if b.stop[d] > b.start[d] else b.padded_stop[d]
        return (b.start[d] + stop) / 2

    return {
        "x": [centre(b, ndim - 1) for b in cells],
        "y": [centre(b, ndim - 2) if ndim >= 2 else 0.5 for b in cells],
        "text": [device_label(b.devices, limit=4) for b in cells],
        "mode": "text",
        "textfont": {"size": 12, "color": "#111"},
        "hoverinfo": "skip",
        "name": "device labels",
    }


def _draw_bytes(panel, sharding, all_blocks, tiles, itemsize) -> None:
    """Bar per device: bytes of real data it holds, coloured like its block; hover gives the
    block's extent from numbers (customdata [devices, 2 * ndim]: start, stop per dim)."""
    owner = np.empty(sharding.mesh.size, dtype=int)  # [devices] -> index into all_blocks
    for k, b in enumerate(all_blocks):
        owner[list(b.devices)] = k
    start = np.array([b.start for b in all_blocks]).reshape(len(all_blocks), len(tiles))
    stop = np.array([b.stop for b in all_blocks]).reshape(start.shape)
    extent = np.stack([start, stop], axis=-1).reshape(len(all_blocks), -1)[owner]
    cd = "%{{customdata[{}]}}"
    box = ", ".join(f"{cd.format(2 * d)}:{cd.format(2 * d + 1)}" for d in range(len(tiles)))
    devices = list(range(sharding.mesh.size))
    panel.add(
        "bar",
        x=np.arange(len(devices)),
        y=(np.prod(stop - start, axis=1) * itemsize)[owner],
        marker={  # colour numbers through the blocks' colour scale: no 4096 colour strings
            "color": _numbers(all_blocks, tiles)[owner],
            "colorscale": _device_colorscale(),
            "cmin": -0.5,
            "cmax": len(PALETTE) - 0.5,
            "line": {"width": 0.5 if len(devices) <= 256 else 0, "color": "#555"},
        },
        customdata=extent,
        hovertemplate=f"device %{{x}}: %{{y}} B of block [{box}]<extra></extra>",
        name="bytes",
    )
    x_axis = {"title": {"text": "device id"}, "range": [-0.5, len(devices) - 0.5],
              **_device_ticks(len(devices))}  # fmt: skip
    panel.axes(x_axis, {"title": {"text": "bytes of data"}, "rangemode": "tozero"})


def _device_ticks(n: int) -> dict:
    """Every device id up to 16 devices, else every 2^k-th (at most 16 labels), upright:
    plotly.js measures each label, and 64 of them took ~150 of a ~250 ms draw."""
    step = 1
    while n / step > 16:
        step *= 2
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickangle": 0}
