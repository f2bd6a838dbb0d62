"""The pipeline Gantt as one heatmap: stages x time, each cell the action running there.

``gantt(tl, until)`` draws every action started by time ``until`` coloured by microbatch (F in
full colour, B lighter, W lightest), the idle stage-time so far shaded grey (the bubble), time
not reached yet blank, and the per-stage activation memory beneath. The figure is built as plain
dicts (no plotly property validation) and drawn by plotly.js as one image-like trace: a bar per
action with text and hatching took plotly.js ~0.5 s per draw, and JupyterLab's renderer draws
each new figure three times (react, redraw, a PNG snapshot).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale, unlabel_rgb

from gspmd_viz import pipeline as pipe
from gspmd_viz.sim.pipelines.pipeline import KINDS

SHADE = {"F": 1.0, "B": 0.6, "W": 0.35}  # share of the microbatch's colour (the rest white)
IDLE = "#b4b4b4"  # stage-time spent waiting so far: the bubble
_KIND_NAMES = {"F": "F forward", "B": "B backward (lighter)", "W": "W weight grad. (lightest)"}
_MEMORY_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                   "#7f7f7f"]  # fmt: skip
MAX_FRAMES = 120


def frame_times(tl: pipe.PipelineTimeline) -> np.ndarray:
    """Times the animation stops at: each distinct action start, then the end (at most 120)."""
    times = np.unique(np.append(tl.start, tl.makespan))
    if len(times) > MAX_FRAMES:
        times = times[np.linspace(0, len(times) - 1, MAX_FRAMES).round().astype(int)]
    return times


def microbatch_colours(microbatches: int) -> list[str]:
    """One Turbo colour per microbatch, 'rgb(r, g, b)'."""
    return sample_colorscale("Turbo", [m / max(microbatches - 1, 1) for m in range(microbatches)])


def tint(colour: str, share: float) -> str:
    """`share` of an 'rgb(r, g, b)' colour over white: what fill-opacity does on a white page."""
    r, g, b = (255 - share * (255 - c) for c in unlabel_rgb(colour))
    return f"rgb({r:.0f},{g:.0f},{b:.0f})"


def _cell_codes(tl, until: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time edges, and per (stage, interval) cell: code 3*microbatch + kind of the action running
    there (-1 idle so far, NaN not reached yet) and its hover label."""
    s = tl.schedule
    edges = np.unique(np.concatenate([[0.0, until, tl.makespan], tl.start, tl.end]))
    edges = edges[edges <= tl.makespan]
    codes = np.full((s.stages, len(edges) - 1), np.nan)
    codes[:, edges[:-1] < until] = -1
    labels = np.full(codes.shape, "idle (bubble)", dtype=object)
    labels[:, edges[:-1] >= until] = None
    first = np.searchsorted(edges, tl.start)
    last = np.searchsorted(edges, np.minimum(tl.end, until))  # a running action grows
    tail = [f".{c}" for c in s.chunk] if s.virtual > 1 else [""] * len(s.chunk)
    for i, (st, lo, hi) in enumerate(zip(s.stage, first, last, strict=True)):
        if lo < hi:  # started by `until`
            codes[st, lo:hi] = 3 * s.microbatch[i] + s.kind[i]
            labels[st, lo:hi] = f"{KINDS[s.kind[i]]}{s.microbatch[i]}{tail[i]}"
    return edges, codes, labels


def _microbatch_colorscale(microbatches: int) -> list:
    """Discrete scale over codes -1 (idle) .. 3M-1: idle, then F, B, W tints per microbatch."""
    colours = [IDLE] + [tint(c, SHADE[k]) for c in microbatch_colours(microbatches) for k in KINDS]
    n = len(colours)
    return [stop for i, c in enumerate(colours) for stop in ([i / n, c], [(i + 1) / n, c])]


def _actions(tl, until: float) -> dict:
    s = tl.schedule
    edges, codes, labels = _cell_codes(tl, until)
    return {
        "type": "heatmap", "x": edges, "y": np.arange(s.stages + 1) - 0.5, "z": codes,
        "text": labels, "hovertemplate": "stage %{y}: %{text}<extra></extra>",
        "colorscale": _microbatch_colorscale(s.microbatches), "zmin": -1.5,
        "zmax": 3 * s.microbatches - 0.5, "showscale": False, "ygap": 3, "name": "actions",
        "xaxis": "x", "yaxis": "y",
    }  # fmt: skip


