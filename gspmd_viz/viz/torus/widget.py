"""The torus widget: pick a topology, collective, algorithm, payload and TPU, then watch each step.

``frames(tl)`` gives a recorded Timeline's per-step drawing data (each step worked out when drawn);
``figure(fr, step)`` draws one step, link by link up to 256 chips (links.py) and as per-dim
heatmaps beyond (heatmap.py); ``TorusWidget`` is a frame index (Play + slider) over them plus
controls that record a new timeline (recent ones are kept, so going back redraws at once).
Nothing here re-simulates a step. Every handler error becomes one line in the widget and greys the
stale figure; the controls always describe what is drawn.
"""

from __future__ import annotations

import collections
import contextlib
import html
import itertools
import re

import ipywidgets as widgets
import plotly.graph_objects as go

from gspmd_viz import sim
from gspmd_viz.units import parse_bytes
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, inline_errors
from gspmd_viz.viz.common.plotly_view import PlotlyView, plain
from gspmd_viz.viz.torus.frames import Frames, frames, positions
from gspmd_viz.viz.torus.heatmap import heatmap_figure
from gspmd_viz.viz.torus.links import LINK_VIEW_CHIPS, link_figure, svg

__all__ = ["Frames", "TorusWidget", "figure", "frames", "parse_torus_shape", "positions", "svg"]
CUSTOM = "custom"
PRESET_CHIPS = {"tpu-v3-pod": "tpu-v3", "tpu-v3-multipod": "tpu-v3", "tpu-v4-4x4x4": "tpu-v4"}
# today's pods: sub-slices that show the wraparound rules, then every whole pod sim names (their
# chip follows from the name: sim.chip_of)
SUB_SLICES = ("tpu-v5e-8x16", "tpu-v5p-2x4x4", "tpu-v5p-4x4x8")
# every twisted v4/v5p slice sim names
TWISTED_SLICES = tuple(sim.presets.twisted_slices())
TODAY = (*SUB_SLICES, *TWISTED_SLICES, *sim.presets.NAMED)
PRESETS = (*sim.PRESETS, *TODAY)
_TOPOLOGIES = {name: sim.preset(name) for name in PRESETS}  # built once: coords and links cached
MAX_CHIPS = 9216  # Ironwood's pod; big tori are drawn as per-dim heatmaps
A2A_MAX_CHIPS = 256  # a direct all-to-all routes N^2 transfers: seconds beyond this
# the longest line of chips the widget simulates: the multipod's 128. A ring along n chips takes
# 2(n - 1) steps of N transfers each: 9216 chips in one line took 4 to 40 s to simulate.
MAX_DIM = 128
# A widget keeps its last timelines, so going back to a setting redraws at once, while they hold
# at most this many transfers (~55 bytes each: ~170 MB); a 9,216-chip torus-3d-thirds alone
# holds 6.7 million, so only the current timeline is kept then.
KEPT_TRANSFERS = 3_000_000
TWISTED = "twisted"  # the wraparound choice of a twisted torus (shapes kxkx2k and kx2kx2k)


def figure(fr: Frames, step: int = 0) -> go.Figure:
    """Draw step `step` (0-based): the link view for small tori, heatmaps for big ones."""
    if not 0 <= step < max(len(fr), 1):
        raise ValueError(f"step must be in 0..{len(fr) - 1}, got {step}")
    if fr.tl.topo.n_chips <= LINK_VIEW_CHIPS:
        return link_figure(fr, step)
    return heatmap_figure(fr, step)


def preset_chip(name: str) -> str | None:
    """The chip a preset implies (None for the toy tori, which keep the chosen one)."""
    return PRESET_CHIPS.get(name) or (sim.chip_of(_TOPOLOGIES[name]) if name in TODAY else None)


