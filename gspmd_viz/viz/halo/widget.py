"""The halo-exchange widget: controls over `draw.scene`, a step slider over its frames.

Every control change builds a new scene (a few plans: no jax, no devices) and redraws one SVG
frame; a bad combination shows a one-line message, greys the stale picture out and the widget
keeps working. `HaloWidget.svg` is the current frame, for a static copy in a lesson.
"""

from __future__ import annotations

import html
import re

import ipywidgets as widgets

from gspmd_viz.core.halo.arithmetic import HaloPlan
from gspmd_viz.units import format_bytes
from gspmd_viz.viz.common.inline import error_html, inline_errors, stale_html
from gspmd_viz.viz.common.playback import pause_at_end
from gspmd_viz.viz.halo.draw import Scene, scene, svg

SHARDS = (1, 2, 3, 4, 8)
MAX_SIDE = 64  # image rows / columns the picture stays readable with


def parse_image(text: str) -> tuple[int, int]:
    """'12x16' -> (12, 16); '20' -> a 1-D signal (1, 20). Never evaluates the text."""
    parts = [p for p in re.split(r"[x×,\s]+", (text or "").strip()) if p]
    if not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"image {text!r}: write rows x columns like 12x16, or 20 for a 1-D signal")
    sizes = tuple(int(p) for p in parts)
    if not all(1 <= n <= MAX_SIDE for n in sizes):
        raise ValueError(f"image {text!r}: each side must be 1..{MAX_SIDE}")
    return (1, sizes[0]) if len(sizes) == 1 else sizes


def parse_padding(text: str):
    """'SAME', 'VALID' or 'lo, hi' (ints, may be negative) -> what `scene` takes."""
    word = (text or "").strip()
    if word.upper() in ("SAME", "VALID"):
        return word.upper()
    m = re.fullmatch(r"\(?\s*(-?\d+)\s*[, ]\s*(-?\d+)\s*\)?", word)
    if not m:
        raise ValueError(f"padding {text!r}: write SAME, VALID or two ints like 2, 1")
    return (int(m.group(1)), int(m.group(2)))


# ----- words for each step ------------------------------------------------------------------
def _dims(sc: Scene) -> list[tuple[str, HaloPlan]]:
    named = [("rows", sc.plans[0]), ("columns", sc.plans[1])]
    return [(name, p) for name, p in named if p.size > 1 or name == "columns"]


def _halos(name: str, p: HaloPlan) -> str:
    return f"{name}: left halo {list(p.left)}, right halo {list(p.right)} per shard"


def caption(sc: Scene, step: int) -> str:
    """One paragraph saying what step `step` shows (plain text)."""
    name, (row, col) = sc.steps[step], sc.plans
    image = f"{row.size}×{col.size}" if row.size > 1 else f"{col.size}-element signal"
    if name == "split":
        return (
            f"The {image} input is split into {row.shards}×{col.shards} tiles of "
            f"{row.shard_size}×{col.shard_size} (ceil division; hatched: the filler of uneven "
            "shards). Each device holds only its own tile."
        )
    if name == "pad":
        return (
            "Dashed: the input each device's windows read. "
            + "; ".join(_halos(n, p) for n, p in _dims(sc))
            + ". Hatched cells are padding (read as the pad value, never sent); a negative "
            "halo trims the shard (faded)."
        )
    if name == "windows":
        c = f"{row.windows_per_shard}×{col.windows_per_shard}"
        return (
            f"Every device now slides its {c} windows (kernel {col.window}, stride "
            f"{col.stride}, dilation {col.dilation}) over its own window-ready input, with no "
            "further communication: first window solid with its taps, last window dashed."
        )
    if name == "output":
        return (
            f"The output ({row.windows_total}×{col.windows_total}) comes out split like the "
            f"input: {row.windows_per_shard}×{col.windows_per_shard} windows per device "
            "(hatched: windows past the end, the output's uneven padding)."
        )
    return _permute_caption(sc, step - 2)


def _halo_words(t) -> str:
    """Which halos a round carries: one side and distance, or several packed together."""
    if len(t.distances) == 1 and len(t.sides) == 1:
        flow = "up the shard index" if t.side == "left" else "down the shard index"
        return f"the {t.side} halo from the shard {t.distance} away ({flow})"
    away = ", ".join(map(str, t.distances))
    return (
        f"the {' and '.join(t.sides)} halos from shards {away} away, packed into one permute "
        "(no shard sends or receives twice)"
    )


def _permute_caption(sc: Scene, k: int) -> str:
    p = sc.permutes[k]
    t, dim = p.transfer, ("rows", "columns")[p.split.dim]
    links = len(t.pairs) * sc.grid[1 - p.split.dim]
    rows_moved = any(q.split.dim == 0 for q in sc.permutes)
    corner = " (it carries the row halos along: the corners)" if p.split.dim and rows_moved else ""
    total = sum(sc.bytes_sent().values())
    return (
        f"collective-permute {k + 1}/{len(sc.permutes)} along the {dim}: {_halo_words(t)}; "
        f"every sender sends f32{list(p.shape)} = "
        f"{format_bytes(p.bytes_per_sender)} per link, {links} links{corner}. "
        f"Whole exchange: {format_bytes(total)} over all devices."
    )


