"""The halo widget replays gv.halo_plan: frames draw the plan's permutes, bytes equal the
per-device program's, every control is driven through every option, ends and bad text."""

import re

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import gspmd_viz as gv
from gspmd_viz.strategies.spatial import spatial_program
from gspmd_viz.viz.halo import draw as halo_draw
from gspmd_viz.viz.halo.widget import SHARDS, HaloWidget, caption, parse_image, parse_padding


def _arrows(svg_text: str) -> int:
    return svg_text.count('marker-end="url(#head)"')


def test_scene_permutes_are_the_programs_permutes():
    # the same 2-D split of a 1-channel 12x16 image, 3x3 SAME conv, run for real on 8 devices
    sc = halo_draw.scene((12, 16), 3, 1, 1, 1, "SAME", (2, 4))
    x, w = jnp.ones((1, 1, 12, 16)), jnp.ones((1, 1, 3, 3))
    mesh = gv.Mesh({"r": 2, "c": 4})
    prog = spatial_program(
        lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME"), x, w, mesh=mesh,
        axes={2: "r", 3: "c"},
    )  # fmt: skip
    ours = [(p.shape[2:], p.transfer.pairs, p.bytes_per_sender) for p in prog.permutes]
    assert [(p.shape, p.transfer.pairs, p.bytes_per_sender) for p in sc.permutes] == ours


def test_each_exchange_frame_draws_one_arrow_per_link():
    sc = halo_draw.scene((12, 16), 5, 2, 1, 1, "SAME", (2, 4))
    for k, p in enumerate(sc.permutes):
        frame = halo_draw.svg(sc, 2 + k)
        assert _arrows(frame) == len(p.transfer.pairs) * sc.grid[1 - p.split.dim]
        assert halo_draw.format_bytes(p.bytes_per_sender) in frame
    assert _arrows(halo_draw.svg(sc, 0)) == 0 and _arrows(halo_draw.svg(sc, len(sc.steps) - 1)) == 0
    with pytest.raises(ValueError, match="step must be in"):
        halo_draw.svg(sc, len(sc.steps))


def test_a_packed_round_draws_every_link_and_names_both_sides():
    """A 1-D signal of 8 over 8 shards shifted by 2 (a 1-wide window, padding (2, 0)): shard 1
    reads shard 0's element, shards 2..4 read elements 1, 2 and 3 shards to their right. The
    rounds whose senders and receivers are all distinct go out as one collective-permute: 2
    permutes instead of 4 (one per side and distance)."""
    sc = halo_draw.scene((1, 8), 1, 1, 1, 1, (2, 0), (1, 8))
    packed, single = sc.permutes
    assert packed.transfer.pairs == ((0, 1), (3, 2), (4, 3), (7, 4))
    assert _arrows(halo_draw.svg(sc, 2)) == 4 and _arrows(halo_draw.svg(sc, 3)) == 2
    assert "the left and right halos from shards 1, 3 away, packed" in caption(sc, 2)
    assert "the right halo from the shard 2 away" in caption(sc, 3)
    assert sum(sc.bytes_sent().values()) == 4 * 6  # 6 senders, one element each


def _boxes_fit(frame: str) -> bool:
    """Every rect lies inside the picture (offset by the group's translation)."""
    width, height = (
        float(v) for v in re.search(r'<svg[^>]* width="([\d.]+)" height="([\d.]+)"', frame).groups()
    )
    dx, dy = (float(v) for v in re.search(r"translate\(([\d.]+),([\d.]+)\)", frame).groups())
    rects = re.findall(
        r'<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)"', frame
    )
    return bool(rects) and all(
        dx + float(x) >= -0.5
        and dx + float(x) + float(w) <= width + 0.5
        and dy + float(y) >= -0.5
        and dy + float(y) + float(h) <= height + 0.5
        for x, y, w, h in rects
    )


@pytest.mark.parametrize(
    "args",
    [
        ((12, 16), 3, 1, 1, 1, "SAME", (2, 4)),
        ((16, 16), 3, 1, 4, 3, "SAME", (2, 8)),
        ((9, 20), 5, 3, 1, 1, "VALID", (3, 4)),
        ((1, 10), 1, 2, 1, 1, "VALID", (1, 4)),
    ],
)
def test_every_frame_stays_inside_its_picture(args):
    sc = halo_draw.scene(*args)
    for step in range(len(sc.steps)):
        assert _boxes_fit(halo_draw.svg(sc, step)), (args, sc.steps[step])


def test_negative_halos_of_the_reference_example():
    sc = halo_draw.scene((1, 10), 1, 2, 1, 1, "VALID", (1, 4))
    assert sc.plans[1].left == (0, -1, -2, -3) and sc.plans[1].right == (0, 1, 2, 3)
    assert "[0, -1, -2, -3]" in caption(sc, 1)


def test_parsers_never_evaluate_and_say_what_to_write():
    assert parse_image("12x16") == (12, 16) and parse_image(" 20 ") == (1, 20)
    assert parse_padding("same") == "SAME" and parse_padding("(-1, 2)") == (-1, 2)
    for bad in ("__import__('os')", "", "3x4x5", "0x4", "65"):
        with pytest.raises(ValueError, match="image"):
            parse_image(bad)
    for bad in ("full", "1", "1,2,3", "os.system('x')"):
        with pytest.raises(ValueError, match="padding"):
            parse_padding(bad)


