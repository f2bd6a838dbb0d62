"""Lesson 08 (debugging your own sharding) in JupyterLab + Chromium.

Same harness as tests/test_browser.py: run the lesson fresh, then work the explain widget as a
learner would: click every source line (its detail names the line), change the annotation and
the mesh (the summary names the new bytes and mesh; a setting seen before redraws from the kept
report), bad text in each box (one inline `.gv-error` line, the lines greyed) and a good value
that brings it back. Click and change times are printed (speed is reported, not asserted). At the
end no error output and an empty log console. Screenshots go to test-output/.
"""

import re

import pytest
from test_browser import (  # noqa: F401 (lab is a fixture)
    Timer,
    lab,
    run_lesson_in_browser,
)

pytestmark = pytest.mark.browser


def _type(box, text: str) -> None:
    box.fill(text)
    box.press("Enter")


def _text(widget, label: str):
    return widget.locator(f"div:has(> label:text-is('{label}')) > input").first


def _bad_then_good(page, widget, box, bad: str, words: str, good: str, summary: str) -> None:
    from playwright.sync_api import expect

    lines = widget.locator(".gv-explain-lines")
    _type(box, bad)
    expect(widget.locator(".gv-error")).to_contain_text(words)
    expect(lines).to_have_class(re.compile("gv-stale"))
    assert lines.evaluate("e => Number(getComputedStyle(e).opacity)") < 0.5
    _type(box, good)
    expect(widget.locator(".gv-error")).to_have_count(0)
    expect(lines).not_to_have_class(re.compile("gv-stale"))
    expect(widget.locator(".gv-explain-summary")).to_contain_text(summary)


def drive_08(page, shot) -> str:
    from playwright.sync_api import expect

    w = page.locator(".gv-explain")
    expect(w).to_have_count(1, timeout=30_000)
    # live widget on the page: its static picture (the next output) is hidden
    expect(page.locator(".jp-OutputArea-child:has(.gv-live) + .jp-OutputArea-child")).to_be_hidden()
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    summary = w.locator(".gv-explain-summary")
    expect(summary).to_contain_text("gv.explain(shuffle_features) on Mesh(x=2, y=4)")
    expect(summary).to_contain_text("3.0 KiB per device")
    clicks, changes = (
        Timer(page, ".gv-explain .gv-explain-detail"),
        Timer(page, ".gv-explain .gv-explain-summary"),
    )
    buttons = w.locator("button.gv-explain-line")
    count = buttons.count()
    assert count == 4  # def, annotation, shuffle, return
    for k in range(count):
        line = int(re.search(r"(\d+)  ", buttons.nth(k).inner_text()).group(1))
        clicks.redraw(lambda k=k: buttons.nth(k).click(), f"line {line}")
    buttons.nth(2).click()  # the shuffle's line: its collective and the reason
    expect(w.locator(".gv-explain-detail")).to_contain_text("all-reduce(y)")
    expect(w.locator(".gv-explain-detail")).to_contain_text("need_replication")
    shot("08-shuffle")
    spec, mesh = _text(w, "x"), _text(w, "mesh")
    # split whole examples over both axes from the start: the shuffle is local
    changes.redraw(lambda: _type(spec, "(x y), None"), "program, 0 B per device")
    expect(w.locator(".gv-explain-detail")).to_be_empty()
    changes.redraw(lambda: _type(spec, "x, y"), "3.0 KiB per device")  # seen before: kept
    changes.redraw(lambda: _type(mesh, "x=4, y=2"), "Mesh(x=4, y=2)")
    changes.redraw(lambda: _type(mesh, "x=2, y=4"), "Mesh(x=2, y=4)")
    for box, bad, words, good in (
        (mesh, "x=2, q=4", "unknown mesh axis", "x=2, y=4"),
        (mesh, "__import__('os')", "cannot read mesh axis", "x=2, y=4"),
        (spec, "x; y", "cannot read mesh axis", "x, y"),
        (spec, "x, y, x", "used twice", "x, y"),
        (spec, "None, None, None", "entries", "x, y"),
    ):
        _bad_then_good(page, w, box, bad, words, good, "3.0 KiB per device")
    w.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    shot("lesson08")
    return (
        f"{clicks.report('lesson 08 line clicks')}\n{changes.report('lesson 08 setting changes')}"
    )


def test_lesson08_explain_widget_in_the_browser(lab):  # noqa: F811 (the fixture)
    run_lesson_in_browser(
        lab, "08_debugging_sharding", drive_08, unrun=False, run_timeout_ms=240_000
    )
