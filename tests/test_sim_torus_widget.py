"""The torus widget, driven kernel-side through every control, option, slider end and bad text.

After every change the controls must describe what is drawn (`_agrees`), and every bad input
must leave a one-line inline message with the stale figure greyed, never an exception; the next
good input must bring the widget back.
"""

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.viz.torus import widget as torus
from gspmd_viz.viz.torus.frames import COLOURS, LEVELS
from gspmd_viz.viz.torus.heatmap import grid_cells


def _agrees(w: torus.TorusWidget):
    """The controls describe the recorded timeline and the figure shows it."""
    tl = w.frames.tl
    shape = torus.parse_torus_shape(w.size.value)
    assert tl.topo.shape == shape
    if w.wrap.value == torus.TWISTED:
        expected = sim.topology.twisted_torus(shape)
    else:
        expected = sim.torus(shape, w.wrap.value)
    assert (tl.topo.wrap, tl.topo.twisted) == (expected.wrap, expected.twisted)
    assert tl.topo.twist in ((), expected.twist)
    assert (tl.kind, tl.algorithm, tl.chip.name) == (w.kind.value, w.algorithm.value, w.chip.value)
    _offers_what_sim_runs(w.algorithm.options, tl.topo, tl.kind)
    if w.preset.value != torus.CUSTOM:
        assert tl.topo == sim.preset(w.preset.value)
        assert w.chip.value == torus.PRESET_CHIPS.get(w.preset.value, w.chip.value)
    assert f"{tl.kind} {tl.algorithm} on {tl.topo.describe()} ({tl.chip.name})" in _title(w)
    assert w.message.value == "" and "gv-stale" not in w.plot._dom_classes + w.summary._dom_classes
    assert w.slider.max == w.play.max == len(w.frames)


def _offers_what_sim_runs(options, topo, kind):
    """The algorithm dropdown lists every algorithm sim runs here; the ones it leaves out are
    exactly those sim refuses to schedule (too many transfers)."""
    applicable = sim.applicable(topo, kind)
    assert [n for n in applicable if n in options] == list(options)
    for name in set(applicable) - set(options):
        with pytest.raises(ValueError, match="transfers"):
            sim.schedule(topo, kind, name)


def _title(w):
    """The figure's title; a long first line is broken in two, joined again here."""
    return w.plot.figure["layout"]["title"]["text"].replace("<br>", " ")


def _failed(w, *words):
    assert w.message.value.startswith("<span class='gv-error'"), w.message.value
    assert "\n" not in w.message.value
    for word in words:
        assert word in w.message.value, (word, w.message.value)
    assert "gv-stale" in w.plot._dom_classes and "gv-stale" in w.summary._dom_classes


@pytest.fixture
def w():
    return torus.TorusWidget()


def test_every_preset_sets_size_wrap_and_chip(w):
    for name in w.preset.options:
        if name == torus.CUSTOM:
            continue
        w.preset.value = name
        _agrees(w)
        assert w.frames.tl.topo.name == name
    w.preset.value = "tpu-v4-4x4x4"
    assert w.chip.value == "tpu-v4" and w.algorithm.value == "torus-3d"
    w.chip.value = "tpu-v3"  # a v3 chip in a 4x4x4 cube is no longer the v4 preset
    assert w.preset.value == torus.CUSTOM
    _agrees(w)
    w.preset.value = "tpu-v3-pod"
    w.size.value = "8x8"  # typing a size that is no preset
    assert w.preset.value == torus.CUSTOM
    _agrees(w)
    w.size.value = "4x4"  # and back to one
    assert w.preset.value == "4x4"
    _agrees(w)


def test_every_wrap_choice_of_every_rank(w):
    w.pad.value = True  # 1 MiB does not split into 3x5's chunks
    for size in ("16", "3x5", "3x4x2"):
        w.size.value = size
        for _, wrap in torus.wrap_options(len(torus.parse_torus_shape(size))):
            w.wrap.value = wrap
            _agrees(w)


@pytest.mark.parametrize("size", ["4x4", "2x2x2", "8"])
def test_every_collective_and_algorithm(w, size):
    w.size.value = size
    w.payload.value = "1.5 MiB"
    w.pad.value = True  # 1.5 MiB splits for some algorithms only
    for kind in w.kind.options:
        w.kind.value = kind
        for name in w.algorithm.options:
            w.algorithm.value = name
            _agrees(w)
    for chip in w.chip.options:
        w.chip.value = chip
        _agrees(w)


