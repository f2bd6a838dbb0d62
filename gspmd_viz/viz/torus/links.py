"""The link view of a small torus: chips on a grid, every link coloured by its bytes in one step.

Used up to LINK_VIEW_CHIPS chips (beyond that heatmap.py aggregates). ``link_figure`` is
the plotly figure the widget shows; ``svg`` draws the same frame as plain SVG, the static figure
a lesson keeps for readers without a kernel.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from gspmd_viz.units import format_bytes, format_time
from gspmd_viz.viz.torus.frames import (
    BUSIEST,
    COLOURS,
    LABEL_ROW_GAP,
    LEVELS,
    Frames,
    twist_note,
)

LINK_VIEW_CHIPS = 256  # 16x16: ~120 kB of figure JSON; bigger tori use the aggregated view
WIDTHS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]
CHIP_SCALE = "Greens"
# drawing direction of + along each dim: 1-D runs across; 2-D/3-D dim 0 down the page, dim 1 across
_AXIS = (np.array([[1.0, 0.0]]), np.array([[0.0, -1.0], [1.0, 0.0]]))
WIDTH = 800  # px: fits a 1024 px JupyterLab window, legend included (it sits below the plot)
TITLE_CHARS = 110  # a title line at font size 12 fits WIDTH


def geometry(fr: Frames) -> tuple[np.ndarray, np.ndarray]:
    """[L, 6] x and y of each link's polyline (NaN = gap), vectorised.

    A link is drawn beside the straight line between its chips (+ and - directions on opposite
    sides); a wraparound link becomes two stubs along its dim: leaving the grid at its source
    chip, re-entering at its destination chip (on a twisted torus, k chips along the long dims
    from where an untwisted one would re-enter). In 3-D a dim-2 link joins two slice blocks; it
    is drawn as a short tick out of its source chip, up-right towards slice k+1 (+) or down-left
    towards slice k-1 (-).
    """
    topo, xy, links, wrap = fr.tl.topo, fr.xy, fr.links, fr.wrap_mask
    src, dim = links // (2 * topo.ndim), (links // 2) % topo.ndim
    p0, p1 = xy[src], xy[topo.link_dst[links]]
    u = p1 - p0
    u /= np.maximum(np.hypot(u[:, 0], u[:, 1]), 1e-9)[:, None]
    tick = (dim == 2) if topo.ndim == 3 else np.zeros(len(links), bool)
    stub = wrap & ~tick
    sign = np.where(links % 2 == 0, 1.0, -1.0)[:, None]  # link ids: even +, odd -
    u[stub] = sign[stub] * _AXIS[topo.ndim > 1][dim[stub]]  # outwards along the link's dim
    side = np.stack([-u[:, 1], u[:, 0]], 1)  # + and - direction links on opposite sides
    a, b = p0 + side * 0.09, p1 + side * 0.09
    nan = np.full_like(a, np.nan)
    straight = np.stack([a, (a + b) / 2, b, nan, nan, nan], 1)
    stubs = np.stack([a, a + 0.45 * u, nan, b - 0.45 * u, b, nan], 1)
    diag = p0 + sign * np.array([0.3, 0.3])
    ticks = np.stack([p0 + sign * 0.12, diag, nan, nan, nan, nan], 1)
    pts = np.where(stub[:, None, None], stubs, straight)
    pts = np.where(tick[:, None, None], ticks, pts)
    return pts[..., 0], pts[..., 1]


def _lines(gx, gy, mask, wrap: bool):
    width = 6 if wrap else 4
    # float32 halves the figure's JSON (plotly sends arrays as typed base64)
    xs, ys = gx[mask, :width].ravel(), gy[mask, :width].ravel()
    return (xs.astype(np.float32), ys.astype(np.float32)) if len(xs) else ([None], [None])


def _link_traces(fr: Frames, lv: np.ndarray, gx, gy) -> list[go.Scatter]:
    traces, bounds = [], fr.level_bounds()
    for b in range(LEVELS):
        name = "idle" if b == 0 else f"≤ {format_bytes(bounds[b])}"
        for is_wrap in (False, True):
            mask = (lv == b) & (fr.wrap_mask == is_wrap)
            if is_wrap and not mask.any():
                continue
            xs, ys = _lines(gx, gy, mask, is_wrap)
            line = {"color": COLOURS[b], "width": WIDTHS[b], "dash": "dot" if is_wrap else None}
            traces.append(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    hoverinfo="skip",
                    line=line,
                    name=name,
                    legendgroup=name,
                    showlegend=not is_wrap,
                )
            )
    return traces


def _busiest_traces(fr: Frames, step: int, gx, gy) -> list[go.Scatter]:
    """Every link tied for the step's busiest, in red (one trace per straight/wrap style)."""
    if not len(fr):
        return []
    tied = np.zeros(len(fr.links), bool)
    tied[fr.busiest_at(step)] = True
    k = int(tied.sum())
    name = "busiest link" if k == 1 else f"busiest links ({k} tied)"
    out = []
    for is_wrap in (False, True):
        mask = tied & (fr.wrap_mask == is_wrap)
        if mask.any():
            xs, ys = _lines(gx, gy, mask, is_wrap)
            out.append(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    name=name,
                    hoverinfo="skip",
                    legendgroup="busiest",
                    showlegend=not out,
                    line={"color": BUSIEST, "width": 4},
                )
            )
    return out


