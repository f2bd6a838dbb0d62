"""The step replay: the zoo's 2-D training step placed on a 4x4 slice, every collective replayed.

Driven kernel-side: both slider ends, every collective in the menu, an error in a handler.
Oracles: the wire-byte formulas for the records, the closed forms for the times (whole dims).
"""

import json

import jax
import pytest

import gspmd_viz as gv
from gspmd_viz.sim import placement as pl
from gspmd_viz.viz.torus import step_replay as torus_step
from gspmd_viz.zoo import examples
from gspmd_viz.zoo import training as tz

SLICE = gv.sim.preset("4x4")
RING = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-gather": lambda n: (n - 1) / n,
        "reduce-scatter": lambda n: (n - 1) / n}  # fmt: skip


@pytest.fixture(scope="module")
def spmd():
    mesh = gv.Mesh({"x": 4, "y": 4})  # symbolic: 16 devices, none needed
    step = gv.weight_update_sharding(tz.make_step(mesh, examples.TRANSFORMER_SPECS), mesh, "x")
    params, opt, batches = tz.init(layers=1, batch=16)
    shapes = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, opt, batches(0))
    )
    return gv.partition(gv.propagate(gv.trace(step, *shapes)))


@pytest.fixture(scope="module")
def tl(spmd):
    return torus_step.simulate(spmd, SLICE)


def test_records_carry_the_S_of_the_wire_formulas(spmd):
    records = torus_step.step_records(spmd)
    assert len(records) == len(spmd.collectives)
    for (kind, axes, s, runs), c in zip(records, spmd.collectives, strict=True):
        assert (kind, axes, runs) == (c.kind, c.axes, c.trips)
        assert RING[kind](c.group_size) * s == pytest.approx(c.wire_bytes)


def test_the_step_on_whole_dims_times_like_the_sum_of_closed_forms(spmd, tl):
    where = pl.place({"x": 4, "y": 4}, SLICE)
    closed = sum(
        runs * pl.collective_seconds(kind, s, pl.sub_torus(where, axes, SLICE))
        for kind, axes, s, runs in torus_step.step_records(spmd)
    )
    assert tl.time_s == pytest.approx(closed, rel=1e-9)


def _title(w):
    return w.plot.figure["layout"]["title"]["text"]


def _agrees(w, step):
    c = w.timeline.collectives[w.collective.value]
    assert c.first_step <= step < c.first_step + c.n_steps
    assert f"{c.index + 1}/{len(w.timeline.collectives)} {c.label}" in _title(w)
    assert f"step {step + 1}/{len(w.frames)}" in _title(w)
    assert "font-weight:bold" in w.table.value and w.message.value == ""
    assert "gv-stale" not in w.plot._dom_classes + w.table._dom_classes


def test_slider_ends_and_every_collective(tl):
    w = torus_step.StepReplay(tl)
    _agrees(w, 0)
    for end in (w.slider.max, w.slider.min):
        w.slider.value = end  # its speed: benchmarks/widgets.py
        _agrees(w, end - 1)
        assert len(json.dumps(w.plot.figure)) < 500_000
    for _, index in w.collective.options:
        w.collective.value = index
        assert w.slider.value == tl.collectives[index].first_step + 1
        _agrees(w, w.slider.value - 1)
    assert w.play.max == w.slider.max == len(tl.steps)


def test_an_error_in_a_handler_stays_inline_and_the_widget_recovers(tl, monkeypatch):
    w = torus_step.StepReplay(tl)

    def broken(fr, step):
        raise RuntimeError("drawing exploded")

    monkeypatch.setattr(torus_step, "figure", broken)
    w.slider.value = 5
    assert "RuntimeError: drawing exploded" in w.message.value and "\n" not in w.message.value
    assert "gv-stale" in w.plot._dom_classes and "gv-stale" in w.table._dom_classes
    monkeypatch.undo()
    w.slider.value = 6
    _agrees(w, 5)


def test_static_figure_and_table_for_readers_without_a_kernel(tl):
    w = torus_step.StepReplay(tl)
    w.slider.value = 3
    page = w._repr_mimebundle_()["text/html"]
    assert page.startswith("<svg") and "step 3/" in page and "gv-step-table" in page


def test_a_step_that_moves_nothing_is_refused():
    empty = gv.sim.simulate_step([("all-reduce", ("x",), 0)], {"x": 4, "y": 4}, SLICE)
    with pytest.raises(ValueError, match="moves no bytes"):
        torus_step.StepReplay(empty)