def runnable(topo: sim.Topology, kind: str) -> list[str]:
    """The algorithms of `kind` sim runs on `topo` within its transfer cap (the ring's N^2
    transfers exceed it beyond 2,236 chips); all of them when none fits, so the cap's
    message says why."""
    names = sim.applicable(topo, kind)
    fits = [
        n for n in names if sim.ALGORITHMS[n].transfers(topo.n_chips) <= sim.registry.MAX_TRANSFERS
    ]
    return fits or names


def _transfers(recorded) -> int:
    return sum(len(rec.step.dst) for fr in recorded for rec in fr.tl.steps)


def parse_torus_shape(text: str) -> tuple[int, ...]:
    """'4x4' or '4, 4, 2' -> (4, 4) / (4, 4, 2)."""
    parts = [p for p in re.split(r"[x×,\s]+", (text or "").strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"size {text!r}: write sizes like 4x4 or 4x4x4")
    return tuple(int(p) for p in parts)


def wrap_options(ndim: int) -> list[tuple[str, tuple[bool, ...]]]:
    """(label, wrap per dim) for every wraparound choice of an ndim-D torus, all dims first."""
    out = []
    for wrap in itertools.product((True, False), repeat=ndim):
        dims = [str(d) for d in range(ndim) if wrap[d]]
        label = "all dims" if all(wrap) else "none" if not dims else "dim " + ", ".join(dims)
        out.append((label, wrap))
    return out


def twistable(shape: tuple[int, ...]) -> bool:
    """Whether sim builds a twisted torus of `shape`."""
    try:
        sim.topology.twisted_torus(shape)
    except ValueError:
        return False
    return True


def wrap_choices(shape: tuple[int, ...]) -> list[tuple[str, tuple[bool, ...] | str]]:
    """wrap_options for the rank of `shape`, plus the twisted torus where `shape` has one."""
    twisted = [("all dims, twisted", TWISTED)] if twistable(shape) else []
    return [*wrap_options(len(shape)), *twisted]


class TorusWidget(widgets.VBox):
    """Pick a topology, algorithm, payload and TPU; press Play to watch every step."""

    def __init__(self, preset="4x4", algorithm="torus-2d", payload="1 MiB", chip="tpu-v3"):
        self._quiet_depth = 0
        self._rank = None  # rank of the topology the controls were last synced to
        self.frames: Frames | None = None
        self._recorded: collections.OrderedDict[tuple, Frames] = collections.OrderedDict()
        self.figure: go.Figure | None = None
        self._make_controls(preset, payload, chip)
        self.message, self.summary, self.plot = widgets.HTML(), widgets.HTML(), PlotlyView()
        rows = [
            widgets.HBox([self.preset, self.size, self.wrap]),
            widgets.HBox([self.kind, self.algorithm]),
            widgets.HBox([self.payload, self.pad, self.chip]),
            widgets.HBox([self.play, self.slider]),
        ]
        super().__init__([widgets.HTML(STALE_CSS), *rows, self.message, self.summary, self.plot])
        self.add_class("gv-torus-widget")
        self._observe()
        with self._quiet():
            self._fill_preset()
            self._sync_controls(self.topology())
        if algorithm in self.algorithm.options:
            with self._quiet():
                self.algorithm.value = algorithm
        self._on_setting(None)

    def _make_controls(self, preset, payload, chip):
        self.preset = widgets.Dropdown(
            options=[*PRESETS, CUSTOM], value=preset, description="topology"
        )
        self.size = widgets.Text(description="size", placeholder="4x4", continuous_update=False)
        self.wrap = widgets.Dropdown(options=wrap_options(2), description="wraparound")
        self.kind = widgets.Dropdown(options=list(sim.KINDS), description="collective")
        self.algorithm = widgets.Dropdown(
            options=sim.algorithms("all-reduce"), description="algorithm"
        )
        self.payload = widgets.Text(
            value=payload, description="payload", placeholder="1.5 GiB", continuous_update=False
        )
        self.pad = widgets.Checkbox(value=False, description="pad chunks (pad=True)", indent=False)
        self.chip = widgets.Dropdown(options=list(sim.CHIPS), value=chip, description="TPU")
        self.play = widgets.Play(interval=400, min=1, max=1, description="play")
        self.slider = widgets.IntSlider(min=1, max=1, description="step")  # 1-based, as titles
        widgets.jslink((self.play, "value"), (self.slider, "value"))

    def _observe(self):
        self.preset.observe(self._on_preset, "value")
        for w in (self.size, self.wrap, self.kind, self.chip):
            w.observe(self._on_topology_or_kind, "value")
        for w in (self.algorithm, self.payload, self.pad):
            w.observe(self._on_setting, "value")
        self.slider.observe(self._on_step, "value")

    @contextlib.contextmanager
    def _quiet(self):
        """Controls set inside this block by the widget itself trigger no handler."""
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    # ----- handlers: each one catches everything (see viz.inline) ---------------------------
    @inline_errors
    def _on_preset(self, change):
        if self._quiet_depth or change["new"] == CUSTOM:
            return
        with self._quiet():
            self._fill_preset()
        self._sync_controls(self.topology())
        self.rebuild()

    @inline_errors
    def _on_topology_or_kind(self, _):
        if self._quiet_depth:
            return
        self._sync_controls(self.topology())
        self.rebuild()

    @inline_errors
    def _on_setting(self, _):
        if not self._quiet_depth:
            self.rebuild()

    @inline_errors
    def _on_step(self, change):
        if not self._quiet_depth:
            self.show(change["new"] - 1)

    # ----- keeping controls and display in agreement --------------------------------------------
    def _fill_preset(self):
        """Size, wraparound and (for real TPU pods) the chip of the chosen preset."""
        topo = _TOPOLOGIES[self.preset.value]
        self.size.value = "x".join(map(str, topo.shape))
        self.wrap.options = wrap_choices(topo.shape)
        self.wrap.value = TWISTED if topo.twisted else topo.wrap
        self.chip.value = preset_chip(self.preset.value) or self.chip.value
        if topo.n_chips & (topo.n_chips - 1):  # e.g. 9,216 chips: 1 MiB has no equal chunks
            self.pad.value = True

    def _sync_controls(self, topo: sim.Topology):
        """Preset label, wraparound choices and algorithm list follow the topology drawn."""
        with self._quiet():
            choices = wrap_choices(topo.shape)
            if list(self.wrap.options) != choices:  # a new rank, or twistable or no longer
                keep = self.wrap.value if self.wrap.value in dict(choices).values() else None
                self.wrap.options = choices
                self.wrap.value = keep or (True,) * topo.ndim
            self.preset.value = self._matching_preset(topo)
            names = runnable(topo, self.kind.value)
            keep = self.algorithm.value if topo.ndim == self._rank else None  # new rank: default
            default = sim.default_algorithm(topo, self.kind.value)
            self.algorithm.options = names
            self.algorithm.value = next(n for n in (keep, default, names[0]) if n in names)
            self._rank = topo.ndim

    def _matching_preset(self, topo: sim.Topology) -> str:
        for name, p in _TOPOLOGIES.items():
            chip_ok = (preset_chip(name) or self.chip.value) == self.chip.value
            if (p.shape, p.wrap, p.twist) == (topo.shape, topo.wrap, topo.twist) and chip_ok:
                return name
        return CUSTOM

    def topology(self) -> sim.Topology:
        """The topology the controls describe (named after its preset when it is one)."""
        shape = parse_torus_shape(self.size.value)
        if max(shape) > MAX_CHIPS:
            raise ValueError(f"size {self.size.value}: the widget draws up to {MAX_CHIPS} chips")
        wrap = self.wrap.value
        if wrap == TWISTED and twistable(shape):
            topo = sim.topology.twisted_torus(shape)
        else:  # a new rank or a shape that cannot twist: every dim wraps
            same_rank = wrap != TWISTED and len(wrap) == len(shape)
            topo = sim.torus(shape, wrap if same_rank else True)
        name = self._matching_preset(topo)
        return _TOPOLOGIES[name] if name != CUSTOM else topo

    # ----- recording and showing ---------------------------------------------------------------
    def _check_size(self, topo: sim.Topology):
        if topo.n_chips == 1:
            raise ValueError(
                f"size {self.size.value}: one chip has nobody to talk to, so a "
                "collective moves nothing; use at least 2 chips, e.g. 2x1 or 4x4"
            )
        if topo.n_chips > MAX_CHIPS:
            raise ValueError(
                f"{topo.n_chips} chips: the widget draws up to {MAX_CHIPS} (Ironwood's "
                "pod); call gv.sim.simulate in code for bigger tori"
            )
        if max(topo.shape) > MAX_DIM:
            raise ValueError(
                f"size {self.size.value}: the widget draws lines of up to {MAX_DIM} chips (a "
                f"ring along {max(topo.shape)} takes {2 * (max(topo.shape) - 1):,} steps); call "
                "gv.sim.simulate in code for longer ones"
            )
        if self.kind.value == "all-to-all" and topo.n_chips > A2A_MAX_CHIPS:
            raise ValueError(
                f"all-to-all on {topo.n_chips} chips routes {topo.n_chips**2:,} "
                f"transfers; the widget simulates it up to {A2A_MAX_CHIPS} chips"
            )

    def rebuild(self):
        """Record a new timeline for the current controls and show its first step."""
        topo = self.topology()
        self._check_size(topo)
        try:
            nbytes = parse_bytes(self.payload.value)
        except ValueError as err:
            raise ValueError(f"payload: {err}") from None
        self.frames = self._record(topo, nbytes)
        tl = self.frames.tl
        about = f"{tl.algorithm}: {sim.describe(tl.algorithm)}\n"
        self.summary.value = f"<pre>{html.escape(about + tl.summary(), quote=False)}</pre>"
        with self._quiet():
            self.play.playing = False  # a new timeline starts paused at step 1
            self.play.value = self.slider.value = 1
            self.play.max = self.slider.max = max(len(tl.steps), 1)
        self.show(0)

    def _record(self, topo: sim.Topology, nbytes: int) -> Frames:
        """The frames of the controls' timeline: simulated once per setting, kept while the
        last settings' timelines hold at most KEPT_TRANSFERS transfers."""
        kind, algorithm, chip, pad = (
            c.value for c in (self.kind, self.algorithm, self.chip, self.pad)
        )
        setting = (topo, kind, nbytes, algorithm, chip, pad)
        if setting not in self._recorded:
            tl = sim.simulate(topo, kind, nbytes, algorithm=algorithm, chip=chip, pad=pad)
            self._recorded[setting] = frames(tl)
        self._recorded.move_to_end(setting)
        while len(self._recorded) > 1 and _transfers(self._recorded.values()) > KEPT_TRANSFERS:
            self._recorded.popitem(last=False)
        return self._recorded[setting]

    def show(self, step: int):
        """Draw step `step` (0-based) of the recorded frames."""
        self.figure = figure(self.frames, min(step, len(self.frames) - 1))
        self.plot.show(plain(self.figure, {"displaylogo": False}))
        self.message.value = ""
        for view in (self.summary, self.plot):
            view.remove_class("gv-stale")

    def fail(self, err: Exception):
        """Show `err` as one line and grey the figure that no longer matches the controls."""
        self.message.value = error_html(err)
        for view in (self.summary, self.plot):  # both describe the last good controls
            view.add_class("gv-stale")

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus a static SVG of the current step for readers without a kernel."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self.frames is not None and self.frames.tl.topo.n_chips <= LINK_VIEW_CHIPS:
            bundle["text/html"] = svg(self.frames, self.slider.value - 1)
        return bundle