def _landing_trace(fr: Frames, gx, gy) -> list[go.Scatter]:
    """On a twisted torus, a hover point at the outer end of every wraparound link's exit stub
    naming the chip the link lands on (its re-entry stub is drawn there)."""
    topo = fr.tl.topo
    stub = fr.wrap_mask & ~np.isnan(gx[:, 3])  # exit and entry stubs (3-D dim-2 ticks excluded)
    if not topo.twisted or not stub.any():
        return []
    ids = fr.links[stub]
    src, dim = ids // (2 * topo.ndim), (ids // 2) % topo.ndim
    dst = topo.link_dst[ids]
    text = [f"dim {d} wraparound: chip {topo.coord(a)} → chip {topo.coord(b)}"
            for a, b, d in zip(src, dst, dim, strict=True)]  # fmt: skip
    marker = {"size": 8, "opacity": 0}  # invisible: only its hover text shows
    return [go.Scatter(x=gx[stub, 1].astype(np.float32), y=gy[stub, 1].astype(np.float32),
                       mode="markers", marker=marker, text=text, hoverinfo="text",
                       name="where a wraparound lands", showlegend=False)]  # fmt: skip


def _chip_trace(fr: Frames, held: np.ndarray) -> go.Scatter:
    topo = fr.tl.topo
    text = [f"chip {i} {topo.coord(i)}: {held[i]:.0%}" for i in range(topo.n_chips)]
    size = 22 if topo.n_chips <= 16 else 14 if topo.n_chips <= 64 else 7
    colorbar = {"title": {"text": fr.held_label, "side": "right"}, "thickness": 12, "len": 0.8}
    marker = {
        "size": size,
        "color": held,
        "cmin": 0,
        "cmax": 1,
        "colorscale": CHIP_SCALE,
        "line": {"width": 0.8, "color": "#333"},
        "colorbar": colorbar,
    }
    return go.Scatter(
        x=fr.xy[:, 0],
        y=fr.xy[:, 1],
        mode="markers",
        name="chips",
        text=text,
        hoverinfo="text",
        marker=marker,
        showlegend=False,
    )


