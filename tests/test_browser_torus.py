"""Lesson 05 in a real browser: the torus widget in JupyterLab + headless Chromium (Playwright).

Runs the lesson, then drives the widget as a learner would: steps with the slider, presses play,
switches to the pod, the 4096-chip multipod, the 9,216-chip Ironwood pod and a twisted v4 slice,
feeds bad sizes and payloads. It measures, in the page, the time from a control change to the
redrawn figure (printed and saved to test-output/lesson05_timings.json; speed is reported, not
asserted), asserts the inline message for bad input and an empty JupyterLab log console, and
saves screenshots under test-output/.

The JupyterLab start-up (private HOME, server stopped by PID, quiet settings) is test_browser.py's,
imported rather than copied so the two cannot drift apart.
"""

import json
import statistics

import pytest
from test_browser import (  # noqa: F401
    CHROMIUM,
    CHROMIUM_FLAGS,
    OUT,
    _menu,
    _wait_idle,
    lab,
    patient_expect,
)

pytestmark = pytest.mark.browser
WIDTH = 1024  # the figure must fit a 1024 px window, legend included

# Sets window.__t0 and window.__redrawn: a promise that resolves, once the widget's figure title
# contains `want` (a new figure was drawn), with the milliseconds since __t0, and rejects after
# 30 s (Playwright's evaluate has no timeout of its own: an unbounded wait hangs the test run).
_WAIT_FOR_TITLE = """
want => { window.__t0 = performance.now(); window.__redrawn = new Promise((resolve, reject) => {
  const root = document.querySelector('.gv-torus-widget');
  setTimeout(() => reject(new Error(
    'no figure title with ' + want + ' after 30 s; last: ' +
    (root.querySelector('.js-plotly-plot .gtitle') || {}).textContent)), 30000);
  const check = () => {
    const t = root.querySelector('.js-plotly-plot .gtitle');
    if (t && t.textContent.includes(want)) {
      observer.disconnect();
      resolve(performance.now() - window.__t0);
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(root, {childList: true, subtree: true, characterData: true});
  check();
}); }
"""


def _timed(page, action, want: str) -> float:
    """Milliseconds from `action()` (a control change) until the figure title shows `want`."""
    page.evaluate(_WAIT_FOR_TITLE, want)  # starts watching; returns at once
    action()
    return float(page.evaluate("() => window.__redrawn"))


def _run_lesson(page, url):
    page.goto(f"{url}/lab/tree/05_torus_allreduce.ipynb?reset")  # no tab of an earlier test
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    _wait_idle(page, 60_000)
    page.keyboard.press("Control+b")  # hide the file browser, as a learner on a laptop would
    _menu(page, "Edit", "Clear Outputs of All Cells")
    _menu(page, "Run", "Run All Cells")
    widget = page.locator(".gv-torus-widget")
    widget.wait_for(timeout=120_000)
    widget.locator(".js-plotly-plot .gtitle", has_text="step 1/12").wait_for(timeout=60_000)
    _wait_idle(page, 180_000)
    widget.evaluate("e => e.scrollIntoView({block: 'start'})")
    return widget


def _select(widget, label: str, option: str):
    widget.locator(".widget-dropdown", has_text=label).locator("select").select_option(option)


def _type(widget, label: str, text: str):
    box = widget.locator(".widget-text", has_text=label).locator("input")
    box.fill(text)
    box.press("Enter")


def _step_right(widget):
    widget.locator(".widget-hslider .noUi-handle").first.press("ArrowRight")


def _log_console_entries(page) -> int:
    _menu(page, "View", "Show Log Console")
    panel = page.locator(".jp-LogConsolePanel")
    panel.wait_for(timeout=10_000)
    page.wait_for_timeout(300)
    return panel.locator(".jp-OutputArea-child").count()


def test_lesson05_torus_widget_redraws_fast_and_fails_inline(lab):  # noqa: F811 (the fixture)
    from playwright.sync_api import expect, sync_playwright

    url, env = lab
    OUT.mkdir(exist_ok=True)
    patient_expect()
    timings: dict[str, list[float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS, env=env
        )
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1400})
            widget = _run_lesson(page, url)
            plot = widget.locator(".js-plotly-plot").locator("visible=true").first
            box = plot.bounding_box()
            assert box["x"] + box["width"] <= WIDTH, box  # legend and colour bar included
            widget.screenshot(path=str(OUT / "lesson05_4x4.png"))

            timings["4x4 step"] = [
                _timed(page, lambda: _step_right(widget), f"step {i}/12") for i in range(2, 6)
            ]
            widget.locator(".widget-play button").first.click()  # play to the last step
            title = widget.locator(".js-plotly-plot .gtitle")
            expect(title).to_contain_text("step 12/12", timeout=30_000)
            timings["pod: new timeline"] = [
                _timed(page, lambda: _select(widget, "topology", "tpu-v3-pod"), "tpu-v3-pod")
            ]
            timings["multipod: new timeline"] = [
                _timed(page, lambda: _select(widget, "topology", "tpu-v3-multipod"), "multipod")
            ]
            timings["multipod step"] = [
                _timed(page, lambda: _step_right(widget), f"step {i}/316") for i in range(2, 7)
            ]
            widget.screenshot(path=str(OUT / "lesson05_multipod.png"))
            timings["9,216 chips: new timeline"] = [
                _timed(page, lambda: _select(widget, "topology", "tpu7x-9216"), "tpu7x-9216")
            ]
            timings["9,216 chips step"] = [
                _timed(page, lambda: _step_right(widget), f"step {i}/122") for i in range(2, 5)
            ]
            widget.screenshot(path=str(OUT / "lesson05_tpu7x.png"))
            timings["twisted 4x4x8: new timeline"] = [
                _timed(page, lambda: _select(widget, "topology", "tpu-v4-4x4x8-twisted"),
                       "4x4x8-twisted")
            ]  # fmt: skip
            box = plot.bounding_box()
            assert box["x"] + box["width"] <= WIDTH, box  # its notes on where wraparound lands
            widget.screenshot(path=str(OUT / "lesson05_twisted.png"))

            error = widget.locator(".gv-error")
            _type(widget, "size", "1x1")
            expect(error).to_contain_text("one chip", timeout=30_000)
            expect(widget.locator(".gv-stale")).to_have_count(2)  # summary and figure
            widget.screenshot(path=str(OUT / "lesson05_error.png"))
            _type(widget, "payload", "lots")
            _type(widget, "size", "4x4")
            expect(error).to_contain_text("payload", timeout=30_000)
            timings["recover after bad input"] = [
                _timed(page, lambda: _type(widget, "payload", "1.5 GiB"), "1.5 GiB")
            ]
            expect(error).to_have_count(0)
            expect(widget.locator(".gv-stale")).to_have_count(0)
            assert _log_console_entries(page) == 0
        finally:
            browser.close()
    report = {k: round(statistics.median(v), 1) for k, v in timings.items()}
    (OUT / "lesson05_timings.json").write_text(json.dumps({"median_ms": report, "all": timings}))
    print("\nlesson 05, control change -> redrawn figure (ms, median):", report)
