"""Lessons 04 (halo exchange), 06 (pipelines) and 07 (training at scale, and its step replay)
in JupyterLab + Chromium.

Same harness as tests/test_browser.py (its private JupyterLab, `run_lesson_in_browser`, Timer):
open the lesson, run it fresh, then work its widget as a learner would: every control through
its options (both slider ends, each dropdown option), Play where there is one, bad text (the
inline `.gv-error` line and the greyed stale figure) and a good value that brings it back. Each
timed change waits, every animation frame, for the figure's heading to name the new control
value; the medians are printed (speed is reported, not asserted). At the end no error output
and an empty log console. Screenshots go to test-output/.
"""

import re

import pytest
from test_browser import (  # noqa: F401 (lab is a fixture)
    Timer,
    lab,
    run_lesson_in_browser,
)
from test_browser_lessons23 import _dropdown

pytestmark = pytest.mark.browser


def _text(widget, label: str):
    return widget.locator(f"div:has(> label:text-is('{label}')) > input").first


def _slider(widget, label: str):
    return widget.locator(f".widget-hslider:has(label:text-is('{label}')) .noUi-handle").first


def _type(box, text: str) -> None:
    box.fill(text)
    box.press("Enter")


def _readout(page, widget, label: str, value: int) -> None:
    """Type a slider's value into its readout, as a learner does for a middle value."""
    readout = widget.locator(f".widget-hslider:has(label:text-is('{label}')) .widget-readout")
    readout.first.click()
    page.keyboard.press("Control+a")
    page.keyboard.type(str(value))
    page.keyboard.press("Enter")


def _press(page, slider, key: str):
    return lambda: (slider.focus(), page.keyboard.press(key))


def _open(page, root: str, title: str, first: str):
    """The lesson's widget scrolled to the top, a timer on its figure heading, the heading
    showing the lesson's first state."""
    from playwright.sync_api import expect

    w = page.locator(root)
    expect(w).to_have_count(1, timeout=30_000)
    _top(w)
    expect(w.locator(title)).to_contain_text(first, timeout=30_000)
    return w, SettledTimer(page, f"{root} {title}"), w.locator(title)


def _shown(page, selector: str, text: str) -> None:
    """Wait until a `selector` element shows `text`, checked every animation frame: an
    animation's frame can come and go between two of expect()'s polls."""
    page.wait_for_function(
        "([sel, text]) => [...document.querySelectorAll(sel)]"
        ".some(t => t.textContent.includes(text))",
        arg=[selector, text],
        polling="raf",
        timeout=30_000,
    )


class SettledTimer(Timer):
    """Timer that first lets the page finish the previous redraw: JupyterLab's plotly renderer
    follows each new figure with a second redraw and a PNG snapshot (Plotly.toImage), which
    would otherwise be counted in the next change's time."""

    def redraw(self, act, text: str) -> None:
        self.page.wait_for_timeout(100)
        self.page.evaluate("() => new Promise(r => requestIdleCallback(r, {timeout: 3000}))")
        super().redraw(act, text)


def _report(timer, name: str) -> str:
    """Timer's summary, then every redraw in the order the driver made them."""
    return f"{timer.report(name)}\n  in order (ms): {[round(ms) for ms in timer.ms]}"


def _stale(w, words: str) -> None:
    """The inline message; every view of the last good state (caption or summary, and the
    figure) greyed."""
    from playwright.sync_api import expect

    expect(w.locator(".gv-error")).to_contain_text(words, timeout=30_000)
    stale = w.locator(".gv-stale")
    expect(stale).to_have_count(2, timeout=30_000)
    assert all(o < 0.5 for o in stale.evaluate_all(
        "es => es.map(e => Number(getComputedStyle(e).opacity))"))  # fmt: skip


def _top(widget) -> None:
    widget.evaluate("e => e.scrollIntoView({block: 'start'})")


