"""The aggregated view of a big torus: one heatmap per link dim, one for the chips.

A pod of 1024 chips has 4096 links and the multipod 16,320: drawn one by one they make megabytes
of figure per frame. Here each chip is one cell, placed like in the link view (rows = dim 0,
columns = dim 1, 3-D slices in a grid of blocks), and panel d colours the cell by the busier of the
chip's two dim-d links (+ and - direction) in this step. A frame is a few small integer arrays.
"""

from __future__ import annotations

import functools

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gspmd_viz.units import format_bytes
from gspmd_viz.viz.torus.frames import BUSIEST, COLOURS, LEVELS, Frames, positions, twist_note
from gspmd_viz.viz.torus.links import CHIP_SCALE, WIDTH, title, title_extra

CHIP_BAR = {
    "orientation": "h",
    "x": 1,
    "xanchor": "right",
    "y": -0.02,
    "yanchor": "top",
    "len": 0.3,
    "thickness": 10,
    "tickformat": ".0%",
}
SLICES_NOTE = {"x": 0, "xref": "paper", "xanchor": "left", "y": -0.02, "yref": "paper",
               "yanchor": "top", "showarrow": False, "align": "left",
               "font": {"size": 11}}  # fmt: skip
MARK_TIES_UP_TO = 512  # more tied busiest links than this are counted in the title, not marked
_DIM_NAMES = ("columns", "rows", "between slices")


def grid_cells(topo) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """(row, column) of every chip's cell, placed as in the link view, and the grid's size."""
    xy = positions(topo).astype(np.int64)
    rows, cols = -xy[:, 1], xy[:, 0]
    return rows, cols, (int(rows.max()) + 1, int(cols.max()) + 1)


def _level_scale() -> list:
    """Discrete colours for levels 0..LEVELS-1 (zmin -0.5, zmax LEVELS-0.5)."""
    scale = []
    for i, colour in enumerate(COLOURS):
        scale += [[i / LEVELS, colour], [(i + 1) / LEVELS, colour]]
    return scale


def _per_chip_dim(fr: Frames, lv: np.ndarray) -> np.ndarray:
    """[n_chips, ndim] the higher level of each chip's + and - link along each dim."""
    topo = fr.tl.topo
    full = np.zeros(topo.n_link_slots, np.int8)
    full[fr.links] = lv
    return full.reshape(topo.n_chips, topo.ndim, 2).max(axis=2)


def _link_grid(values, rows, cols, shape, dtype):
    z = np.full(shape, np.nan if dtype == np.float32 else 0, dtype)
    z[rows, cols] = values
    return z


def _busiest_marks(fr: Frames, step: int, rows, cols) -> list[go.Scatter]:
    """Red squares on the cells of every link tied for the step's busiest (when few enough)."""
    tied = fr.busiest_at(step) if len(fr) else []
    if not 0 < len(tied) <= MARK_TIES_UP_TO:
        return []
    topo = fr.tl.topo
    ids = fr.links[tied]
    chip, dim = ids // (2 * topo.ndim), (ids // 2) % topo.ndim
    marker = {"symbol": "square-open", "color": BUSIEST, "size": 7, "line": {"width": 2}}
    return [
        go.Scatter(
            x=cols[chip[dim == d]],
            y=rows[chip[dim == d]],
            mode="markers",
            marker=marker,
            name="busiest link",
            hoverinfo="skip",
            showlegend=False,
            **_axes(d),
        )
        for d in range(topo.ndim)
        if (dim == d).any()
    ]


def _axes(i: int) -> dict:
    """Axis references of panel i (make_subplots numbers panels row by row: x, x2, x3, ...)."""
    suffix = str(i + 1) if i else ""
    return {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}


def _panel_grid(shape, n_panels) -> tuple[int, int]:
    """(rows, columns) of panels: wide cell grids stack, the four panels of a 3-D pod go 2x2,
    else side by side."""
    if shape[1] > 2 * shape[0]:
        return n_panels, 1
    return (2, 2) if n_panels == 4 else (1, n_panels)


def _panels(ndim: int, held_label: str, shape) -> go.Figure:
    """An empty figure with one panel per link dim plus the chips (panel i on axes _axes(i))."""
    grid = _panel_grid(shape, ndim + 1)
    names = [f"dim {d} links ({_DIM_NAMES[d]})" for d in range(ndim)]
    if ndim == 1:
        names = ["dim 0 links (the line)"]
    fig = make_subplots(
        rows=grid[0],
        cols=grid[1],
        subplot_titles=[*names, "chips: " + held_label.replace("share of ", "")],
        horizontal_spacing=0.06,
        vertical_spacing=0.08 if grid[1] == 1 else 0.12,
    )
    fig.update_layout(height=_panels_height(shape, grid))
    return fig


