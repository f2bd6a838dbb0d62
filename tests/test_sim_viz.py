"""The torus view and widget replay the recorded timeline; bad input shows inline messages."""

import numpy as np
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.viz import timeline, torus


def _tl(name="torus-2d", shape=(4, 4)):
    return sim.simulate(sim.torus(shape), "all-reduce", 2**20, algorithm=name)


def test_frames_replay_the_timeline():
    tl = _tl()
    fr = torus.frames(tl)
    assert fr.level.shape == (len(tl.steps), tl.topo.n_links)
    for i, rec in enumerate(tl.steps):  # busy links in a frame are exactly the step's links
        busy = set(fr.links[fr.level[i] > 0])
        assert busy == set(rec.links.tolist())
    # ownership starts at 1/N of the final sum per chip and ends complete (the symbolic oracle)
    assert np.allclose(fr.held[0], 1 / tl.topo.n_chips)
    assert np.allclose(fr.held[-1], 1.0)


def test_phase_one_links_are_drawn_lighter():
    tl = _tl()
    fr = torus.frames(tl)
    phase = np.array([r.phase for r in tl.steps])
    assert fr.level[phase == 0].max() > fr.level[phase == 1].max()


def test_figure_marks_the_busiest_link_and_names_the_phase():
    tl = _tl("torus-2d-halves")
    fig = torus.figure(torus.frames(tl), 0)
    names = [t.name for t in fig.data]
    assert "busiest link" in names and "chips" in names
    assert "phase 0" in fig.layout.title.text
    with pytest.raises(ValueError, match="step must be"):
        torus.figure(torus.frames(tl), len(tl.steps))


def test_3d_and_1d_topologies_draw():
    for topo, name in [(sim.preset("tpu-v4-4x4x4"), "torus-3d"), (sim.preset("ring-8"), "ring")]:
        tl = sim.simulate(topo, "all-reduce", 2**20, algorithm=name, chip="tpu-v4")
        fig = torus.figure(torus.frames(tl), 1)
        assert len(fig.data) > 3


def test_widget_controls_and_inline_errors():
    w = torus.TorusWidget()
    assert w.frames is not None and w.message.value == ""
    assert "phase 1" in w.summary.value and "torus-2d:" in w.summary.value
    n_steps = len(w.frames)
    w.slider.value = n_steps  # the slider counts steps from 1, like the titles
    assert f"step {n_steps}/{n_steps}" in w.figure.layout.title.text
    w.slider.value = 1
    assert "step 1/" in w.figure.layout.title.text
    w.payload.value = "-3"
    assert "payload" in w.message.value
    w.payload.value = "__import__('os')"  # never evaluated
    assert "cannot read" in w.message.value
    w.payload.value = "1000"  # not divisible into the algorithm's chunks
    assert "does not split" in w.message.value
    w.payload.value = "4 MiB"
    assert w.message.value == ""
    w.preset.value = "custom"
    w.size.value = "0x4"
    assert "positive" in w.message.value
    w.size.value = "3x3"
    w.algorithm.value = "torus-2d-halves"
    w.payload.value = "36 KiB"
    assert w.message.value == "" and w.frames.tl.topo.shape == (3, 3)
    w.algorithm.value = "naive"
    assert w.frames.tl.algorithm == "naive"
    w.kind.value = "all-to-all"
    assert w.frames.tl.kind == "all-to-all"
    w.kind.value = "all-reduce"
    w.algorithm.value = "torus-2d"
    w.preset.value = "tpu-v4-4x4x4"  # a 3-D preset switches a 2-D algorithm to torus-3d
    assert w.algorithm.value == "torus-3d"
    assert w.message.value == "" and w.frames.tl.topo.ndim == 3
    w.algorithm.value = "torus-2d"
    assert "3-D" in w.message.value or "2-D" in w.message.value


def test_parse_helpers():
    assert torus.parse_shape("4x4x2") == (4, 4, 2)
    with pytest.raises(ValueError):
        torus.parse_shape("four by four")


def test_time_vs_payload_curves_follow_the_closed_forms():
    topo = sim.torus((4, 4))
    fig = timeline.time_vs_payload(topo, sizes=[2**12, 2**20, 2**28])
    lines = {t.name: t for t in fig.data if t.mode == "lines"}
    assert set(sim.applicable(topo)) <= set(lines)
    for name in sim.applicable(topo):
        expect = [sim.closed_form(topo, "all-reduce", s, name) for s in (2**12, 2**20, 2**28)]
        assert np.allclose(lines[name].y, expect)
    bound = lines["bandwidth lower bound"].y
    assert all(min(t.y[i] for n, t in lines.items() if n != "bandwidth lower bound") >= bound[i]
               for i in range(3))  # fmt: skip