# --- lesson 04: HaloWidget ------------------------------------------------------------------
HALO_SLIDERS = {  # label: heading text at the max end, at the min end
    "kernel": ("kernel 9,", "kernel 1,"),
    "stride": ("stride 4,", "stride 1,"),
    "dilation": ("dilation 4,", "dilation 1,"),
    "base dil.": ("base dilation 3,", "base dilation 1,"),
}
HALO_BAD = (  # box, bad text, inline message, good text, heading it brings back
    ("image", "12 by 16", "write rows x columns", "12x12", "12×12 image"),
    ("image", "__import__('os')", "write rows x columns", "12x16", "12×16 image"),
    ("image", "65x2", "each side must be 1..64", "4x3", "4×3 image"),
    ("padding", "full", "padding 'full'", "VALID", "padding VALID ·"),
    ("image", "2x2", "use a smaller window", "6x8", "6×8 image"),
)


def drive_04(page, shot) -> str:
    from playwright.sync_api import expect

    w, timer, title = _open(
        page, ".gv-halo", ".gv-frame-title", "step 5/7 exchange 4/4 · 12×16 image"
    )
    for label, (high, low) in HALO_SLIDERS.items():
        handle = _slider(w, label)
        timer.redraw(_press(page, handle, "End"), high)
        timer.redraw(_press(page, handle, "Home"), low)
    timer.redraw(lambda: _readout(page, w, "kernel", 3), "kernel 3,")
    padding = _text(w, "padding")
    for text in ("VALID", "0, 0", "2, 1", "SAME"):
        timer.redraw(lambda text=text: _type(padding, text), f"padding {text} ·")
    for label, dim, options in (("row shards", "{}×4", "13482"), ("col shards", "2×{}", "12384")):
        select = _dropdown(w, label)
        for option in options:
            timer.redraw(lambda o=option, s=select: s.select_option(o),
                         f"{dim.format(option)} shards")  # fmt: skip
    step = _slider(w, "step")
    timer.redraw(_press(page, step, "Home"), "step 0/7 split")
    w.locator(".widget-play button").first.click()  # play to the end, 900 ms a step
    for k in (1, 2, 7):
        expect(title).to_contain_text(f"step {k}/7", timeout=30_000)
    # the button shows "play" again with the last step, not one 900 ms tick later
    icon = w.locator(".widget-play button i").first
    expect(icon).to_have_class(re.compile("fa-play"), timeout=600)
    _halo_bad_values(page, shot, w, step, timer)
    timer.redraw(lambda: _dropdown(w, "row shards").select_option("1"), "1×4 shards")
    timer.redraw(lambda: _type(_text(w, "image"), "20"), "20-element signal")
    _dropdown(w, "row shards").select_option("2")
    _stale(w, "use 1 row shard")  # a 1-D signal cannot split its rows
    _type(_text(w, "image"), "12x16")
    _type(padding, "SAME")
    timer.redraw(_press(page, step, "End"), "step 7/7 output · 12×16 image")
    timer.redraw(lambda: _readout(page, w, "step", 5), "step 5/7")
    _top(w)
    page.wait_for_timeout(300)
    shot("lesson04")
    return _report(timer, "lesson 04 halo widget")


def _halo_bad_values(page, shot, w, step, timer) -> None:
    from playwright.sync_api import expect

    for label, bad, words, good, back in HALO_BAD:
        box = _text(w, label)
        _type(box, bad)
        _stale(w, words)
        _press(page, step, "Home")()  # a step change must not redraw the old frame un-greyed
        page.wait_for_timeout(300)
        _stale(w, words)
        if bad == "12 by 16":
            shot("04-error-greyed")
        timer.redraw(lambda box=box, good=good: _type(box, good), back)
        expect(w.locator(".gv-stale")).to_have_count(0)
        expect(w.locator(".gv-error")).to_have_count(0)


# --- lesson 06: PipelineWidget ----------------------------------------------------------------
SCHEDULES = ("gpipe", "interleaved-1f1b", "circular", "zb-h1", "1f1b")


