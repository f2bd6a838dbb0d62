"""The torus view: chips on a grid, every link coloured by the bytes it carries in one step.

``frames(tl)`` turns a recorded Timeline into per-step arrays (link load levels, what each chip
holds, the busiest link) once; ``figure(fr, step)`` draws one of them; ``TorusWidget`` is a frame
index (Play + slider) over them plus controls that record a new timeline. Nothing here
re-simulates a step: frames only read ``tl.steps``.
"""

from __future__ import annotations

import dataclasses
import json
import re

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from gspmd_viz import sim
from gspmd_viz.sim.execute import expand
from gspmd_viz.units import format_bytes, format_time, parse_bytes

LEVELS = 6  # link load levels: 0 idle, 1..5 up to the busiest link of the whole timeline
_COLOURS = ["#d9d9d9", "#fde725", "#5ec962", "#21918c", "#3b528b", "#440154"]
_WIDTHS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]
OWNERSHIP_LIMIT = 2**20  # chips x chunks up to which frames replay chunk ownership (16x16)


@dataclasses.dataclass(frozen=True, eq=False)
class Frames:
    tl: sim.Timeline
    xy: np.ndarray  # [n_chips, 2] drawing position of each chip
    links: np.ndarray  # [L] ids of the existing links
    level: np.ndarray  # [n_steps, L] int8 load level of each link in each step
    held: np.ndarray  # [n_steps + 1, n_chips] colour of each chip before step 0 .. after last
    held_label: str
    peak_bytes: float  # the busiest link's bytes over the whole timeline
    wrap_mask: np.ndarray  # [L] True for wraparound links (drawn dotted)
    geom_x: np.ndarray  # [L, 6] polyline of each link (NaN separated)
    geom_y: np.ndarray

    def __len__(self):
        return len(self.tl.steps)


def positions(topo: sim.Topology) -> np.ndarray:
    """Dim 0 runs down the page (rows), dim 1 across; dim 2 slices sit side by side."""
    c = topo.coords
    if topo.ndim == 1:
        return np.stack([c[:, 0], np.zeros(len(c))], 1).astype(float)
    x = c[:, 1].astype(float)
    if topo.ndim == 3:
        x = x + c[:, 2] * (topo.shape[1] + 1)
    return np.stack([x, -c[:, 0].astype(float)], 1)


def _held_by_ownership(tl):
    """Fraction of the final result each chip holds, replaying the recorded transfers."""
    n, k = tl.topo.n_chips, tl.schedule.n_chunks
    count = np.ones((n, k), np.int32)
    out = [count.sum(1) / (n * k)]
    for rec in tl.steps:
        st = rec.step
        rep, c_src, c_dst = expand(st)
        vals = count[st.src[rep], c_src]
        red = st.reduce[rep]
        np.add.at(count, (st.dst[rep][red], c_dst[red]), vals[red])
        count[st.dst[rep][~red], c_dst[~red]] = vals[~red]
        out.append(count.sum(1) / (n * k))
    return np.array(out, np.float32)


def _held_by_bytes(tl):
    """Share of its incoming bytes each chip has received (cheap; used on huge tori)."""
    n = tl.topo.n_chips
    got = np.zeros((len(tl.steps) + 1, n))
    for i, rec in enumerate(tl.steps):
        got[i + 1] = got[i] + np.bincount(rec.step.dst, weights=rec.nbytes, minlength=n)
    return (got / np.maximum(got[-1], 1e-300)).astype(np.float32)


