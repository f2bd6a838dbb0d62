"""The lessons in a real browser: JupyterLab + headless Debian Chromium driven by Playwright.

For each lesson with a driver in DRIVERS: open it as committed (un-run: the static pictures must
show), clear every output, run all cells in a fresh kernel, then let the lesson's driver work
its widgets (every control, bad values, inline messages). Afterwards no cell may show an error
and the JupyterLab log console (where exceptions from widget callbacks land) must be empty.
Screenshots land in test-output/ (gitignored); redraw times are printed (run with -s).
Everything the server and the browser write goes to a temp HOME; the server is stopped by its
PID. To add a lesson: write `drive_NN(page, shot)` and register it in DRIVERS.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gspmd_viz.launch import free_port

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
OUT = ROOT / "test-output"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
QUIET = ROOT / "binder" / "overrides.json"  # what `make lab` installs: no Jupyter news prompt


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium (make test does) to run this"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _private_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / "jupyter-config"),
        JUPYTER_DATA_DIR=str(home / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(home / "jupyter-runtime"),
        IPYTHONDIR=str(home / "ipython"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
    )
    return env


def _wait_for_server(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"jupyter lab did not answer on port {port} within {timeout} s")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(url, env) of a private JupyterLab serving a copy of the lessons."""
    _require_chromium()
    home = tmp_path_factory.mktemp("lab-home")
    env = _private_env(home)
    notebooks = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", notebooks)  # autosave must never touch the repo
    settings = home / "app-settings"
    settings.mkdir()
    shutil.copy(QUIET, settings / "overrides.json")
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--allow-root", "--IdentityProvider.token=",
           "--ServerApp.port_retries=0", f"--ServerApp.root_dir={notebooks}",
           f"--LabApp.app_settings_dir={settings}"]  # fmt: skip
    log = open(home / "lab.log", "w")  # noqa: SIM115 (closed in the teardown)
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_for_server(port, proc)
        yield f"http://127.0.0.1:{port}", env
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server and its kernels: its session's process group, which only it leads."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def _wait_idle(page, timeout_ms: int) -> None:
    page.get_by_text("Idle", exact=False).locator("visible=true").first.wait_for(timeout=timeout_ms)


