"""Widget benchmark: kernel-side time and bytes sent to the browser per frame, per widget.

Run: PYTHONPATH=. .venv/bin/python benchmarks/widgets.py [torus] [pipeline]
Goal (the widget rule): a control change redraws within 300 ms and sends under 500 kB. The kernel
side is measured here; the browser side (render time) by the browser tests. Each widget appends
its own section below.
"""

from __future__ import annotations

import json
import statistics
import time


def output_bytes(view) -> int:
    """Bytes of the figure a PlotlyView sends over the comm for one redraw."""
    return len(json.dumps(view.figure).encode())


# ----- lesson 05: the torus widget -------------------------------------------------------------
def _switch_ms(w, preset, repeats=3) -> float:
    """Median time of the control change to `preset` (from 2x4): simulate, frames, first draw."""
    times = []
    for _ in range(repeats):
        w.preset.value = "2x4"
        t0 = time.perf_counter()
        w.preset.value = preset
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _step_ms(w, repeats=9) -> float:
    """Median time of a slider move to another step: one frame drawn and serialised."""
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        w.slider.value = 2 + i % (len(w.frames) - 1)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def torus():
    from gspmd_viz.viz.torus import widget as view
    from gspmd_viz.viz.torus.links import link_figure

    print("torus widget (lesson 05): kernel-side time per update, bytes sent per frame")
    print(
        f"  {'topology':<18}{'chips':>6}{'new timeline':>14}{'step change':>13}{'bytes/frame':>13}"
        f"{'link view would send':>22}"
    )
    w = view.TorusWidget()
    for preset in ("4x4", "tpu-v3-pod", "tpu-v3-multipod"):
        rebuild = _switch_ms(w, preset)
        step = _step_ms(w)
        sent = output_bytes(w.plot)
        links = len(link_figure(w.frames, 0).to_json().encode())
        print(
            f"  {preset:<18}{w.frames.tl.topo.n_chips:>6}{rebuild:>11.0f} ms{step:>10.0f} ms"
            f"{sent / 1e3:>10.0f} kB{links / 1e3:>12.0f} kB ({links / sent:.0f}x)"
        )
    assert w.message.value == "", w.message.value


# ----- lesson 07: the step replay -----------------------------------------------------------
def step_replay():
    import jax

    import gspmd_viz as gv
    from gspmd_viz.viz.torus import step_replay as torus_step
    from gspmd_viz.zoo import examples
    from gspmd_viz.zoo import training as tz

    mesh = gv.Mesh({"x": 4, "y": 4})  # lesson 07's step, symbolic on 16 devices
    step = gv.weight_update_sharding(tz.make_step(mesh, examples.TRANSFORMER_SPECS), mesh, "x")
    p, o, b = tz.init(layers=1, batch=16, seq=128, model=512, heads=8, head_dim=64, hidden=2048)
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (p, o, b(0)))
    spmd = gv.partition(gv.propagate(gv.trace(step, *shapes)))
    t0 = time.perf_counter()
    w = torus_step.StepReplay(torus_step.simulate(spmd, gv.sim.preset("4x4")))
    built = (time.perf_counter() - t0) * 1e3
    jumps = []
    for _, index in w.collective.options:
        t0 = time.perf_counter()
        w.collective.value = index
        jumps.append(time.perf_counter() - t0)
    print("step replay (lesson 07): the 2-D + WUS step on a 4x4 slice")
    print(
        f"  simulate + first frame {built:.0f} ms; step change {_step_ms(w):.0f} ms; collective "
        f"jump {statistics.median(jumps) * 1e3:.0f} ms; {output_bytes(w.plot) / 1e3:.0f} kB/frame"
    )
    assert w.message.value == "", w.message.value


# ----- lesson 06: the pipeline widget ----------------------------------------------------------
PIPELINE_CHANGES = [  # (what, control, values it alternates between)
    ("schedule dropdown", "schedule", ("gpipe", "1f1b")),
    ("stages slider, S=8 M=32", "stages", (8, 7)),
    ("ratio text, zb-h1 S=8 M=32", "ratio", ("1:1:1", "1:2:1")),
    ("chunks slider, interleaved V=4", "virtual", (4, 3)),
    ("frame slider (Play step)", "frame", (10, 11)),
    ("bad text (message)", "ratio", ("one:two", "0:1")),
]
PIPELINE_SETUP = {  # controls set before the change is timed
    "stages slider, S=8 M=32": {"microbatches": 32},
    "ratio text, zb-h1 S=8 M=32": {"schedule": "zb-h1", "stages": 8, "microbatches": 32},
    "chunks slider, interleaved V=4": dict(schedule="interleaved-1f1b", stages=8, microbatches=32),
}


def _pipeline_change(what, control, values, repeats=7) -> tuple[float, int, float]:
    """Median ms of the change (kernel side, every view rebuilt), the bytes of the figure it
    sent last and how many figures a change sends."""
    from gspmd_viz.viz.pipeline.widget import PipelineWidget

    w = PipelineWidget()
    for name, value in PIPELINE_SETUP.get(what, {}).items():
        getattr(w, name).value = value
    sent = []
    w.plot.observe(lambda _: sent.append(output_bytes(w.plot)), "figure")
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        getattr(w, control).value = values[i % 2]
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, (sent or [0])[-1], len(sent) / repeats


def pipeline():
    print("pipeline widget (lesson 06): kernel-side time per change, bytes of the figure sent")
    print(f"  {'change':<34}{'kernel':>10}{'bytes/frame':>13}{'figures/change':>16}")
    for what, control, values in PIPELINE_CHANGES:
        ms, sent, figures = _pipeline_change(what, control, values)
        print(f"  {what:<34}{ms:>7.1f} ms{sent / 1e3:>10.0f} kB{figures:>16.2g}")


WIDGETS = {"torus": torus, "step_replay": step_replay, "pipeline": pipeline}

if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or WIDGETS:  # e.g. `benchmarks/widgets.py pipeline`
        WIDGETS[name]()