def frames(tl: sim.Timeline) -> Frames:
    """Per-step drawing data for a recorded timeline (vectorised; no re-simulation)."""
    topo = tl.topo
    links = np.flatnonzero(topo.link_exists)
    slot = np.full(topo.n_link_slots, -1, np.int64)
    slot[links] = np.arange(len(links))
    peak = max((r.max_link_bytes for r in tl.steps), default=0.0) or 1.0
    level = np.zeros((len(tl.steps), len(links)), np.int8)
    for i, rec in enumerate(tl.steps):
        lv = np.ceil(rec.link_bytes / peak * (LEVELS - 1)).clip(1, LEVELS - 1)
        level[i, slot[rec.links]] = lv
    use_own = tl.kind == "all-reduce" and topo.n_chips * tl.schedule.n_chunks <= OWNERSHIP_LIMIT
    if use_own:
        held, label = _held_by_ownership(tl), "share of the final sum held"
    else:
        held, label = _held_by_bytes(tl), "share of incoming bytes received"
    src, dim = links // (2 * topo.ndim), (links // 2) % topo.ndim
    gap = topo.coords[topo.link_dst[links], dim] - topo.coords[src, dim]
    wrap = np.abs(gap) > 1
    xy = positions(topo)
    gx, gy = _geometry(topo, xy, links, wrap)
    return Frames(tl, xy, links, level, held, label, float(peak), wrap, gx, gy)


# ----- drawing -------------------------------------------------------------------------------
def _geometry(topo, xy, links, wrap) -> tuple[np.ndarray, np.ndarray]:
    """[L, 6] x and y of each link's polyline (NaN = gap), vectorised.

    A link is drawn beside the straight line between its chips (+ and - directions on opposite
    sides); a wraparound link becomes two stubs: leaving the grid here, re-entering there. In 3-D
    the dim-2 links join side-by-side slices, so they bow out of the rows as arcs.
    """
    src, dim = links // (2 * topo.ndim), (links // 2) % topo.ndim
    p0, p1 = xy[src], xy[topo.link_dst[links]]
    u = p1 - p0
    u /= np.maximum(np.hypot(u[:, 0], u[:, 1]), 1e-9)[:, None]
    arc = (dim == 2) if topo.ndim == 3 else np.zeros(len(links), bool)
    stub = wrap & ~arc
    u[stub] *= -1
    off = 0.09 if topo.n_chips <= 256 else 0.12
    side = np.stack([-u[:, 1], u[:, 0]], 1)  # + and - direction links on opposite sides
    a, b = p0 + side * off, p1 + side * off
    bow = np.where(arc, np.where(wrap, 0.9, 0.35), 0.0)[:, None]
    mid = (a + b) / 2 + side * bow
    nan = np.full_like(a, np.nan)
    straight = np.stack([a, mid, b, nan, nan, nan], 1)
    stubs = np.stack([a, a + 0.45 * u, nan, b - 0.45 * u, b, nan], 1)
    pts = np.where(stub[:, None, None], stubs, straight)
    return pts[..., 0], pts[..., 1]


def _lines(fr: Frames, mask: np.ndarray, wrap: bool) -> tuple[np.ndarray, np.ndarray]:
    width = 6 if wrap else 4
    return fr.geom_x[mask, :width].ravel(), fr.geom_y[mask, :width].ravel()


