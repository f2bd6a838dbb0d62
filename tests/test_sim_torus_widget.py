"""The torus widget, driven kernel-side through every control, option, slider end and bad text.

After every change the controls must describe what is drawn (`_agrees`), and every bad input
must leave a one-line inline message with the stale figure greyed, never an exception; the next
good input must bring the widget back.
"""

import json

import plotly.graph_objects as go
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.viz.torus import widget as torus


def _agrees(w: torus.TorusWidget):
    """The controls describe the recorded timeline and the figure shows it."""
    tl = w.frames.tl
    shape = torus.parse_torus_shape(w.size.value)
    assert tl.topo.shape == shape
    assert tl.topo.wrap == sim.torus(shape, w.wrap.value).wrap
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
    return w.plot.figure["layout"]["title"]["text"]


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