def slice_labels(fr: Frames) -> list[dict]:
    """Annotations naming the dims: rows are dim 0, columns dim 1, 3-D blocks dim 2 = k."""
    topo, xy = fr.tl.topo, fr.xy
    if topo.ndim < 2:
        return [_note(xy[:, 0].mean(), 0.6, "dim 0 →")]
    notes = [_note(xy[:, 0].min() - 0.8, xy[:, 1].mean(), "dim 0 ↓", angle=-90)]
    if topo.ndim == 2:
        return [*notes, _note(xy[:, 0].mean(), xy[:, 1].max() + 0.75, "dim 1 →")]
    for k in range(topo.shape[2]):
        block = xy[topo.coords[:, 2] == k]
        label = f"slice dim 2 = {k} (dim 1 →)"
        # midway between this block's top row and the bottom row of the block above
        notes.append(_note(block[:, 0].mean(), block[:, 1].max() + (LABEL_ROW_GAP + 1) / 2, label))
    low = xy[:, 1].min() - 0.8
    ticks = "dim-2 links are the short ticks: ↗ to slice k+1, ↙ to slice k-1"
    notes.append(_note(xy[:, 0].mean(), low, ticks))
    if topo.twisted:  # its dotted stubs re-enter elsewhere: say where, below the ticks' line
        twist = _note(xy[:, 0].mean(), low - 0.5, f"{twist_note(topo)}:<br>{_reentry(topo)}")
        notes.append({**twist, "yanchor": "top"})
    return notes


def _reentry(topo) -> str:
    """Where a twisted wraparound's dotted stub re-enters, in slices (every twist of a kxkx2k or
    kx2kx2k torus moves k along dim 2)."""
    k, n = max(t[2] for t in topo.twist), topo.shape[2]
    return f"a dotted stub leaving slice s re-enters slice (s + {k}) mod {n}; hover its end"


def _note(x, y, text, angle=0):
    return {
        "x": x,
        "y": y,
        "text": text,
        "showarrow": False,
        "textangle": angle,
        "font": {"size": 11, "color": "#444"},
    }


def title(fr: Frames, step: int) -> str:
    tl = fr.tl
    head = f"{tl.kind} {tl.algorithm} on {tl.topo.describe()} ({tl.chip.name})"
    if len(head) > TITLE_CHARS:  # e.g. a twisted torus's description: two lines
        cut = head.rindex(" ", 0, TITLE_CHARS)
        head = f"{head[:cut]}<br>{head[cut + 1 :]}"
    if not len(fr):
        return head
    rec = tl.steps[step]
    ph = tl.phases[rec.phase]
    tied = len(fr.busiest_at(step))
    busy = format_bytes(rec.max_link_bytes) + (f" ({tied} links tied)" if tied > 1 else "")
    return (
        f"{head}<br>step {step + 1}/{len(tl.steps)} · {ph.name} · phase payload "
        f"{format_bytes(ph.payload_bytes)}/chip<br>step {format_time(rec.time_s)} · busiest "
        f"link {busy} · total {format_time(tl.time_s)}"
    )


def title_extra(text: str) -> int:
    """Pixels of top margin a title needs beyond three lines."""
    return 16 * max(text.count("<br>") - 2, 0)


def link_figure(fr: Frames, step: int) -> go.Figure:
    """Draw step `step` (0-based): link loads, chip colours, every busiest link in red."""
    gx, gy = geometry(fr)
    lv, held = fr.level_at(step), fr.held_after(step)
    note_extra = 40 if fr.tl.topo.twisted else 0  # the two lines saying where wraparound lands
    head = title(fr, step)
    traces = [*_link_traces(fr, lv, gx, gy), *_busiest_traces(fr, step, gx, gy)]
    fig = go.Figure([*traces, *_landing_trace(fr, gx, gy), _chip_trace(fr, held)])
    span = np.ptp(fr.xy[:, 0]) + 2.5, np.ptp(fr.xy[:, 1]) + 2.5
    plot_h = min(520, max(220, int(WIDTH * 0.8 * span[1] / span[0])))
    fig.update_layout(
        title={"text": head, "font": {"size": 12}, "x": 0.01},
        xaxis={"visible": False, "scaleanchor": "y"},
        yaxis={"visible": False},
        annotations=slice_labels(fr),
        legend={
            "title": {"text": "bytes on a link"},
            "orientation": "h",
            "y": -0.02,
            "yanchor": "top",
            "x": 0,
            "font": {"size": 11},
        },
        height=plot_h + 170 + note_extra,
        width=WIDTH,
        margin={"l": 30, "r": 10, "t": 90 + title_extra(head), "b": 70 + note_extra},
        plot_bgcolor="white",
    )
    return fig