def figure(fr: Frames, step: int = 0) -> go.Figure:
    """Draw step `step` (0-based) of the frames: link loads, chip colours, busiest link."""
    tl = fr.tl
    n_steps = len(tl.steps)
    if not 0 <= step < max(n_steps, 1):
        raise ValueError(f"step must be in 0..{n_steps - 1}, got {step}")
    rec = tl.steps[step] if n_steps else None
    lv = fr.level[step] if n_steps else np.zeros(len(fr.links), np.int8)
    scatter = go.Scattergl if len(fr.links) > 3000 else go.Scatter
    fig = go.Figure()
    wrap = fr.wrap_mask
    for b in range(LEVELS):
        hi = b / (LEVELS - 1) * fr.peak_bytes
        name = "idle" if b == 0 else f"up to {format_bytes(hi)}"
        for is_wrap in (False, True):
            mask = (lv == b) & (wrap == is_wrap)
            if is_wrap and not mask.any():
                continue
            xs, ys = _lines(fr, mask, is_wrap)
            line = {"color": _COLOURS[b], "width": _WIDTHS[b], "dash": "dot" if is_wrap else None}
            fig.add_trace(
                scatter(
                    x=xs if len(xs) else [None],
                    y=ys if len(ys) else [None],
                    mode="lines",
                    hoverinfo="skip",
                    name=name + (" (wraparound)" if is_wrap else ""),
                    line=line,
                    legendgroup=name,
                    showlegend=not is_wrap or b == 0,
                )  # fmt: skip
            )
    if rec is not None and len(rec.links):
        mask = fr.links == rec.bottleneck_link
        xs, ys = _lines(fr, mask, bool(fr.wrap_mask[mask][0]))
        fig.add_trace(
            scatter(
                x=xs,
                y=ys,
                mode="lines",
                name="busiest link",
                hoverinfo="skip",
                line={"color": "#e4002b", "width": 9},
            )  # fmt: skip
        )
    held = fr.held[step + 1] if n_steps else fr.held[0]
    n = tl.topo.n_chips
    text = [f"chip {i} {tl.topo.coord(i)}: {held[i]:.0%}" for i in range(n)] if n <= 1024 else None
    fig.add_trace(
        scatter(
            x=fr.xy[:, 0],
            y=fr.xy[:, 1],
            mode="markers",
            name="chips",
            text=text,
            hoverinfo="text" if text else "skip",
            marker={
                "size": _chip_size(n),
                "color": held,
                "cmin": 0,
                "cmax": 1,
                "colorscale": "Blues",
                "line": {"width": 0.5, "color": "#555"},
                "colorbar": {"title": {"text": fr.held_label, "side": "right"}, "x": 1.02},
            },
        )  # fmt: skip
    )
    fig.update_layout(
        title={"text": _title(tl, rec, step), "font": {"size": 13}},
        xaxis={"visible": False, "scaleanchor": "y"},
        yaxis={"visible": False},
        legend={"title": {"text": "bytes on link"}, "x": 1.16, "y": 1},
        height=520,
        width=860,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        plot_bgcolor="white",
    )
    return fig


def _chip_size(n):
    return 22 if n <= 16 else 14 if n <= 64 else 7 if n <= 1024 else 3


def _title(tl, rec, step):
    head = f"{tl.kind} {tl.algorithm} on {tl.topo.describe()} ({tl.chip.name})"
    if rec is None:
        return head
    ph = tl.phases[rec.phase]
    return (
        f"{head}<br>step {step + 1}/{len(tl.steps)} · {ph.name} · phase payload "
        f"{format_bytes(ph.payload_bytes)}/chip · step {format_time(rec.time_s)} · busiest link "
        f"{format_bytes(rec.max_link_bytes)} · total {format_time(tl.time_s)}"
    )