def _ok(w: HaloWidget) -> bool:
    return (
        w.message.value == "" and "<svg" in w.picture.value and "opacity:0.3" not in w.picture.value
    )


def _walk_steps(w: HaloWidget):
    for step in range(w.step.max + 1):
        w.step.value = step
        assert w.scene.steps[step] in w.words.value
        assert len(w.picture.value) < 500_000


def test_every_control_through_every_option():
    w = HaloWidget()
    assert _ok(w)
    _walk_steps(w)
    for slider in (w.kernel, w.stride, w.dilation, w.base):
        for value in (slider.max, slider.min):  # both ends
            slider.value = value
            assert _ok(w), (slider.description, value, w.message.value)
            _walk_steps(w)
        slider.value = 1 if slider is not w.kernel else 3
    for pad in [*w.padding.options, "-1, 0"]:
        w.padding.value = pad
        assert _ok(w), pad
    for rows in SHARDS:
        for cols in SHARDS:
            w.rows.value, w.cols.value = rows, cols
            assert _ok(w), (rows, cols, w.message.value)
    w.step.value = w.step.max
    w.image.value = "20"  # a 1-D signal with 8 row shards is a bad combination
    assert "1 row shard" in w.message.value and "opacity:0.3" in w.picture.value
    w.rows.value = 1
    assert _ok(w) and "signal" in caption(w.scene, 0)
    w.image.value = "64x64"
    w.cols.value, w.rows.value = 8, 8
    assert _ok(w)
    _walk_steps(w)


def test_bad_text_and_impossible_windows_show_inline_and_recover():
    w = HaloWidget(image="6x6", padding="VALID")
    w.image.value = "__import__('os').system('true')"
    assert "image" in w.message.value and "opacity:0.3" in w.picture.value
    w.image.value = "6x6"
    assert _ok(w)
    w.padding.value = "full"
    assert "padding" in w.message.value
    w.padding.value = "VALID"
    w.kernel.value, w.dilation.value = 4, 2  # window spans 7 > 6
    assert "window spans 7" in w.message.value
    w.dilation.value = 1
    assert _ok(w)
    w.padding.value = "-3, -3"  # nothing left to slide over
    assert "padded input has only" in w.message.value
    w.padding.value = "SAME"
    assert _ok(w)


def test_a_halo_covering_the_image_says_xla_would_gather():
    w = HaloWidget(image="8", kernel=7, padding="SAME", shards=(1, 4))
    assert "would gather" in w.words.value


def test_bytes_per_device_in_the_caption_add_up():
    sc = halo_draw.scene((12, 16), 3, 1, 1, 1, "SAME", (2, 4))
    total = sum(sc.bytes_sent().values())
    per_link = [p.bytes_per_sender * len(p.transfer.pairs) * sc.grid[1 - p.split.dim]
                for p in sc.permutes]  # fmt: skip
    assert total == sum(per_link)
    assert re.search(rf"Whole exchange: {re.escape(gv.units.format_bytes(total))}",
                     caption(sc, 2))  # fmt: skip
    assert np.all(np.array(list(sc.bytes_sent().values())) > 0)


def test_an_unexpected_error_is_shown_inline_and_the_widget_keeps_working(monkeypatch):
    import gspmd_viz.viz.halo.widget as halo_widget

    w = HaloWidget(image="6x6")

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(halo_widget, "scene", broken)
    w.kernel.value = 5
    assert "RuntimeError: boom" in w.message.value and "opacity:0.3" in w.picture.value
    monkeypatch.undo()
    w.kernel.value = 3
    assert _ok(w)


def test_after_bad_input_the_step_slider_keeps_the_old_frame_greyed():
    w = HaloWidget(image="12x16", shards=(2, 4))
    w.kernel.value = 5
    assert "kernel 5" in w.picture.value and "2×4 shards" in w.picture.value  # its heading
    w.image.value = "12 by 16"
    stale = w.picture.value
    assert "gv-stale" in stale and "gv-stale" in w.words.value and "image" in w.message.value
    w.step.value = 0  # used to redraw the old scene un-greyed under the error message
    assert w.picture.value == stale and "gv-error" in w.message.value
    w.image.value = "12x16"
    assert _ok(w) and "gv-stale" not in w.picture.value and "step 0/" in w.picture.value


def test_play_shows_play_again_as_soon_as_the_last_step_is_drawn():
    """The browser's Play moves the linked step slider; at the last step the kernel pauses it,
    so the button never shows "pause" over a finished animation."""
    w = HaloWidget()
    w.play.playing = True  # the learner pressed Play
    for step in range(w.step.max):
        w.step.value = step
        assert w.play.playing and f"step {step}/" in w.picture.value
    w.step.value = w.step.max
    assert not w.play.playing and f"step {w.step.max}/{w.step.max}" in w.picture.value
    w.play.repeat, w.play.playing = True, True  # a repeating animation goes round again
    w.step.value = 0
    w.step.value = w.step.max
    assert w.play.playing
    w.play.repeat = False
    w.step.value = w.step.max - 1
    w.rows.value = 1  # a shorter scene while playing near the end: its last step, paused
    assert w.step.max < 6 and w.step.value == w.step.max and not w.play.playing
    assert f"step {w.step.max}/{w.step.max}" in w.picture.value
