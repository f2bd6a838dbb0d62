"""Lessons 02 (propagation animator), 03 and 03b (collective ledgers) driven in JupyterLab +
Chromium.

Same harness as tests/test_browser.py (its private JupyterLab, Chromium flags and Timer): open
the lesson, run it fresh, then work the widget: play the
animator and check at several steps that the highlighted equation is inside the visible focus
window, change each control, feed bad values and check the inline message and the greyed
figure; at the end no error output and an empty log console. Screenshots go to test-output/.
"""

import functools

import pytest
from test_browser import (  # noqa: F401 (lab is a fixture)
    Timer,
    lab,
    run_lesson_in_browser,
)

pytestmark = pytest.mark.browser

ACTIVE_INSIDE_FOCUS = """(root) => {
  const focus = root.querySelector('.gv-focus');
  const active = [...focus.querySelectorAll('g.node')].find(g =>
      [...g.querySelectorAll('path,polygon,ellipse')].some(s =>
          s.getAttribute('stroke') === '#d62728' && s.getAttribute('stroke-width') === '3'));
  if (!active) return null;
  const f = focus.getBoundingClientRect(), a = active.getBoundingClientRect();
  return {inside: a.left >= f.left - 1 && a.right <= f.right + 1 && a.top >= f.top - 1
                  && a.bottom <= f.bottom + 1, title: active.querySelector('title').textContent};
}"""


def _assert_stale(widget, message: str) -> None:
    from playwright.sync_api import expect

    expect(widget.locator(".gv-error")).to_contain_text(message, timeout=30_000)
    stale = widget.locator(".gv-stale")
    expect(stale).to_have_count(1, timeout=30_000)
    assert stale.evaluate("e => Number(getComputedStyle(e).opacity)") < 0.5


def _dropdown(widget, label: str):
    return widget.locator(f".widget-dropdown:has(label:text-is('{label}')) select").first


def drive_02(page, shot) -> str:
    from playwright.sync_api import expect

    w = page.locator(".gv-propagation")
    expect(w).to_have_count(1, timeout=30_000)
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    timer = Timer(page, ".gv-propagation .gv-step")
    seen = []
    w.locator(".widget-play button").first.click()  # play from step 30 to the end
    for _ in range(5):
        page.wait_for_timeout(700)
        where = w.evaluate(ACTIVE_INSIDE_FOCUS)
        assert where and where["inside"], where
        seen.append(where["title"])
    assert len(set(seen)) >= 3, seen  # the action moved, and the window followed it
    shot("02-playing")
    page.wait_for_timeout(2000)
    slider = w.locator(".widget-slider input, .widget-hslider .noUi-handle").first
    for key, text in (("Home", "frame 0 of"), ("End", "step 53 of")):
        timer.redraw(lambda key=key: (slider.focus(), page.keyboard.press(key)), text)
    timer.redraw(lambda: _dropdown(w, "why?").select_option(label="an"), "step 53 of")
    expect(w.locator("pre").filter(has_text="eqn 32 div")).to_have_count(1)
    n_dim = _dropdown(w, "N=4")  # wq's head dim, on y: put x there too
    n_dim.select_option("x")
    _assert_stale(w, "wq: mesh axis 'x' is used twice")
    shot("02-error-greyed")
    n_dim.select_option("-")
    expect(w.locator(".gv-ok")).to_contain_text("re-traced", timeout=30_000)
    expect(w.locator(".gv-stale")).to_have_count(0)
    n_dim.select_option("y")
    expect(w.locator(".gv-ok")).to_contain_text("53 steps", timeout=30_000)
    w.locator("input[type=checkbox]").first.check()
    expect(w).to_contain_text("agree on 66 of 66", timeout=60_000)
    timer.redraw(lambda: (slider.focus(), page.keyboard.press("Home")), "frame 0 of")
    for _ in range(3):  # step by step: each step's equation is in view
        timer.redraw(lambda: page.keyboard.press("ArrowRight"), "step ")
        where = w.evaluate(ACTIVE_INSIDE_FOCUS)
        assert where and where["inside"], where
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot("lesson02")
    return timer.report("lesson 02 animator")


def drive_ledger(page, shot, tag: str) -> str:
    """Lesson `tag`'s collective ledger: every chip, bad device numbers, a good one."""
    from playwright.sync_api import expect

    w = page.locator(".gv-ledger").first
    expect(w).to_be_visible(timeout=30_000)
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    timer = Timer(page, ".gv-ledger")
    chip = w.locator("select").first
    # the options' values, not their innerText: an option's innerText is "" while JupyterLab
    # keeps its cell out of the layout (seen on a loaded machine), and "" selects nothing
    for label in chip.evaluate("select => [...select.options].map(option => option.value)"):
        timer.redraw(lambda label=label: chip.select_option(label), f"{label}: compute")
    device = w.locator("input[type=text]").first
    for bad, words in (("99", "device 99 is out of range"), ("abc", "is not a number")):
        device.fill(bad)
        device.press("Enter")
        _assert_stale(w, words)
    shot(f"{tag}-error-greyed")
    timer.redraw(lambda: (device.fill("3"), device.press("Enter")), "device 3 (")
    expect(w.locator(".gv-stale")).to_have_count(0)
    chip.select_option("tpu-v4")
    expect(w).to_contain_text("tpu-v4: compute", timeout=30_000)
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    shot(f"lesson{tag}")
    return timer.report(f"lesson {tag} ledger")


DRIVERS = {
    "02_propagation": drive_02,
    "03_partitioning": functools.partial(drive_ledger, tag="03"),  # the MLP's ledger
    "03b_partitioning_models": functools.partial(drive_ledger, tag="03b"),  # a training step's
}


@pytest.mark.parametrize("lesson", sorted(DRIVERS))
def test_lesson_widgets_in_the_browser(lab, lesson):  # noqa: F811
    # JupyterLab renders only cells near the viewport, so the un-run pictures are not checked
    run_lesson_in_browser(lab, lesson, DRIVERS[lesson], unrun=False, run_timeout_ms=240_000)