# ----- the widget ----------------------------------------------------------------------------
def parse_shape(text: str) -> tuple[int, ...]:
    """'4x4' or '4, 4, 2' -> (4, 4) / (4, 4, 2)."""
    parts = [p for p in re.split(r"[x×,\s]+", (text or "").strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"size {text!r}: write sizes like 4x4 or 4x4x4")
    return tuple(int(p) for p in parts)


class TorusWidget(widgets.VBox):
    """Pick a topology, algorithm, payload and TPU; press Play to watch every step."""

    def __init__(self, preset="4x4", algorithm="torus-2d", payload="1 MiB", chip="tpu-v3"):
        self.preset = widgets.Dropdown(options=[*sim.PRESETS, "custom"], value=preset,
                                       description="topology")  # fmt: skip
        self.size = widgets.Text(value="", description="size", placeholder="4x4")
        self.wrap = widgets.Checkbox(value=True, description="wraparound")
        self.kind = widgets.Dropdown(options=list(sim.KINDS), value="all-reduce",
                                     description="collective")  # fmt: skip
        self.algorithm = widgets.Dropdown(options=sim.algorithms("all-reduce"), value=algorithm,
                                          description="algorithm")  # fmt: skip
        self.payload = widgets.Text(value=payload, description="payload", placeholder="1 MiB")
        self.chip = widgets.Dropdown(options=list(sim.CHIPS), value=chip, description="TPU")
        self.play = widgets.Play(interval=400, min=1, max=1, description="play")
        self.slider = widgets.IntSlider(min=1, max=1, description="step")  # 1-based, as titles
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.message = widgets.HTML()
        self.summary = widgets.HTML()
        self.plot = widgets.Output()
        self.frames: Frames | None = None
        self.figure: go.Figure | None = None
        rows = [
            widgets.HBox([self.preset, self.size, self.wrap]),
            widgets.HBox([self.kind, self.algorithm]),
            widgets.HBox([self.payload, self.chip]),
            widgets.HBox([self.play, self.slider]),
        ]
        super().__init__([*rows, self.message, self.summary, self.plot])
        self._fill_preset()
        self.preset.observe(lambda _: (self._fill_preset(), self.rebuild()), "value")
        self.kind.observe(lambda _: self._kind_changed(), "value")
        for w in (self.size, self.wrap, self.algorithm, self.payload, self.chip):
            w.observe(lambda _: self.rebuild(), "value")
        self.slider.observe(lambda ch: self.show(ch["new"] - 1), "value")
        self.rebuild()

    def _fill_preset(self):
        if self.preset.value in sim.PRESETS:
            shape, wrap, _ = sim.PRESETS[self.preset.value]
            self._quiet = True
            self.size.value = "x".join(map(str, shape))
            self.wrap.value = all(wrap)
            topo = sim.torus(shape)
            if self.algorithm.value not in sim.applicable(topo, self.kind.value):
                self.algorithm.value = sim.default_algorithm(topo, self.kind.value)
            self._quiet = False

    def _kind_changed(self):
        opts = sim.algorithms(self.kind.value)
        self._quiet = True
        self.algorithm.options = opts
        self.algorithm.value = opts[0]
        self._quiet = False
        self.rebuild()

    def topology(self) -> sim.Topology:
        if self.preset.value in sim.PRESETS:
            name, (shape, wrap, _) = self.preset.value, sim.PRESETS[self.preset.value]
            if parse_shape(self.size.value) == shape and self.wrap.value == all(wrap):
                return sim.preset(name)
        return sim.torus(parse_shape(self.size.value), self.wrap.value)

    def rebuild(self):
        """Record a new timeline for the current controls; errors are shown, never raised."""
        if getattr(self, "_quiet", False):
            return
        try:
            tl = sim.simulate(self.topology(), self.kind.value, _payload(self.payload.value),
                              algorithm=self.algorithm.value, chip=self.chip.value)  # fmt: skip
            self.frames = frames(tl)
        except ValueError as err:
            self.message.value = f"<b style='color:#b00'>⚠ {_escape(str(err))}</b>"
            return
        self.message.value = ""
        about = f"{tl.algorithm}: {sim.describe(tl.algorithm)}\n"
        self.summary.value = f"<pre>{_escape(about + tl.summary())}</pre>"
        self.play.value = 1
        self.play.max = self.slider.max = max(len(tl.steps), 1)
        self.slider.value = 1
        self.show(0)

    def show(self, step: int):
        if self.frames is None or not len(self.frames):
            return
        self.figure = figure(self.frames, min(step, len(self.frames) - 1))
        # Put the figure into the Output as widget state in plotly's mimetype: no iopub
        # routing, so a live kernel, nbconvert and nbval all behave the same.
        bundle = {"application/vnd.plotly.v1+json": {**json.loads(self.figure.to_json()),
                                                     "config": {}}}  # fmt: skip
        self.plot.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)


def _payload(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as err:
        raise ValueError(f"payload: {err}") from None


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