def _keys(tl) -> list[dict]:
    """Legend-only markers for the kinds and the bubble, and the microbatch colour bar."""
    s = tl.schedule
    sample = microbatch_colours(5)[1]
    kinds = KINDS if s.has_weight_actions else KINDS[:2]
    marks = [(_KIND_NAMES[k], tint(sample, SHADE[k])) for k in kinds] + [("idle (bubble)", IDLE)]
    keys = [{"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": name,
             "marker": {"symbol": "square", "size": 13, "color": colour}, "legendgroup": "kinds",
             "xaxis": "x", "yaxis": "y"} for name, colour in marks]  # fmt: skip
    bar = {"title": {"text": "microbatch"}, "len": 0.55, "y": 0.74, "thickness": 14}
    scale = {"color": [0], "colorscale": get_colorscale("Turbo"), "cmin": 0,
             "cmax": max(s.microbatches - 1, 1), "showscale": True, "colorbar": bar}  # fmt: skip
    keys.append({"type": "scatter", "x": [None], "y": [None], "mode": "markers",
                 "marker": scale, "showlegend": False, "hoverinfo": "skip", "name": "microbatch",
                 "xaxis": "x", "yaxis": "y"})  # fmt: skip
    return keys


def _memory(tl, until: float) -> list[dict]:
    out = []
    for i in range(tl.schedule.stages):
        t, held = tl.memory(i)
        keep = t <= until
        colour = _MEMORY_COLOURS[i % len(_MEMORY_COLOURS)]
        out.append({"type": "scatter", "x": np.append(t[keep], until), "mode": "lines",
                    "y": np.append(held[keep], held[keep][-1]), "name": f"stage {i}",
                    "line": {"shape": "hv", "color": colour, "width": 1.5},
                    "legendgroup": "memory", "xaxis": "x2", "yaxis": "y2"})  # fmt: skip
    return out


def _layout(tl, until: float) -> dict:
    s, end = tl.schedule, tl.makespan
    peak = max(tl.peak_activations, default=0.0)
    shapes = [] if until >= end else [{
        "type": "line", "xref": "x", "yref": "paper", "x0": until, "x1": until, "y0": 0, "y1": 1,
        "line": {"color": "black", "width": 1, "dash": "dot"}}]  # fmt: skip
    return {
        "title": {"text": _gantt_title(tl, until), "font": {"size": 13}},
        "xaxis": {"anchor": "y", "domain": [0, 1], "matches": "x2", "showticklabels": False,
                  "range": [0, end]},
        "yaxis": {"anchor": "x", "domain": [0.35, 1], "autorange": "reversed", "zeroline": False,
                  "tickvals": list(range(s.stages)), "showgrid": False,
                  "ticktext": [f"stage {i}" for i in range(s.stages)]},
        "xaxis2": {"anchor": "y2", "domain": [0, 1], "range": [0, end],
                   "title": {"text": "time (one microbatch's forward through a stage = F)"}},
        "yaxis2": {"anchor": "x2", "domain": [0, 0.29], "range": [0, peak * 1.1 + 0.1],
                   "title": {"text": "activations<br>(microbatches)"}},
        "shapes": shapes,
        "height": 560, "width": 900, "plot_bgcolor": "white",
        "margin": {"l": 80, "r": 10, "t": 70, "b": 50},  # fixed: automargin costs a 2nd layout
        "legend": {"x": 1.1, "y": 0.32, "tracegroupgap": 12},
    }  # fmt: skip


def _gantt_title(tl, until: float) -> str:
    s = tl.schedule
    v = f", V={s.virtual}" if s.virtual > 1 else ""
    ratio = f"F:B:W = {tl.forward:g}:{tl.backward:g}:{tl.weight:g}"
    return (
        f"{s.name}, S={s.stages}, M={s.microbatches}{v}, {ratio}<br>time {until:.4g} of "
        f"{tl.makespan:.4g} · bubble {tl.bubble_fraction:.1%} (grey) · peak activations "
        f"{max(tl.peak_activations):g} microbatches"
    )


def gantt_spec(tl: pipe.PipelineTimeline, until: float | None = None) -> dict:
    """The figure of `gantt` as plain dicts (what the widget serialises)."""
    until = tl.makespan if until is None else float(until)
    data = [_actions(tl, until), *_keys(tl), *_memory(tl, until)]
    return {"data": data, "layout": _layout(tl, until)}


def gantt(tl: pipe.PipelineTimeline, until: float | None = None) -> go.Figure:
    """Stage x time Gantt of the actions started by `until` (default: all), memory beneath."""
    return go.Figure(gantt_spec(tl, until), _validate=False)