def test_slider_ends_and_play(w):
    n = len(w.frames)
    w.slider.value = n
    assert f"step {n}/{n}" in _title(w)
    w.slider.value = 1
    assert f"step 1/{n}" in _title(w)
    w.play.playing = True  # a learner switches topology while it plays
    w.preset.value = "tpu-v3-multipod"
    assert not w.play.playing and w.slider.value == 1  # the new timeline waits at step 1
    n = len(w.frames)
    w.slider.value = n
    assert f"step {n}/{n}" in _title(w)
    _agrees(w)


BAD_SIZES = {
    "1x1": "one chip",
    "1": "one chip",
    "1x1x1": "one chip",
    "": "write sizes like",
    "abc": "write sizes like",
    "4x-4": "write sizes like",
    "0x4": "positive",
    "4x4x4x4": "1, 2 or 3 dims",
    "99999x2": "up to 9216",
    "128x128": "up to 9216",
    "9216": "lines of up to 128 chips",  # 4 to 40 s of simulation: refused
    "1x1x9216": "lines of up to 128 chips",
    "2x129": "lines of up to 128 chips",
}
BAD_PAYLOADS = ["", "-3", "abc", "__import__('os')", "0", "0.5", "1.5 PiB", "1e6", "1 MB"]


def test_bad_sizes_and_payloads_show_inline_and_recover(w):
    for size, words in BAD_SIZES.items():
        w.size.value = size
        _failed(w, words)
        w.size.value = "4x4"
        _agrees(w)
    for payload in BAD_PAYLOADS:
        w.payload.value = payload
        _failed(w, "payload")
        w.payload.value = "1.5 GiB"  # units.parse_bytes reads decimals with a unit
        _agrees(w)
        assert w.frames.tl.nbytes == 3 * 2**29


def test_indivisible_payload_names_the_pad_control(w):
    w.size.value = "3x3"
    w.payload.value = "1000"
    _failed(w, "does not split into the 18 equal chunks", "pad=True", "1,008 B")
    assert "pad=True" in w.pad.description
    w.pad.value = True
    _agrees(w)
    assert w.frames.tl.chunk_bytes == 56


def test_too_big_all_to_all_is_refused_inline(w):
    w.kind.value = "all-to-all"
    w.preset.value = "tpu-v3-pod"
    _failed(w, "all-to-all on 1024 chips")
    w.preset.value = "4x4"
    _agrees(w)


def test_an_unexpected_error_is_shown_and_the_widget_keeps_working(w, monkeypatch):
    def broken(tl):
        raise RuntimeError("frames exploded")

    monkeypatch.setattr(torus, "frames", broken)
    w.payload.value = "2 MiB"
    _failed(w, "RuntimeError: frames exploded")
    monkeypatch.undo()
    w.payload.value = "4 MiB"
    _agrees(w)


def _sent(w) -> list[int]:
    """Bytes of every figure (with its summary) the widget sends from now on."""
    sizes = []
    w.plot.observe(lambda _: sizes.append(len(json.dumps(w.plot.figure)) + len(w.summary.value)))
    return sizes


PRESETS = list(torus.PRESETS)


def test_the_dropdown_offers_every_pod_sim_names(w):
    assert w.preset.options == (*PRESETS, torus.CUSTOM)
    assert set(sim.presets.NAMED) <= set(PRESETS)
    twisted = {f"tpu-v5p-{shape}-twisted" for shape in ("4x8x8", "8x16x16", "12x12x24")}
    twisted |= {"tpu-v4-4x4x8-twisted", "tpu-v4-8x16x16-twisted"}
    assert twisted <= set(sim.presets.twisted_slices()) <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_algorithm_payload_slider_end_and_kind_sends_under_500_kB(w, name):
    """Every control on every preset (the 9,216-chip pod included) draws, agrees and sends less
    than the widget rule's 500 kB per change."""
    sent = _sent(w)
    w.preset.value = name
    assert w.chip.value == (torus.PRESET_CHIPS.get(name) or sim.chip_of(sim.preset(name)))
    w.pad.value = True  # every algorithm then splits every payload
    for algorithm in w.algorithm.options:
        w.algorithm.value = algorithm
        _agrees(w)
        n = len(w.frames)
        w.slider.value = n
        assert f"step {n}/{n}" in _title(w)
        w.slider.value = 1
    for payload in ("32 KiB", "1 GiB"):
        w.payload.value = payload
        _agrees(w)
    w.payload.value = "one MiB"
    _failed(w, "payload")
    w.payload.value = "1 MiB"
    heatmaps = any(isinstance(t, go.Heatmap) for t in w.figure.data)
    assert heatmaps == (sim.preset(name).n_chips > 256)  # big pods: one cell per chip
    for kind in w.kind.options:
        w.kind.value = kind
        if kind == "all-to-all" and sim.preset(name).n_chips > torus.A2A_MAX_CHIPS:
            _failed(w, "all-to-all on")
        else:
            _agrees(w)
    assert len(sent) > 2 and max(sent) < 500_000