# ----- the same frame as plain SVG (a lesson's static figure) ---------------------------------
def _svg_paths(gx, gy, colour, width, dash, to_px) -> list[str]:
    out = []
    for xs, ys in zip(gx, gy, strict=True):
        pts, run = [], []
        for x, y in zip(xs, ys, strict=True):
            if np.isnan(x):
                pts, run = pts + [run], []
            else:
                run.append("{:.1f},{:.1f}".format(*to_px(x, y)))
        for r in [*pts, run]:
            if len(r) > 1:
                style = ' stroke-dasharray="3,3"' if dash else ""
                out.append(
                    f'<polyline points="{" ".join(r)}" fill="none" stroke="{colour}" '
                    f'stroke-width="{width}"{style}/>'
                )
    return out


def svg(fr: Frames, step: int) -> str:
    """Step `step` as a self-contained <svg>: links by load, busiest in red, chips by share."""
    gx, gy = geometry(fr)
    lv, held = fr.level_at(step), fr.held_after(step)
    x0, y1 = np.nanmin(gx) - 0.5, np.nanmax(gy) + 0.5
    scale = (WIDTH - 40) / (np.nanmax(gx) + 0.5 - x0)
    scale = min(scale, 360 / (y1 - np.nanmin(gy) + 0.5))
    top = 22 + 16 * title(fr, step).count("<br>") + 16  # below the title's lines
    notes = 3 if fr.tl.topo.twisted else 1  # the key, and two lines: where wraparound lands
    height = int((y1 - np.nanmin(gy) + 0.5) * scale) + top + 24 + 16 * notes

    def to_px(x, y):
        return 20 + (x - x0) * scale, top + (y1 - y) * scale

    body = []
    for b in range(LEVELS):
        for is_wrap in (False, True):
            m = (lv == b) & (fr.wrap_mask == is_wrap)
            body += _svg_paths(gx[m], gy[m], COLOURS[b], WIDTHS[b] * 0.6, is_wrap, to_px)
    if len(fr):
        m = np.zeros(len(fr.links), bool)
        m[fr.busiest_at(step)] = True
        body += _svg_paths(gx[m], gy[m], BUSIEST, 3, False, to_px)
    body += _svg_chips(fr, held, to_px)
    text = _svg_text(fr, step, height)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif">{"".join(text + body)}</svg>'
    )


def _svg_chips(fr: Frames, held, to_px) -> list[str]:
    """One circle per chip, filled by the share of the result it holds."""
    fills = sample_colorscale(CHIP_SCALE, [float(h) for h in held])
    r = 9 if fr.tl.topo.n_chips <= 16 else 6 if fr.tl.topo.n_chips <= 64 else 3
    out = []
    for (x, y), fill in zip(fr.xy, fills, strict=True):
        px, py = to_px(x, y)
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{r}" fill="{fill}" stroke="#333"/>')
    return out


def _svg_text(fr: Frames, step: int, height: int) -> list[str]:
    """The title lines at the top and the colour key at the bottom."""
    lines = title(fr, step).split("<br>")
    text = [
        f'<text x="10" y="{18 + 16 * i}" font-size="13">{_esc(t)}</text>'
        for i, t in enumerate(lines)
    ]
    note = (
        "links: grey idle, light to dark blue = more bytes, red = busiest; "
        f"chips: {fr.held_label}, white 0% to green 100%"
    )
    text.append(f'<text x="10" y="{height - 10}" font-size="12">{_esc(note)}</text>')
    if fr.tl.topo.twisted:
        lines = (twist_note(fr.tl.topo) + ":", _reentry(fr.tl.topo).split(";")[0])
        text += [f'<text x="10" y="{height - 42 + 16 * i}" font-size="12">{_esc(t)}</text>'
                 for i, t in enumerate(lines)]  # fmt: skip
    return text


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