@functools.lru_cache(maxsize=32)
def _grid_and_layout(topo, held_label: str) -> tuple[np.ndarray, np.ndarray, tuple, dict]:
    """grid_cells(topo) and the figure's layout but its title, as plain JSON: built once per
    topology, since a frame changes only the cells' values and the title."""
    rows, cols, shape = grid_cells(topo)
    fig = _panels(topo.ndim, held_label, shape)
    fig.update_yaxes(range=[shape[0] - 0.5, -0.5], showticklabels=False, showgrid=False)
    fig.update_xaxes(range=[-0.5, shape[1] - 0.5], showticklabels=False, showgrid=False)
    fig.update_annotations(font_size=12)  # the panel titles
    if topo.ndim == 3:
        fig.add_annotation(**SLICES_NOTE, text=_slices_note(topo))
    margin = {"l": 20, "r": 90, "t": 110, "b": 60}
    fig.update_layout(width=WIDTH, margin=margin, plot_bgcolor="white")
    layout = fig.layout.to_plotly_json()
    layout.pop("template")  # each new figure takes the default template itself: no re-validation
    return rows, cols, shape, layout


def _link_maps(fr: Frames, lv, rows, cols, shape) -> list[go.Heatmap]:
    """One heatmap of load levels per link dim: the busier of each chip's two links."""
    per_dim = _per_chip_dim(fr, lv)
    dtype = np.float32 if fr.tl.topo.ndim == 3 else np.int8  # 3-D grids have gap columns
    ticks = ["idle"] + [f"≤ {format_bytes(b)}" for b in fr.level_bounds()[1:]]
    bar = {
        "tickvals": list(range(LEVELS)),
        "ticktext": ticks,
        "thickness": 12,
        "x": 1.02,
        "lenmode": "pixels",
        "len": 200,
        "title": {"text": "bytes on link"},
    }
    return [
        go.Heatmap(
            z=_link_grid(per_dim[:, d], rows, cols, shape, dtype),
            zmin=-0.5,
            zmax=LEVELS - 0.5,
            colorscale=_level_scale(),
            showscale=d == 0,
            colorbar=bar,
            hoverongaps=False,
            hovertemplate=f"dim {d} links of chip at row %{{y}}, "
            "column %{x}: level %{z}<extra></extra>",
            **_axes(d),
        )
        for d in range(fr.tl.topo.ndim)
    ]


def heatmap_figure(fr: Frames, step: int) -> go.Figure:
    """Step `step` (0-based) of a big torus as per-dim link-load heatmaps plus chip shares."""
    topo = fr.tl.topo
    rows, cols, shape, layout = _grid_and_layout(topo, fr.held_label)
    lv, held = fr.level_at(step), fr.held_after(step)
    chips = _link_grid(np.round(held, 2).astype(np.float32), rows, cols, shape, np.float32)
    hover = "chip at row %{y}, column %{x}: %{z:.0%}<extra></extra>"
    shares = go.Heatmap(z=chips, zmin=0, zmax=1, colorscale=CHIP_SCALE, colorbar=CHIP_BAR,
                        hovertemplate=hover, **_axes(topo.ndim))  # fmt: skip
    traces = [*_link_maps(fr, lv, rows, cols, shape), shares]
    fig = go.Figure([*traces, *_busiest_marks(fr, step, rows, cols)], layout)
    head = title(fr, step)
    margin = {**layout["margin"], "t": layout["margin"]["t"] + 2 * title_extra(head)}  # centred
    fig.update_layout(title={"text": head, "font": {"size": 12}, "x": 0.01}, margin=margin)
    return fig


def _slices_note(topo) -> str:
    n = topo.shape[2]
    note = (f"a cell is one chip; a block is one slice dim 2 = k,<br>k = 0 … {n - 1} "
            "across, then down")  # fmt: skip
    if topo.twisted:  # a cell's wraparound link is its own, wherever it lands
        note += f"<br>{twist_note(topo)};<br>a cell shows the links that leave its chip"
    return note


def _panels_height(shape, grid) -> int:
    """Pixels for a grid of panels whose cells keep the torus's aspect ratio."""
    rows, cols = shape
    panel_w = (WIDTH - 110) / grid[1]
    panel_h = min(600 / grid[0], panel_w * rows / cols)
    return int(max(panel_h, 120) * grid[0] + 60 * (grid[0] - 1)) + 150