def _pipeline_stale(w, words: str) -> None:
    """The inline message; the summary and the figure greyed by style (grayscale, colour bar
    included) with nothing redrawn."""
    from playwright.sync_api import expect

    expect(w.locator(".gv-error")).to_contain_text(words, timeout=30_000)
    stale = w.locator(".gv-stale")
    expect(stale).to_have_count(2, timeout=30_000)  # the summary and the figure's Output
    looks = stale.evaluate_all(
        "es => es.map(e => [Number(getComputedStyle(e).opacity), getComputedStyle(e).filter])"
    )
    assert all(o < 0.5 and "grayscale(1)" in f for o, f in looks), looks
    assert w.locator(".gv-stale .js-plotly-plot").locator("visible=true").count() == 1


def drive_06(page, shot) -> str:
    from playwright.sync_api import expect

    w, timer, title = _open(page, ".gv-pipeline", ".gtitle", "1f1b, S=4, M=8")
    schedule = _dropdown(w, "schedule")
    for name in SCHEDULES:
        timer.redraw(lambda name=name: schedule.select_option(name), f"{name}, S=4, M=8")
    for label, high, low, back in (
        ("stages S", "S=8, M=8", "S=2, M=8", "S=4, M=8"),
        ("microbatches M", "S=4, M=32", "S=4, M=1", "S=4, M=8"),
    ):
        handle = _slider(w, label)
        timer.redraw(_press(page, handle, "End"), high)
        timer.redraw(_press(page, handle, "Home"), low)
        timer.redraw(lambda label=label: _readout(page, w, label, 4 if "S" in label else 8), back)
    virtual = _slider(w, "chunks V")
    _press(page, virtual, "End")()  # 1f1b has one chunk per stage
    _pipeline_stale(w, "one chunk per stage")
    frame = _slider(w, "frame")
    _press(page, frame, "Home")()  # a frame change must not redraw the old timeline un-greyed
    page.wait_for_timeout(500)
    _pipeline_stale(w, "one chunk per stage")
    timer.redraw(
        lambda: schedule.select_option("interleaved-1f1b"), "interleaved-1f1b, S=4, M=8, V=4"
    )
    timer.redraw(_press(page, virtual, "Home"), "interleaved-1f1b, S=4, M=8, F:B")
    schedule.select_option("1f1b")  # drawn before the bad text below (see the report on races)
    expect(title).to_have_text(re.compile(r"^1f1b, S=4, M=8, F:B:W = 1:2"), timeout=30_000)
    ratio = _text(w, "F:B:W")
    for bad, words in (("one:two", "F:B:W 'one:two'"), ("0:1", "must be positive")):
        _type(ratio, bad)
        _pipeline_stale(w, words)
        if bad == "0:1":
            shot("06-error-greyed")
    timer.redraw(lambda: _type(ratio, "1:1:1"), "F:B:W = 1:1:1")
    expect(w.locator(".gv-error")).to_have_count(0)
    timer.redraw(lambda: _type(ratio, "1:2"), "F:B:W = 1:2:0")
    timer.redraw(_press(page, frame, "Home"), "time 0 of")
    play = w.locator(".widget-play button")
    play.first.click()
    for frames in ("time 1 of", "time 2 of", "time 3 of"):  # F = 1: a new action each time unit
        _shown(page, ".gv-pipeline .gtitle", frames)
    play.first.click()  # the same button pauses
    shot("06-playing")
    timer.redraw(_press(page, frame, "End"), "time 33 of 33")
    _top(w)
    page.wait_for_timeout(300)
    shot("lesson06")
    return _report(timer, "lesson 06 pipeline widget")


# --- lesson 07: TrainingWidget ----------------------------------------------------------------
PODS = {  # option: data replicas with model 8 (chips / 8)
    "TPU-v3 multipod 128x32 (4096 chips)": 512,
    "TPU-v4 cube 4x4x4 (64 chips)": 8,
    "TPU-v4 pod 16x16x16 (4096 chips)": 512,
    "TPU-v3 pod 32x32 (1024 chips)": 128,
}