def test_todays_slices_follow_their_rules(w):
    w.preset.value = "tpu-v5e-8x16"  # the axis of 8 has no wraparound on a v5e sub-slice
    assert w.wrap.value == (False, True) and w.chip.value == "tpu-v5e"
    assert "swing" not in w.algorithm.options  # Swing needs a torus
    w.preset.value = "tpu-v5e-256"
    assert "swing" in w.algorithm.options
    w.algorithm.value = "swing"
    _agrees(w)
    w.preset.value = "tpu7x-9216"  # 9,216 chips: 1 MiB has no equal chunks, so pad is set
    assert w.pad.value and w.frames.tl.topo.n_chips == 9216


def test_static_figure_for_readers_without_a_kernel(w):
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].startswith("<svg") and "step 1/12" in bundle["text/html"]


def test_going_back_to_a_setting_reuses_its_timeline_within_the_memory_budget(w):
    w.payload.value = "2 MiB"
    first = w.frames
    w.payload.value = "4 MiB"
    assert w.frames is not first and w.frames.tl.nbytes == 4 * 2**20
    w.payload.value = "2 MiB"
    assert w.frames is first  # not simulated again
    w.preset.value = "tpu7x-9216"
    w.algorithm.value = "torus-3d-thirds"  # 6.7 million transfers: more than the budget alone
    kept = [fr.tl for fr in w._recorded.values()]
    assert kept == [w.frames.tl]
    assert sum(len(r.step.dst) for r in w.frames.tl.steps) > torus.KEPT_TRANSFERS


def test_the_widest_heatmap_a_typed_size_can_make_sends_under_500_kB(w):
    """126x1x73 (and its transpose) make the most heatmap cells of any size the widget takes (at
    most 9,216 chips, lines of at most 128; found by trying every 3-D shape): a dim of 1 makes
    every other column a gap between slices."""
    sent = _sent(w)
    w.pad.value = True
    for size in ("126x1x73", "1x126x73"):
        w.size.value = size
        _agrees(w)
    assert len(sent) == 2 and max(sent) < 500_000


TWISTED = [name for name in PRESETS if name.endswith("-twisted")]


def _offers_what_sim_schedules(w, topo):
    """The algorithm choices are those sim applies here less those it refuses to schedule (a
    ring through 3,456 chips has more transfers than sim's cap)."""
    for name in sim.applicable(topo, "all-reduce"):
        if name not in w.algorithm.options:
            with pytest.raises(ValueError, match="transfers"):
                sim.schedule(topo, "all-reduce", name)
    assert set(w.algorithm.options) <= set(sim.applicable(topo, "all-reduce"))


@pytest.mark.parametrize("name", TWISTED)
def test_every_wraparound_choice_and_typed_size_of_a_twisted_slice(w, name):
    """A twisted slice offers its twist among the wraparound choices; leaving it draws the
    untwisted torus, coming back draws the preset again, and a typed size that cannot twist
    falls back to every dim wrapping."""
    w.pad.value = True
    w.preset.value = name
    assert w.wrap.value == torus.TWISTED and w.frames.tl.topo.twisted
    _offers_what_sim_schedules(w, sim.preset(name))
    shape = sim.preset(name).shape
    if math.prod(shape) <= 256:  # drawn link by link; the static SVG says where stubs re-enter
        reentry = f"re-enters slice (s + {min(shape)}) mod {shape[2]}"
        assert reentry in w._repr_mimebundle_()["text/html"]
    for _, wrap in w.wrap.options:
        w.wrap.value = wrap
        _agrees(w)
        assert (w.preset.value == name) == (wrap == torus.TWISTED)
    w.wrap.value = torus.TWISTED
    assert w.preset.value == name
    w.size.value = "4x4x4"  # no twisted torus has this shape
    assert w.wrap.value == (True, True, True) and not w.frames.tl.topo.twisted
    assert torus.TWISTED not in dict(w.wrap.options).values()
    _agrees(w)
    w.size.value = "3x6x6"  # a twisted shape no TPU offers: drawn as a custom twisted torus
    w.wrap.value = torus.TWISTED
    assert w.preset.value == torus.CUSTOM
    assert w.frames.tl.topo.twist == ((0, 3, 3), (0, 0, 0), (0, 0, 0))  # lands 3 along dims 1, 2
    _agrees(w)


def _nearest_chip(xy, point) -> int:
    return int(np.argmin(np.hypot(*(xy - point).T)))


