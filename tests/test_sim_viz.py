"""The torus view and widget replay the recorded timeline; bad input shows inline messages."""

import dataclasses

import numpy as np
import plotly.graph_objects as go
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.viz.torus import timeline
from gspmd_viz.viz.torus import widget as torus


def _tl(name="torus-2d", shape=(4, 4)):
    return sim.simulate(sim.torus(shape), "all-reduce", 2**20, algorithm=name)


def test_frames_replay_the_timeline():
    tl = _tl()
    fr = torus.frames(tl)
    for i, rec in enumerate(tl.steps):  # busy links in a frame are exactly the step's links
        assert fr.level_at(i).shape == (tl.topo.n_links,)
        busy = set(fr.links[fr.level_at(i) > 0])
        assert busy == set(rec.links.tolist())
    # ownership starts at 1/N of the final sum per chip and ends complete (the symbolic oracle)
    assert np.allclose(fr.held_after(-1), 1 / tl.topo.n_chips)
    assert np.allclose(fr.held_after(len(tl.steps) - 1), 1.0)


@pytest.mark.parametrize(
    "name, algorithm",
    [("4x4", "ring"), ("4x4", "torus-2d-halves"), ("2x4", "naive"),
     ("tpu-v5e-256", "swing-halving"), ("ring-8", "rabenseifner")],
)  # fmt: skip
def test_share_held_after_every_step_is_the_symbolic_replay(name, algorithm):
    """The chip colours after step i: the schedule's first i steps run by sim's executor (the
    numbers oracle), summed per chip."""
    tl = sim.simulate(sim.preset(name), "all-reduce", 2**20, algorithm=algorithm, pad=True)
    fr = torus.frames(tl)
    assert fr.held_label == "share of the final sum held"
    n, k = tl.topo.n_chips, tl.schedule.n_chunks
    for i in range(len(tl.steps) + 1):
        prefix = dataclasses.replace(tl.schedule, steps=tl.schedule.steps[:i])
        state = sim.execute.run(prefix, np.ones((n, k)))
        assert np.allclose(fr.held_after(i - 1), state.sum(1) / (n * k)), i


def test_phase_one_links_are_drawn_lighter():
    tl = _tl()
    fr = torus.frames(tl)
    phase = np.array([r.phase for r in tl.steps])
    level = np.array([fr.level_at(i) for i in range(len(fr))])
    assert level[phase == 0].max() > level[phase == 1].max()


def test_figure_marks_every_busiest_link_and_names_the_phase():
    tl = _tl("torus-2d-halves")
    fr = torus.frames(tl)
    fig = torus.figure(fr, 0)
    for i, rec in enumerate(tl.steps):  # oracle: the step's own per-link bytes
        tied = rec.links[rec.link_bytes == rec.link_bytes.max()]
        assert sorted(fr.links[fr.busiest_at(i)]) == sorted(tied)
    red = [t for t in fig.data if t.legendgroup == "busiest"]
    n_tied = len(fr.busiest_at(0))
    assert red[0].name == f"busiest links ({n_tied} tied)" and n_tied > 1
    drawn = sum(np.isfinite(np.array(t.x, float)).sum() for t in red)
    n_wrap = fr.wrap_mask[fr.busiest_at(0)].sum()  # drawn as two stubs of 2 points each
    assert drawn == 3 * (n_tied - n_wrap) + 4 * n_wrap  # every tied link is drawn
    assert "chips" in [t.name for t in fig.data]
    assert "phase 0" in fig.layout.title.text
    with pytest.raises(ValueError, match="step must be"):
        torus.figure(torus.frames(tl), len(tl.steps))


def test_3d_and_1d_topologies_draw():
    for topo, name in [(sim.preset("tpu-v4-4x4x4"), "torus-3d"), (sim.preset("ring-8"), "ring")]:
        tl = sim.simulate(topo, "all-reduce", 2**20, algorithm=name, chip="tpu-v4")
        fig = torus.figure(torus.frames(tl), 1)
        assert len(fig.data) > 3
    labels = [a.text for a in fig.layout.annotations]
    assert "dim 0 →" in labels


def test_3d_slices_are_labelled_and_laid_out_in_blocks():
    tl = sim.simulate(sim.preset("tpu-v4-4x4x4"), "all-reduce", 2**20, "torus-3d", chip="tpu-v4")
    fr = torus.frames(tl)
    labels = [a.text for a in torus.figure(fr, 0).layout.annotations]
    assert [f"slice dim 2 = {k} (dim 1 →)" for k in range(4)] == [
        t for t in labels if t.startswith("slice")
    ]
    blocks = {k: fr.xy[tl.topo.coords[:, 2] == k] for k in range(4)}
    for k in range(4):  # each slice is a 4x4 block of its own, no block overlaps another
        assert len({tuple(p) for p in blocks[k]}) == 16
    assert len({tuple(p) for p in fr.xy}) == 64