def _run_all_fresh(page, timeout_ms: int = 180_000) -> None:
    """Clear the committed outputs, run every cell, wait until none is still queued or running."""
    from playwright.sync_api import expect

    _menu(page, "Edit", "Clear Outputs of All Cells")
    expect(page.locator(".jp-Cell .jp-OutputArea-output")).to_have_count(0)
    _menu(page, "Run", "Run All Cells")
    page.wait_for_timeout(1000)
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    try:
        page.wait_for_function(
            """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                       return p.length && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
            timeout=timeout_ms,
        )
    except Exception:  # say which cells did not run and what the page shows
        page.screenshot(path=str(OUT / "run-all-stalled.png"), full_page=True)
        errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']").all_inner_texts()
        raise AssertionError(
            f"Run All did not finish in {timeout_ms / 1e3:.0f} s; prompts "
            f"{prompts.all_inner_texts()}; error outputs {errors}"
        ) from None
    expect(prompts.first).to_contain_text("[1]")
    _wait_idle(page, timeout_ms)


def _open_log_console(page):
    _menu(page, "View", "Show Log Console")
    console = page.locator(".jp-LogConsole")
    console.first.wait_for(timeout=30_000)
    return console


class Timer:
    """Time from a control change to the redrawn figure, as the learner sees it: the page is
    checked every animation frame (Playwright's own expect polls too slowly to time this)."""

    def __init__(self, page, title_selector: str) -> None:
        self.page, self.selector, self.ms = page, title_selector, []

    def redraw(self, act, text: str) -> None:
        start = time.perf_counter()
        act()
        self.page.wait_for_function(
            "([sel, text]) => (document.querySelector(sel)?.textContent || '').includes(text)",
            arg=[self.selector, text],
            polling="raf",
            timeout=30_000,
        )
        self.ms.append(1e3 * (time.perf_counter() - start))

    def report(self, name: str) -> str:
        ms = sorted(self.ms)
        return (
            f"{name}: {len(ms)} redraws, median {ms[len(ms) // 2]:.0f} ms, max {ms[-1]:.0f} ms "
            "(control change -> new figure title in the page)"
        )


# --- lesson 01 ---------------------------------------------------------------------------
DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int8": "s8",
          "int32": "s32", "float64": "f64"}  # fmt: skip


def _editor_parts(editor):
    return {
        "title": editor.locator(".js-plotly-plot .gtitle"),
        "message": editor.locator(".gv-error, .gv-ok"),
        "notations": editor.locator(".gv-notations"),
        "plot": editor.locator(".gv-layout-plot"),
        "mesh": editor.locator("input[placeholder='x=2, y=4']"),
        "shape": editor.locator("input[placeholder='8, 6']"),
        "hlo": editor.locator("input[placeholder^='paste']"),
    }


def _type(box, text: str) -> None:
    box.fill(text)
    box.press("Enter")


def _change_and_wait(timer, title, box, text: str, expected_title: str) -> None:
    timer.redraw(lambda: _type(box, text), expected_title)


def _assert_inline_error(parts, words: str) -> None:
    from playwright.sync_api import expect

    expect(parts["message"]).to_contain_text(words, timeout=30_000)
    expect(parts["plot"]).to_have_class(re.compile("gv-stale"), timeout=30_000)
    opacity = parts["plot"].evaluate("e => Number(getComputedStyle(e).opacity)")
    assert opacity < 0.5  # the stale figure is greyed out, not left looking current


def drive_01(page, shot) -> str:
    from playwright.sync_api import expect

    editor = page.locator(".gv-sharding-editor")
    expect(editor).to_have_count(1, timeout=30_000)
    # live widget on the page: its static picture (the next output) is hidden
    expect(page.locator(".jp-OutputArea-child:has(.gv-live) + .jp-OutputArea-child")).to_be_hidden()
    parts, timer = _editor_parts(editor), Timer(page, ".gv-sharding-editor .gtitle")
    title = parts["title"]
    expect(title).to_contain_text("f32[8@x, 8] on Mesh(x=2, y=4)", timeout=30_000)
    expect(parts["notations"]).to_contain_text("P('x', None)")
    dtype = editor.locator(".widget-dropdown select").nth(0)
    dim = [editor.locator(f".gv-dim-{d} select") for d in range(2)]
    for label in [*list(DTYPES)[1:], "float32"]:  # every dtype, each one a real change
        timer.redraw(lambda label=label: dtype.select_option(label), f"{DTYPES[label]}[8@x, 8]")
    options = {"x": "8@x", "y": "8@y", "x then y": "8@(x,y)", "y then x": "8@(y,x)"}
    options["— (not split)"] = "8"
    dim[0].select_option("— (not split)")
    for d in (1, 0):  # every option of each dim, the other dim not split
        for label, text in options.items():
            expected = f"f32[{text}, 8]" if d == 0 else f"f32[8, {text}]"
            timer.redraw(lambda label=label, d=d: dim[d].select_option(label), expected)
    dim[0].select_option("x")
    dim[1].select_option("x")  # mesh axis used twice: inline message, stale figure greyed
    _assert_inline_error(parts, "used twice")
    editor.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot("01-error-greyed")
    dim[1].select_option("y")
    expect(title).to_contain_text("f32[8@x, 8@y]", timeout=30_000)
    expect(parts["plot"]).not_to_have_class(re.compile("gv-stale"))
    for box, bad, words, good in (
        ("mesh", "x=2, x=4", "named twice", "x=2, y=4"),
        ("mesh", "__import__('os')", "cannot read mesh axis", "x=2, y=4"),
        ("shape", "7, six", "cannot read the shape", "8, 8"),
        ("shape", "1, 2, 3, 4, 5", "ranks 1 to 4", "8, 8"),
        ("hlo", "{devices=[2,2]0,1,2}", "lists 3 devices", "{devices=[2,4]<=[8]}"),
        ("hlo", "{maximal device=3}", "one device", "{devices=[2,4]<=[8]}"),
    ):
        _type(parts[box], bad)
        _assert_inline_error(parts, words)
        _type(parts[box], good)  # fixing the box that was wrong brings the figure back
        expect(parts["plot"]).not_to_have_class(re.compile("gv-stale"), timeout=30_000)
        expect(title).to_contain_text("f32[8@x, 8@y] on Mesh(x=2, y=4)")
    _change_and_wait(timer, title, parts["shape"], "7, 6", "f32[7@x, 6@y]")
    dim[0].select_option("y then x")
    dim[1].select_option("— (not split)")
    expect(title).to_contain_text("f32[7@(y,x), 6]", timeout=30_000)
    editor.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot("01-uneven")
    # the lesson's "Try" step: the 4x2 mesh first, then the iota string
    _change_and_wait(timer, title, parts["mesh"], "a=4, b=2", "Mesh(a=4, b=2)")
    _type(parts["hlo"], "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}")
    expect(parts["message"]).to_contain_text("read {devices=[2,1,4]", timeout=30_000)
    expect(title).to_contain_text("f32[7@b, 6] on Mesh(a=4, b=2)", timeout=30_000)
    expect(parts["hlo"]).to_have_value("{devices=[2,1,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}")
    _change_and_wait(timer, title, parts["mesh"], "x=8, y=8", "Mesh(x=8, y=8)")
    _change_and_wait(timer, title, parts["shape"], "16, 16", "f32[16")
    dim[0].select_option("x")
    dim[1].select_option("y")
    expect(title).to_contain_text("f32[16@x, 16@y] on Mesh(x=8, y=8)", timeout=30_000)
    editor.locator(".gv-layout-plot").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    shot("01-64-devices")
    _type(parts["mesh"], "x=2, y=4")
    _type(parts["shape"], "7, 6")
    dim[0].select_option("x")
    dim[1].select_option("y")
    expect(title).to_contain_text("f32[7@x, 6@y] on Mesh(x=2, y=4)", timeout=30_000)
    editor.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    shot("lesson01")
    return f"{timer.report('lesson 01 editor')}\n  in order (ms): {[round(ms) for ms in timer.ms]}"


DRIVERS = {"01_sharding": drive_01}


def run_lesson_in_browser(lab, lesson: str, driver, unrun: bool, run_timeout_ms: int) -> None:
    """Open `lesson` in JupyterLab, (unrun: check the static pictures it shows as committed,)
    run every cell afresh, hand the page to `driver`, then assert no error output and an empty
    log console. Shared by every lesson's browser test."""
    from playwright.sync_api import expect, sync_playwright

    url, env = lab
    OUT.mkdir(exist_ok=True)
    patient_expect()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS, env=env
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})

            def shot(name: str) -> None:
                page.screenshot(path=str(OUT / f"{name}.png"))

            if not unrun:  # open it bare: nothing committed can linger on the page
                _strip_outputs(Path(env["HOME"]) / "notebooks" / f"{lesson}.ipynb")
            # ?reset: JupyterLab would otherwise restore the lesson opened before in its tab,
            # whose cells the page-wide selectors below would count as this lesson's
            page.goto(f"{url}/lab/tree/{lesson}.ipynb?reset")
            page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
            _wait_idle(page, 60_000)
            page.keyboard.press("Control+b")  # hide the file browser: more room for the lesson
            if unrun:
                _check_unrun_pictures(page, shot, lesson)
            _run_all_fresh(page, timeout_ms=run_timeout_ms)
            errors = page.locator(
                ".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr'], "
                ".jp-Notebook .jp-OutputArea-output[data-mime-type*='error']"
            )
            expect(errors).to_have_count(0)
            print(driver(page, shot))
            expect(errors).to_have_count(0)
            console = _open_log_console(page)  # it keeps what was logged while closed
            expect(console).to_contain_text("No log messages")
            entries = console.locator(".jp-OutputArea-child")
            assert entries.count() == 0, entries.all_inner_texts()
        finally:
            browser.close()


def patient_expect() -> None:
    """Every `expect` waits up to 30 s (Playwright's default is 5 s): make test runs two
    workers, and on a loaded 2-core machine a widget's second comm message (e.g. the one that
    un-greys a figure) can arrive seconds after the first."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)


def _strip_outputs(path: Path) -> None:
    """Clear the outputs of the lab's copy of a lesson (the committed file is never touched)."""
    notebook = json.loads(path.read_text())
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    path.write_text(json.dumps(notebook))


def _check_unrun_pictures(page, shot, lesson: str) -> None:
    """As committed, with no live widget, each widget cell's static picture shows."""
    from playwright.sync_api import expect

    static = page.locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
    expect(static.first).to_be_attached(timeout=30_000)
    static.last.scroll_into_view_if_needed()
    expect(static.last).to_be_visible()
    page.wait_for_timeout(500)
    shot(f"{lesson}-unrun")


@pytest.mark.parametrize("lesson", sorted(DRIVERS))
def test_lesson_widgets_in_the_browser(lab, lesson):
    run_lesson_in_browser(lab, lesson, DRIVERS[lesson], unrun=True, run_timeout_ms=180_000)
    assert (OUT / f"{lesson}-unrun.png").stat().st_size > 10_000