def _drawn_links(fig, fr) -> dict[int, tuple[int, int]]:
    """link id -> (load level, chip its drawing ends at) read back from the link view's traces:
    a straight line runs from beside its source chip to beside its destination, a wraparound
    link is two stubs (leaving its source, re-entering at its destination), a dim-2 tick leaves
    its source up-right (+) or down-left (-)."""
    topo, xy, out = fr.tl.topo, fr.xy, {}
    for tr in fig.data:
        if tr.mode != "lines" or tr.line.color not in COLOURS or tr.x[0] is None:
            continue  # the busiest links' red overlay (also drawn in their level's colour), or
            # a level no link has
        seg_len = 6 if tr.line.dash == "dot" else 4
        for seg in np.stack([tr.x, tr.y], 1).astype(float).reshape(-1, seg_len, 2):
            src = _nearest_chip(xy, seg[0])
            if np.isnan(seg[2]).any() and (seg_len == 4 or np.isnan(seg[3]).any()):  # a tick
                sign = np.sign(seg[1, 0] - xy[src, 0])
                link, dst = (src * 3 + 2) * 2 + (sign < 0), None
            else:
                dst = _nearest_chip(xy, seg[2] if seg_len == 4 else seg[4])
                slots = np.arange(src * topo.ndim * 2, (src + 1) * topo.ndim * 2)
                (link,) = slots[topo.link_dst[slots] == dst]
            assert link not in out, "a link drawn twice"
            out[int(link)] = (COLOURS.index(tr.line.color), dst)
    return out


def _levels_from_record(tl, step) -> dict[int, int]:
    """link id -> load level by the colour scale's definition: level b holds the links whose
    bytes in this step are in ((b-1)/5, b/5] of the busiest link of the whole timeline."""
    peak = max(r.max_link_bytes for r in tl.steps)
    rec = tl.steps[step]
    levels = {int(link): 0 for link in np.flatnonzero(tl.topo.link_exists)}
    for link, nbytes in zip(rec.links, rec.link_bytes, strict=True):
        levels[int(link)] = max(1, int(np.ceil(nbytes / peak * (LEVELS - 1) - 1e-9)))
    return levels


def _twisted_landing(topo, link) -> tuple[int, ...]:
    """Where a wraparound link of dim d lands, by the twisted torus's definition (Camara et al.):
    the far end of dim d, moved k chips along every long dim when d is short."""
    src, _, d, sign = topo.link_info(link)
    coord = np.array(topo.coord(src))
    coord[d] += sign
    if not 0 <= coord[d] < topo.shape[d]:
        k = min(topo.shape)
        long = np.array([n == 2 * k for n in topo.shape]) * (topo.shape[d] == k)
        coord = (coord + sign * k * long) % topo.shape
    return tuple(int(c) for c in coord)


def _wrap_step(tl) -> int:
    """The first step that loads a twisted wraparound link."""
    for i, rec in enumerate(tl.steps):
        for link in rec.links:
            src, dst, d, _ = tl.topo.link_info(link)
            if d < 2 and abs(tl.topo.coord(dst)[2] - tl.topo.coord(src)[2]) > 0:
                return i
    raise AssertionError("no step loads a twisted wraparound link")


@pytest.mark.parametrize("name", ["tpu-v4-4x4x8-twisted", "tpu-v5p-4x8x8-twisted"])
def test_a_twisted_step_draws_every_link_with_its_recorded_bytes_where_it_lands(name):
    """The all-to-all loads every link, twisted wraparound ones included (the rings sim runs on a
    twisted torus use none)."""
    topo = sim.preset(name)
    tl = sim.simulate(topo, "all-to-all", 2**20, algorithm="direct")
    fr = torus.frames(tl)
    step = _wrap_step(tl)
    drawn = _drawn_links(torus.figure(fr, step), fr)
    assert {link: lv for link, (lv, _) in drawn.items()} == _levels_from_record(tl, step)
    for link, (_, dst) in drawn.items():
        if dst is not None:  # every straight line and wraparound stub ends at the chip it reaches
            assert topo.coord(dst) == _twisted_landing(topo, link)


def test_a_twisted_pods_heatmap_shows_each_chips_recorded_links():
    """8x8x16 (1,024 chips) is drawn as heatmaps: panel d colours each chip's cell by the busier
    of the two dim-d links leaving it, wraparound ones included (wherever they land)."""
    tl = sim.simulate(sim.preset("tpu-v5p-8x8x16-twisted"), "all-to-all", 2**20, algorithm="direct")
    fr = torus.frames(tl)
    step = _wrap_step(tl)
    fig = torus.figure(fr, step)
    levels = _levels_from_record(tl, step)
    rows, cols, _ = grid_cells(tl.topo)
    for d, panel in enumerate(fig.data[:3]):
        z = np.asarray(panel.z)
        for chip in range(tl.topo.n_chips):
            mine = [levels.get((chip * 3 + d) * 2 + neg, 0) for neg in (0, 1)]
            assert z[rows[chip], cols[chip]] == max(mine)
