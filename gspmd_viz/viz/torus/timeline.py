"""Time versus payload for each algorithm: the latency-bound and bandwidth-bound regimes.

Curves are the closed forms (tests hold the link-level simulator equal to them within 1%);
markers are simulated timelines where the topology is small enough to simulate every size.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gspmd_viz import sim
from gspmd_viz.units import format_bytes

_DASH = {"ring": "dot", "bidirectional-ring": "dash", "naive": "longdashdot"}
# each algorithm the registry names keeps its colour in every figure; families share a hue
_COLOURS = {
    "ring": "#1f77b4", "bidirectional-ring": "#17becf", "naive": "#7f7f7f",
    "torus-2d": "#2ca02c", "torus-2d-halves": "#98df8a", "torus-3d": "#2ca02c",
    "torus-3d-halves": "#98df8a", "torus-3d-thirds": "#bcbd22",
    "recursive-doubling": "#9467bd", "rabenseifner": "#8c564b", "swing": "#ff7f0e",
    "swing-halving": "#d62728", "pull-halving": "#e377c2", "direct": "#1f77b4", "bruck": "#ff7f0e",
}  # fmt: skip


def latency_bandwidth_split(topo, kind, algorithm, chip="tpu-v3") -> tuple[float, float]:
    """(alpha part in seconds, beta part in seconds per byte) of an algorithm's closed form."""
    a = sim.closed_form(topo, kind, 0.0, algorithm, chip=chip)
    b = (sim.closed_form(topo, kind, 2.0**30, algorithm, chip=chip) - a) / 2.0**30
    return a, b


def time_vs_payload(
    topo: sim.Topology,
    kind: str = "all-reduce",
    algorithms=None,
    sizes=None,
    chip: str = "tpu-v3",
    simulate_markers: bool | None = None,
) -> go.Figure:
    """Log-log plot of time against payload per chip, one curve per algorithm, and the bound."""
    algorithms = list(algorithms or sim.applicable(topo, kind))
    sizes = np.asarray(sizes if sizes is not None else 2.0 ** np.arange(10, 33), float)
    if simulate_markers is None:
        simulate_markers = topo.n_chips <= 64
    fig = go.Figure()
    for name in algorithms:
        colour = _COLOURS.get(name, "#000000")
        times = [sim.closed_form(topo, kind, s, name, chip=chip) for s in sizes]
        line = {"dash": _DASH.get(name), "width": 2.5, "color": colour}
        fig.add_trace(go.Scatter(x=sizes, y=times, mode="lines", name=name, line=line))
        if simulate_markers:
            fig.add_trace(_simulated(topo, kind, name, sizes[::4], chip, colour))
    bound = [sim.lower_bound(topo, kind, s, chip=chip) for s in sizes]
    line = {"color": "black", "dash": "dot", "width": 1.5}
    fig.add_trace(
        go.Scatter(x=sizes, y=bound, mode="lines", name="bandwidth lower bound", line=line)
    )
    _mark_crossover(fig, topo, kind, algorithms, sizes, chip)
    ticks = [t for t in 2.0 ** np.arange(0, 41, 5) if sizes[0] <= t <= sizes[-1]]
    xaxis = {"type": "log", "title": "payload per chip", "tickvals": ticks}
    xaxis["ticktext"] = [format_bytes(t) for t in ticks]
    fig.update_layout(
        title=f"{kind} time vs payload on {topo.describe()} ({sim.chip(chip).name})",
        xaxis=xaxis,
        yaxis={"type": "log", "title": "time", "exponentformat": "SI", "ticksuffix": "s"},
        height=480,
        width=800,
        margin={"t": 60},
    )
    return fig


def _simulated(topo, kind: str, name: str, sizes, chip: str, colour: str) -> go.Scatter:
    """Markers: the link-level simulation at the sizes its chunks divide."""
    pts = [s for s in sizes if s % sim.schedule(topo, kind, name).n_chunks == 0]
    tl = [sim.simulate(topo, kind, int(s), name, chip=chip).time_s for s in pts]
    marker = {"symbol": "circle-open", "size": 9, "color": colour}
    return go.Scatter(x=pts, y=tl, mode="markers", name=f"{name} (simulated)", marker=marker,
                      showlegend=False)  # fmt: skip


def _mark_crossover(fig, topo, kind: str, algorithms, sizes, chip: str) -> None:
    """A vertical line where the best large-message algorithm turns bandwidth-bound."""
    best = min(algorithms, key=lambda n: sim.closed_form(topo, kind, sizes[-1], n, chip=chip))
    a, b = latency_bandwidth_split(topo, kind, best, chip)
    if b > 0:
        cross = a / b  # payload where latency and bandwidth terms are equal
        fig.add_vline(x=cross, line={"color": "grey", "width": 1})
        fig.add_annotation(x=np.log10(cross), y=1, yref="paper", showarrow=False, xanchor="right",
                           text=f"← latency-bound | bandwidth-bound → ({best})")  # fmt: skip
