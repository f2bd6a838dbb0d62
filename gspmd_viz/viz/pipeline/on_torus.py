"""The transfers of a pipeline placed on a simulated TPU torus: each stage pair's route.

``torus_transfers(placement, schedule, nbytes)`` draws the chips of the placement's topology,
labels the ones that run a stage, and draws every stage-to-stage route over the links it
crosses (activations red, gradients blue; wraparound hops as stubs leaving and re-entering).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gspmd_viz import pipeline as pipe
from gspmd_viz import units


def torus_transfers(
    placed: pipe.Placement, sched: pipe.PipelineSchedule, nbytes: float
) -> go.Figure:
    """Chips of the placement's topology; each stage pair's route drawn over the links it
    crosses, width by the bytes it carries in one training step (all microbatches)."""
    topo, xy = placed.topo, _chip_xy(placed.topo)
    per_pair: dict[tuple[int, int], int] = {}
    for _, a, b, *_ in sched.sends:
        if a != b:
            per_pair[a, b] = per_pair.get((a, b), 0) + 1
    routes = placed.routes(sched)
    first = {min(((a, b) for a, b, _ in routes if (a < b) == fwd), default=None)
             for fwd in (True, False)}  # fmt: skip
    fig = go.Figure()
    for a, b, links in routes:
        hops = [topo.link_info(int(lk))[:2] for lk in links]
        sent = per_pair[a, b] * nbytes
        bend = 0.08 if a < b else -0.08  # forward and backward traffic side by side
        xs, ys = [], []
        for src, dst in hops:
            for seg in _hop_segments(xy[src] + bend, xy[dst] + bend):
                xs += [seg[0][0], seg[1][0], None]
                ys += [seg[0][1], seg[1][1], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="text",
                                 text=f"stage {a} -> {b}: {units.format_bytes(sent)}",
                                 line={"width": 2 + 4 * (len(hops) == 1),
                                       "color": "#d62728" if a < b else "#1f77b4"},
                                 name="activations" if a < b else "gradients",
                                 legendgroup=str(a < b), showlegend=(a, b) in first))  # fmt: skip
    label = {c: f"S{i}" for i, c in enumerate(placed.chips)}
    fig.add_trace(go.Scatter(x=xy[:, 0], y=xy[:, 1], mode="markers+text",
                             text=[label.get(c, "") for c in range(topo.n_chips)],
                             marker={"size": 26, "color": ["#ffd92f" if c in label else "#eee"
                                                           for c in range(topo.n_chips)],
                                     "line": {"width": 1, "color": "#555"}},
                             hoverinfo="skip", name="chips (S = stage)"))  # fmt: skip
    fig.update_layout(title={"text": _torus_title(placed, sched, nbytes), "font": {"size": 13}},
                      xaxis={"visible": False, "scaleanchor": "y"}, yaxis={"visible": False},
                      height=420, width=860, plot_bgcolor="white")  # fmt: skip
    return fig


def _chip_xy(topo) -> np.ndarray:
    """[n_chips, 2]: dim 0 down the page, dim 1 across, dim-2 slices side by side."""
    c = topo.coords.astype(float)
    if topo.ndim == 1:
        return np.stack([c[:, 0], np.zeros(len(c))], 1)
    across = c[:, 1] + (c[:, 2] * (topo.shape[1] + 1) if topo.ndim == 3 else 0.0)
    return np.stack([across, -c[:, 0]], 1)


def _hop_segments(a: np.ndarray, b: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """A neighbour hop is one segment; a wraparound hop (chips drawn apart) two stubs that
    leave the grid at one end and come back in at the other."""
    gap = b - a
    if np.hypot(*gap) <= 1.01:
        return [(a, b)]
    away = -gap / np.hypot(*gap) * 0.4
    return [(a, a + away), (b - away, b)]


def _torus_title(placed, sched, nbytes) -> str:
    t = placed.transfer_matrix(nbytes)
    worst = units.format_time(float(t.max()))
    return (f"{sched.name} on {placed.topo.describe()} ({placed.chip.name}); "
            f"{units.format_bytes(nbytes)} per microbatch per transfer, slowest hop {worst}<br>"
            f"red: activations forward, blue: gradients back")  # fmt: skip
