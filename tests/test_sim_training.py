"""gv.sim.training and gv.sim.placement: memory by hand count, placement on pods, scaled rows."""

import pytest

import gspmd_viz as gv
from gspmd_viz.sim import placement as pl
from gspmd_viz.sim import training as st

SMALL = st.Transformer(layers=2, d_model=4, heads=2, head_dim=3, hidden=8, seq=5)


def test_memory_equals_a_hand_count_for_a_small_config():
    # params per layer: 4 * 4 * (2*3) + 2 * 4 * 8 = 96 + 64 = 160; two layers: 320
    assert SMALL.params == 320
    lay = st.Layout("2d", data=2, model=2)
    got = st.memory(SMALL, lay, batch=4)
    # weights, grads f32 and Adam's m, v over 2 x 2 devices
    assert got["weights"] == 320 * 4 / 4 and got["grads"] == 320 * 4 / 4
    assert got["slots"] == 320 * 8 / 4
    # per token per layer: 4M = 16 whole; 4ND + N*seq + 2H = 24 + 10 + 16 = 50, split over
    # model=2 -> 25; 41 elements x 2 B; tokens per device = 4 / 2 * 5 = 10; 2 layers
    assert got["activations"] == 10 * 41 * 2 * 2
    # one layer's weights and gradient over the model axis, while it runs: 160 / 2 * 8 B
    assert got["transient"] == 160 / 2 * 8
    remat = st.memory(SMALL, st.Layout("2d", 2, 2, remat=True), batch=4)
    # layer inputs (M each) for both layers plus one layer's full set while it recomputes
    assert remat["activations"] == 10 * (4 * 2 * 2 + 41 * 2)


def test_dp_and_wus_memory_differ_by_one_over_n_in_grads_and_slots():
    dp = st.memory(SMALL, st.Layout("dp", 4), batch=4)
    wus = st.memory(SMALL, st.Layout("dp+wus", 4), batch=4)
    assert wus["weights"] == dp["weights"]
    assert wus["grads"] == dp["grads"] / 4 and wus["slots"] == dp["slots"] / 4


def test_bad_layouts_get_clear_errors():
    with pytest.raises(ValueError, match="strategy"):
        st.Layout("zero3", 4)
    with pytest.raises(ValueError, match="model axis"):
        st.Layout("dp", 4, model=2)
    with pytest.raises(ValueError, match="split"):
        st.memory(SMALL, st.Layout("dp", 3), batch=4)


def test_placement_fills_physical_dims_minor_first():
    pod = gv.sim.preset("tpu-v3-pod")
    where = pl.place({"x": 64, "y": 16}, pod)
    assert where == {"x": ((1, 2), (0, 32)), "y": ((1, 16),)}
    assert pl.sub_torus(where, ("y",), pod).shape == (16,)
    assert pl.sub_torus(where, ("y",), pod).wrap == (False,)  # part of a dim: a line
    both = pl.sub_torus(where, ("x", "y"), pod)
    assert both.shape == (32, 32) and both.wrap == (True, True)
    multipod = gv.sim.preset("tpu-v3-multipod")
    data = pl.sub_torus(pl.place({"x": 128, "y": 32}, multipod), ("x",), multipod)
    assert data.shape == (128,) and data.wrap == (False,)  # the multipod's no-wrap dim
    with pytest.raises(ValueError, match="multiply"):
        pl.place({"x": 3}, pod)


def test_collective_seconds_agree_with_the_link_level_simulator():
    ring = gv.sim.torus((8,), True)
    for kind in ("all-reduce", "all-gather", "reduce-scatter"):
        sim = gv.sim.simulate(ring, kind, 2**20, algorithm="bidirectional-ring").time_s
        assert pl.collective_seconds(kind, 2**20, ring) == pytest.approx(sim, rel=1e-9)


def test_scale_rows_evaluates_named_dims_at_a_new_size():
    rows = [
        ("all-gather", ("x",), 4, True, (("M", ("x",)), ("H", ("y",)))),
        ("all-reduce", ("x",), 4, False, ()),
    ]
    got = st.scale_rows(rows, {"M": 64, "H": 128}, {"x": 4, "y": 2}, layers=3)
    assert got == [("all-gather", ("x",), 4 * 16 * 64 * 4, 3), ("all-reduce", ("x",), 4.0, 1)]


def test_pipeline_bubble_is_the_gpipe_fraction_of_the_makespan():
    cfg = st.Transformer(layers=4, d_model=8, heads=2, head_dim=4, hidden=16, seq=4)
    lay = st.Layout("pipeline", data=1, stages=4, microbatches=8)
    t = st.step_time(cfg, lay, 8, rows=[], topo=gv.sim.torus((4,)))
    frac = 3 / (8 + 4 - 1)
    assert t["bubble"] / (t["compute"] + t["bubble"]) == pytest.approx(frac)


def test_a_placed_2d_group_times_like_the_link_level_simulation_of_its_sub_torus():
    pod = gv.sim.preset("4x4")
    where = pl.place({"x": 2, "y": 8}, pod)  # x: 2 chips of dim 0; y: dim 1 (4) x dim 0 (2)
    sub = pl.sub_torus(where, ("y",), pod)
    assert sub.shape == (2, 4) and sub.wrap == (False, True)
    sim = gv.sim.simulate(sub, "all-reduce", 2**16, algorithm="torus-2d").time_s
    assert pl.collective_seconds("all-reduce", 2**16, sub) == pytest.approx(sim, rel=1e-9)


@pytest.mark.parametrize(
    "name", ["tpu-v5e-8x16", "tpu-v6e-256", "tpu-v5p-4x4x8", "tpu-v4-4096", "tpu7x-9216"]
)
def test_the_pod_model_runs_on_todays_slices(name):
    """A 2-D layout's all-reduce over x on the slice's own chip and links: the closed form of the
    placed group equals the link-level simulation of its sub-torus; compute uses that chip."""
    topo = gv.sim.preset(name)
    chip = gv.sim.chip(gv.sim.chip_of(topo))
    lay = st.Layout("2d", data=topo.n_chips // 8, model=8)
    rows = [("all-reduce", ("x",), 2**20, False, ())]
    t = st.step_time(SMALL, lay, lay.data, rows, topo)
    sub = pl.sub_torus(pl.place({"x": lay.data, "y": 8, "stage": 1}, topo), ("x",), topo)
    linked = gv.sim.simulate(sub, "all-reduce", 2**20, chip=chip, pad=True).time_s
    assert t["communication"] == pytest.approx(linked, rel=1e-3)
    tokens = lay.data * SMALL.seq
    flops = tokens * SMALL.flops_per_token() / lay.devices
    assert t["compute"] == pytest.approx(flops / (chip.peak_bf16_flops * 0.8))