class HaloWidget(widgets.VBox):
    """Pick an image, a kernel and a device grid; step through pad, exchange, windows, output."""

    def __init__(self, image="12x16", kernel=3, stride=1, dilation=1, padding="SAME",
                 shards=(2, 4), base_dilation=1):  # fmt: skip
        self.image = widgets.Text(value=image, description="image", placeholder="12x16")
        self.kernel = widgets.IntSlider(value=kernel, min=1, max=9, description="kernel")
        self.stride = widgets.IntSlider(value=stride, min=1, max=4, description="stride")
        self.dilation = widgets.IntSlider(value=dilation, min=1, max=4, description="dilation")
        self.base = widgets.IntSlider(value=base_dilation, min=1, max=3, description="base dil.")
        self.padding = widgets.Combobox(value=padding, options=["SAME", "VALID", "0, 0", "2, 1"],
                                        description="padding", ensure_option=False)  # fmt: skip
        self.rows = widgets.Dropdown(options=SHARDS, value=shards[0], description="row shards")
        self.cols = widgets.Dropdown(options=SHARDS, value=shards[1], description="col shards")
        self.play = widgets.Play(interval=900, min=0, max=1, description="play")
        self.step = widgets.IntSlider(min=0, max=1, description="step")
        widgets.jslink((self.play, "value"), (self.step, "value"))
        pause_at_end(self.play, self.step)
        self.message, self.words, self.picture = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self.scene: Scene | None = None
        self.svg = ""
        controls = [
            widgets.HBox([self.image, self.padding]),
            widgets.HBox([self.kernel, self.stride]),
            widgets.HBox([self.dilation, self.base]),
            widgets.HBox([self.rows, self.cols]),
            widgets.HBox([self.play, self.step]),
        ]
        super().__init__([*controls, self.message, self.words, self.picture])
        self.add_class("gv-halo")
        for w in (self.image, self.kernel, self.stride, self.dilation, self.base, self.padding,
                  self.rows, self.cols):  # fmt: skip
            w.observe(lambda _: self.rebuild(), "value")
        self.step.observe(lambda ch: self.show(ch["new"]), "value")
        self.rebuild()

    @inline_errors
    def rebuild(self):
        """A new scene for the controls; a bad combination leaves a message, never a raise."""
        rows, cols = parse_image(self.image.value)
        self.scene = scene((rows, cols), self.kernel.value, self.stride.value,
                           self.dilation.value, self.base.value,
                           parse_padding(self.padding.value),
                           (self.rows.value, self.cols.value))  # fmt: skip
        self.message.value = ""
        last = len(self.scene.steps) - 1
        self.play.max = self.step.max = last
        if self.step.value > last:
            self.step.value = last  # observe redraws
        else:
            self.show(self.step.value)

    @inline_errors
    def show(self, step: int):
        if self.scene is None:
            return
        step = min(step, len(self.scene.steps) - 1)
        self.svg = svg(self.scene, step)
        note = self.scene.plans[1].gather_instead or self.scene.plans[0].gather_instead
        extra = f"<br><i>XLA would gather instead: {html.escape(note)}</i>" if note else ""
        name = self.scene.steps[step]
        self.picture.value = self._framed(step)  # the picture first: the words follow it
        self.words.value = f"<b>{name}</b>: {html.escape(caption(self.scene, step))}{extra}"

    def _framed(self, step: int) -> str:
        """The frame's SVG under a one-line heading naming every control it was drawn for."""
        (rows, cols), sc = parse_image(self.image.value), self.scene
        image = f"{rows}×{cols} image" if rows > 1 else f"{cols}-element signal"
        heading = (
            f"step {step}/{len(sc.steps) - 1} {sc.steps[step]} · {image} · kernel "
            f"{self.kernel.value}, stride {self.stride.value}, dilation {self.dilation.value}, "
            f"base dilation {self.base.value}, padding {self.padding.value} · "
            f"{self.rows.value}×{self.cols.value} shards"
        )
        return f"<div class='gv-frame-title'>{html.escape(heading)}</div><div>{self.svg}</div>"

    def fail(self, err: Exception):
        """One line; the last good frame greyed. The step slider keeps it greyed until a good
        change: it must not redraw the old scene as if it matched the controls."""
        self.message.value = error_html(err)
        if self.scene is not None:  # the caption and the frame both describe the old scene
            self.words.value = stale_html(self.words.value)
            self.picture.value = stale_html(self.picture.value)
        self.scene = None
