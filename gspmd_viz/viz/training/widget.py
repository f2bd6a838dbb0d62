"""Training at pod scale: pick a model, a pod, a strategy and a batch; see memory per device
against HBM, step time split into compute / update / communication / bubble, and MFU.

The numbers come from gv.sim.training; the communication rows from the partitioned zoo step
(zoo.training.ledger_rows), computed for every strategy when the first widget is built and cached.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as widgets
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gspmd_viz import sim
from gspmd_viz.sim import training as st
from gspmd_viz.units import format_bytes, format_time
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, inline_errors, stale_html
from gspmd_viz.viz.common.plotly_view import PlotlyView, plain
from gspmd_viz.zoo import training as train_zoo

# name -> (layers, d_model, heads, head_dim, hidden); seq is 1024 for all
MODELS = {
    "1B": (24, 2048, 16, 128, 8192),
    "6B": (32, 4096, 32, 128, 16384),
    "52B": (64, 8192, 64, 128, 32768),
    "1T": (144, 24576, 96, 256, 98304),
}
# label -> (topology, chip). The v4 pod is 64 cubes of 4x4x4 joined by optical switches into a
# 16x16x16 torus (Google Cloud TPU v4 docs: 4096 chips per pod).
PODS = {
    "TPU-v3 pod 32x32 (1024 chips)": (sim.preset("tpu-v3-pod"), "tpu-v3"),
    "TPU-v3 multipod 128x32 (4096 chips)": (sim.preset("tpu-v3-multipod"), "tpu-v3"),
    "TPU-v4 cube 4x4x4 (64 chips)": (sim.preset("tpu-v4-4x4x4"), "tpu-v4"),
    "TPU-v4 pod 16x16x16 (4096 chips)": (sim.torus((16, 16, 16), name="tpu-v4 pod"), "tpu-v4"),
}
DEFAULT_POD = "TPU-v3 pod 32x32 (1024 chips)"
SEQ = 1024
PARTS = ("weights", "grads", "slots", "activations", "transient")
TIMES = ("compute", "update", "communication", "bubble")
# the step-time bars, live and in static_svg, in the same colours
TIME_COLOURS = dict(zip(TIMES, ("#636efa", "#ef553b", "#00cc96", "#ab63fa"), strict=True))


def model(name: str) -> st.Transformer:
    layers, m, n, d, h = MODELS[name]
    return st.Transformer(layers, m, n, d, h, SEQ)


def rows(strategy: str) -> list:
    """The partitioned step's collectives for a strategy (a pipeline's stages run dp's)."""
    return _step_rows("dp" if strategy == "pipeline" else strategy)


@functools.cache
def _step_rows(strategy: str) -> list:
    return train_zoo.ledger_rows(strategy)