@pytest.mark.parametrize(
    "name,algorithm",
    [("tpu-v4-4x4x4", "torus-3d"), ("tpu-v5p-4x4x8-twisted", "ring"), ("tpu-v5p-2x4x4", "ring")],
)
def test_3d_slice_labels_stand_clear_of_every_drawn_link(name, algorithm):
    """Each "slice dim 2 = k" label is at least half a chip row away, up or down, from every
    chip and every link piece drawn under it (the wraparound stubs leaving its block's top row
    and the bottom row of the block above included)."""
    from gspmd_viz.viz.torus.links import geometry

    tl = sim.simulate(sim.preset(name), "all-reduce", 2**20, algorithm)
    fr = torus.frames(tl)
    gx, gy = geometry(fr)
    x, y = np.r_[gx.ravel(), fr.xy[:, 0]], np.r_[gy.ravel(), fr.xy[:, 1]]  # everything drawn
    labels = [a for a in torus.figure(fr, 0).layout.annotations if a.text.startswith("slice")]
    assert len(labels) == tl.topo.shape[2]
    half_width = (tl.topo.shape[1] - 1) / 2 + 0.5  # a block's columns and its stubs' reach
    for label in labels:
        under = np.abs(x - label.x) <= half_width
        assert np.nanmin(np.abs(y[under] - label.y)) >= 0.5, label.text


def test_low_loads_stand_out_on_white_and_the_figure_fits_1024_px():
    from gspmd_viz.viz.torus.frames import COLOURS

    def luminance(hex_colour):
        rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    for colour in COLOURS[1:]:  # every loaded level: WCAG non-text contrast on white, 3:1
        assert 1.05 / (luminance(colour) + 0.05) >= 3, colour
    for fr in (torus.frames(_tl()), torus.frames(_tl(shape=(32, 32)))):
        fig = torus.figure(fr, 0)
        assert fig.layout.width <= 1024 - 100  # room for JupyterLab's prompt and margins
        if fig.layout.legend.orientation == "h":  # the legend sits below, inside the width
            assert fig.layout.legend.y <= 0


def test_heatmap_cells_are_the_busier_of_each_chips_two_links():
    tl = _tl("torus-2d-halves", shape=(32, 32))
    fr = torus.frames(tl)
    step = 40
    fig = torus.figure(fr, step)
    maps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(maps) == 3  # dim 0 links, dim 1 links, chips
    rec, topo = tl.steps[step], tl.topo
    level = np.ceil(rec.link_bytes / fr.peak_bytes * 5).clip(1, 5)  # oracle from the record
    for d in range(2):
        expect = np.zeros(topo.shape, np.int8)
        for link, lv in zip(rec.links, level, strict=True):
            src, _, dim, _ = topo.link_info(link)
            if dim == d:
                r, c = topo.coord(src)
                expect[r, c] = max(expect[r, c], lv)
        assert np.array_equal(np.array(maps[d].z), expect), d


@pytest.mark.parametrize("algorithm, step", [("naive", 0), ("torus-3d-thirds", 60)])
def test_a_9216_chip_pod_is_drawn_as_the_record_aggregated_per_chip(algorithm, step):
    """Each cell of dim d's panel is the busier of its chip's two dim-d links, placed in its
    slice's block; the chips' panel is the share held. Oracle: the step's own per-link bytes."""
    topo = sim.preset("tpu7x-9216")
    tl = sim.simulate(topo, "all-reduce", 2**20, algorithm=algorithm, chip="tpu7x", pad=True)
    fr = torus.frames(tl)
    maps = [t for t in torus.figure(fr, step).data if isinstance(t, go.Heatmap)]
    assert len(maps) == 4  # dims 0, 1, 2 and the chips
    rec, g = tl.steps[step], int(np.ceil(np.sqrt(topo.shape[2])))
    level = np.ceil(rec.link_bytes / fr.peak_bytes * 5).clip(1, 5)
    expect = np.zeros((3, g * (topo.shape[0] + 1) - 1, g * (topo.shape[1] + 1) - 1), np.int8)
    for link, lv in zip(rec.links, level, strict=True):
        src, _, dim, _ = topo.link_info(link)
        r, c, k = topo.coord(src)
        cell = (dim, r + k // g * (topo.shape[0] + 1), c + k % g * (topo.shape[1] + 1))
        expect[cell] = max(expect[cell], lv)
    for d in range(3):
        z = np.nan_to_num(np.array(maps[d].z, float), nan=0.0)  # NaN: gaps between blocks
        assert np.array_equal(z, expect[d]), d
    held = np.array(maps[3].z, float)
    r, c, k = topo.coords.T
    cells = held[r + k // g * (topo.shape[0] + 1), c + k % g * (topo.shape[1] + 1)]
    assert np.allclose(cells, fr.held_after(step), atol=0.005)  # shown to 2 decimals


def test_parse_helpers():
    assert torus.parse_torus_shape("4x4x2") == (4, 4, 2)
    with pytest.raises(ValueError):
        torus.parse_torus_shape("four by four")


def test_every_curve_of_the_time_figure_is_told_apart_by_colour_or_dash():
    """On the 32x32 pod and a 3-D cube every applicable all-reduce is drawn, each in its own line
    style (colour and dash)."""
    for topo in (sim.preset("tpu-v3-pod"), sim.preset("tpu-v4-4x4x4")):
        fig = timeline.time_vs_payload(topo, sizes=[2**12, 2**20])
        styles = [(t.line.color, t.line.dash) for t in fig.data if t.mode == "lines"]
        assert len(styles) == len(sim.applicable(topo)) + 1 == len(set(styles))


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