def drive_07(page, shot) -> str:
    from playwright.sync_api import expect

    w, timer, title = _open(page, ".gv-training", ".gtitle", "1T model, batch 128")
    timer.redraw(lambda: _type(_text(w, "batch"), "4096"), "1T model, batch 4096")
    strategy = _dropdown(w, "strategy")
    for name in ("dp", "dp+wus", "pipeline", "2d"):  # each strategy's first use partitions once
        timer.redraw(lambda name=name: strategy.select_option(name), f"{name}: data")
    for name in ("1B", "6B", "52B", "1T"):
        timer.redraw(lambda name=name: _dropdown(w, "model").select_option(name),
                     f"{name} model, batch 4096")  # fmt: skip
    for pod, data in PODS.items():
        timer.redraw(lambda pod=pod: _dropdown(w, "pod").select_option(pod), pod)
        expect(title).to_contain_text(f"2d: data {data} x model 8")
    remat = w.locator("input[type=checkbox]").first
    timer.redraw(remat.uncheck, "x stages 1; MFU")
    timer.redraw(remat.check, "x stages 1, remat; MFU")
    strategy.select_option("pipeline")
    expect(title).to_contain_text("x stages 8 x 16 microbatches", timeout=30_000)
    for label, bad, words, good, back in (
        ("batch", "lots", "batch must be a positive whole number", "8192", "batch 8192"),
        ("model/stages", "7", "7 does not divide the pod's 1024 chips", "16", "stages 16 x 16"),
        ("microbatches", "0", "microbatches must be a positive", "4", "stages 16 x 4 micro"),
        ("batch", "1000", "does not split into", "2048", "batch 2048"),
    ):
        box = _text(w, label)
        _type(box, bad)
        _stale(w, words)
        if label == "model/stages":
            _top(w)
            shot("07-error-greyed")
        timer.redraw(lambda box=box, good=good: _type(box, good), back)
        expect(w.locator(".gv-error")).to_have_count(0)
        expect(w.locator(".gv-stale")).to_have_count(0)
    strategy.select_option("2d")
    _type(_text(w, "model/stages"), "8")
    timer.redraw(lambda: _type(_text(w, "batch"), "128"), "1T model, batch 128")
    _top(w)
    page.wait_for_timeout(300)
    shot("lesson07")
    return _report(timer, "lesson 07 training widget") + "\n" + _drive_07_replay(page, shot)


def _drive_07_replay(page, shot) -> str:
    """StepReplay: both slider ends, a typed step, every collective in the menu, Play."""
    from playwright.sync_api import expect

    w, timer, title = _open(page, ".gv-step-replay", ".gtitle", "5/16 all-reduce over y")
    n = int(re.search(r"step \d+/(\d+) ·", title.text_content()).group(1))
    step = _slider(w, "step")
    timer.redraw(_press(page, step, "End"), f"step {n}/{n} ·")
    timer.redraw(_press(page, step, "Home"), f"step 1/{n} ·")
    timer.redraw(lambda: _readout(page, w, "step", 7), f"step 7/{n} ·")
    menu = _dropdown(w, "collective")
    for label in menu.evaluate("s => [...s.options].map(o => o.text)"):
        number, what = label.replace("\xa0", " ").split(". ", 1)  # ipywidgets: spaces as nbsp
        timer.redraw(lambda label=label: menu.select_option(label=label), f"{number}/16 {what}")
        expect(w.locator(".gv-step-table tr[style*='bold']")).to_contain_text(what)
    timer.redraw(_press(page, step, "Home"), f"step 1/{n} ·")
    play = w.locator(".widget-play button")
    play.first.click()
    _shown(page, ".gv-step-replay .gtitle", f"step 3/{n} ·")
    play.first.click()  # the same button pauses
    page.wait_for_timeout(1000)
    paused = title.text_content()
    page.wait_for_timeout(1000)
    assert title.text_content() == paused
    expect(w.locator(".gv-error")).to_have_count(0)
    _top(w)
    page.wait_for_timeout(300)
    shot("lesson07-step-replay")
    return _report(timer, "lesson 07 step replay")


DRIVERS = {"04_halo_exchange": drive_04, "06_pipelines": drive_06, "07_training_at_scale": drive_07}


@pytest.mark.parametrize("lesson", sorted(DRIVERS))
def test_lesson_widgets_in_the_browser(lab, lesson):  # noqa: F811
    run_lesson_in_browser(lab, lesson, DRIVERS[lesson], unrun=False, run_timeout_ms=240_000)