def layout(strategy: str, chips: int, split: int, microbatches: int, remat: bool) -> st.Layout:
    """data fills what the model axis (2d) or the stages (pipeline) leave of the pod."""
    if strategy in ("2d", "pipeline") and chips % split:
        raise ValueError(f"{split} does not divide the pod's {chips} chips")
    if strategy == "2d":
        return st.Layout("2d", chips // split, model=split, remat=remat)
    if strategy == "pipeline":
        return st.Layout(
            "pipeline", chips // split, stages=split, microbatches=microbatches, remat=remat
        )
    return st.Layout(strategy, chips, remat=remat)


def evaluate(model_name, pod, strategy, batch, split, microbatches, remat):
    topo, chip = PODS[pod]
    cfg = model(model_name)
    lay = layout(strategy, topo.n_chips, split, microbatches, remat)
    mem = st.memory(cfg, lay, batch)
    return mem, st.step_time(cfg, lay, batch, rows(strategy), topo, chip), sim.chip(chip), lay


def figure(mem: dict, times: dict, chip, lay, heading: str = "") -> go.Figure:
    """Memory per device against HBM and the step-time split; `heading` (model, batch, pod)
    heads the title, whose second line is the layout."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("memory per device", "step time"))
    for part in PARTS:
        fig.add_bar(x=["memory"], y=[mem[part] / 2**30], name=part, row=1, col=1)
    fig.add_hline(
        y=chip.hbm_bytes / 2**30,
        line_dash="dash",
        row=1,
        col=1,
        annotation_text=f"HBM {format_bytes(chip.hbm_bytes)}",
    )
    for part in TIMES:
        fig.add_bar(x=["time"], y=[times[part]], name=part, marker_color=TIME_COLOURS[part],
                    row=1, col=2)  # fmt: skip
    fig.update_layout(
        barmode="stack",
        height=380,
        width=720,
        margin=dict(t=84, b=30),
        title=f"{heading}<br>{_layout_text(lay)}; MFU {times['mfu']:.0%}",
    )
    fig.update_yaxes(title_text="GiB", row=1, col=1)
    fig.update_yaxes(title_text="seconds", row=1, col=2)
    return fig


def _layout_text(lay: st.Layout) -> str:
    micro = f" x {lay.microbatches} microbatches" if lay.strategy == "pipeline" else ""
    remat = ", remat" if lay.remat else ""
    return (
        f"{lay.strategy}: data {lay.data} x model {lay.model} x stages {lay.stages}{micro}{remat}"
    )


def summary(mem: dict, times: dict, chip) -> str:
    total = sum(mem.values())
    fits = "fits" if total <= chip.hbm_bytes else "does NOT fit"
    parts = ", ".join(f"{k} {format_bytes(mem[k])}" for k in PARTS)
    steps = ", ".join(f"{k} {format_time(times[k])}" for k in TIMES)
    return (
        f"memory {format_bytes(total)} per device ({parts}): {fits} in {chip.name}'s "
        f"{format_bytes(chip.hbm_bytes)} HBM\nstep {format_time(times['total'])} ({steps}); "
        f"MFU {times['mfu']:.1%}"
    )


def parse_positive(text: str, what: str) -> int:
    text = text.strip().replace(",", "").replace("_", "")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{what} must be a positive whole number, got {text!r}")
    return int(text)


class TrainingWidget(widgets.VBox):
    """Model size, pod, strategy, batch (sequences of 1024 tokens), split, remat."""

    def __init__(
        self,
        model_name="1T",
        pod=DEFAULT_POD,
        strategy="2d",
        batch="1024",
        split="16",
        microbatches="16",
        remat=True,
    ):
        self.model = widgets.Dropdown(options=list(MODELS), value=model_name, description="model")
        self.pod = widgets.Dropdown(options=list(PODS), value=pod, description="pod")
        self.strategy = widgets.Dropdown(
            options=list(st.STRATEGIES), value=strategy, description="strategy"
        )
        self.batch = widgets.Text(value=batch, description="batch")
        wide = {"description_width": "initial"}  # the whole label, not "model/sta..."
        self.split = widgets.Text(value=split, description="model/stages", style=wide)
        self.microbatches = widgets.Text(value=microbatches, description="microbatches",
                                         style=wide)  # fmt: skip
        self.remat = widgets.Checkbox(value=remat, description="rematerialise")
        self.message, self.text, self.plot = widgets.HTML(), widgets.HTML(), PlotlyView()
        self.figure: go.Figure | None = None
        controls = [self.model, self.pod, self.strategy, self.batch, self.split]
        controls += [self.microbatches, self.remat]
        rows_of_controls = [widgets.HBox(controls[:3]), widgets.HBox(controls[3:])]
        parts = [widgets.HTML(STALE_CSS), *rows_of_controls, self.message, self.text, self.plot]
        super().__init__(parts)
        self.add_class("gv-training")
        for w in controls:
            w.observe(lambda _: self.rebuild(), "value")
        for name in st.STRATEGIES:  # partition every strategy's step now (~0.4 s each), so
            rows(name)  # that switching strategy later only rescales, within a redraw's budget
        self.rebuild()

    @inline_errors
    def rebuild(self):
        """Recompute for the current controls; an error becomes a one-line message."""
        args = (
            self.model.value,
            self.pod.value,
            self.strategy.value,
            parse_positive(self.batch.value, "batch"),
            parse_positive(self.split.value, "model/stages"),
            parse_positive(self.microbatches.value, "microbatches"),
            self.remat.value,
        )
        mem, times, chip, lay = evaluate(*args)
        self.message.value = ""
        self.plot.remove_class("gv-stale")
        self.text.value = f"<pre>{html.escape(summary(mem, times, chip), quote=False)}</pre>"
        heading = f"{args[0]} model, batch {args[3]}, {args[1]}"
        self.figure = figure(mem, times, chip, lay, heading)
        self.plot.show(plain(self.figure))

    def fail(self, err: Exception):
        self.message.value = error_html(err)
        if "gv-stale" not in self.plot._dom_classes:  # the summary describes the old step too
            self.text.value = stale_html(self.text.value)
        self.plot.add_class("gv-stale")  # the last good picture, greyed: it no longer applies

    def static_svg(self) -> str:
        """The current step-time split as a small SVG bar, for readers without a kernel."""
        if self.figure is None:
            return "<svg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/>"
        ys = {tr.name: tr.y[0] for tr in self.figure.data if tr.xaxis == "x2"}
        total, x, parts = sum(ys.values()) or 1.0, 0.0, []
        for name, y in ys.items():
            w = 600 * y / total
            parts.append(
                f"<rect x='{x:.1f}' y='20' width='{w:.1f}' height='30' fill='{TIME_COLOURS[name]}'>"
                f"<title>{name}</title></rect>"
            )
            x += w
        label = " / ".join(f"{n} {y / total:.0%}" for n, y in ys.items())
        return (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='620' height='70'>"
            f"<text x='0' y='14' font-size='12'>step time: {label}</text>{''.join(parts)}</svg>"
        )
