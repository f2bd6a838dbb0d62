"""Lesson 01 in a real browser: JupyterLab + headless Debian Chromium driven by Playwright.

Runs every cell, finds the sharding editor, changes a dropdown and waits until the kernel has
redrawn the layout. Screenshots land in test-output/ (gitignored). Everything the server and
the browser write goes to a temp HOME; the server is stopped by its PID.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

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
QUIET = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}
}


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium (make test does) to run this"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    (settings / "overrides.json").write_text(json.dumps(QUIET))
    port = _free_port()
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


def test_lesson01_runs_and_the_editor_redraws_through_the_kernel(lab):
    from playwright.sync_api import expect, sync_playwright

    url, env = lab
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS, env=env
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{url}/lab/tree/01_sharding.ipynb")
            page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
            _wait_idle(page, 60_000)
            page.keyboard.press("Control+b")  # hide the file browser: more room for the lesson
            # The committed outputs are cleared first, so each output seen below was computed
            # by this kernel; the last cell's output then proves every cell ran.
            last_output = page.locator(".jp-OutputArea-output", has_text="y-block 63 is empty")
            expect(last_output).to_have_count(1)  # as committed
            _menu(page, "Edit", "Clear Outputs of All Cells")
            expect(last_output).to_have_count(0)
            _menu(page, "Run", "Run All Cells")
            expect(last_output).to_have_count(1, timeout=90_000)
            editor = page.locator(".gv-sharding-editor")
            expect(editor).to_have_count(1, timeout=30_000)
            errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
            expect(errors).to_have_count(0)
            notations = editor.locator(".gv-notations")
            title = editor.locator(".js-plotly-plot .gtitle")
            expect(notations).to_contain_text("P('x', None)")
            expect(title).to_contain_text("f32[8@x, 8] on Mesh(x=2, y=4)", timeout=30_000)

            editor.locator(".gv-dim-1 select").select_option(label="y")

            # Only the kernel can redraw: the widget round-trips through the comm.
            expect(notations).to_contain_text("{devices=[2,4]0,1,2,3,4,5,6,7}", timeout=30_000)
            expect(title).to_contain_text("f32[8@x, 8@y] on Mesh(x=2, y=4)", timeout=30_000)
            shape = editor.locator("input[placeholder='8, 6']")  # the tensor shape box
            shape.fill("7, 6")
            shape.press("Enter")
            expect(title).to_contain_text("f32[7@x, 6@y] on Mesh(x=2, y=4)", timeout=30_000)
            editor.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)  # let plotly finish its transition
            page.screenshot(path=str(OUT / "lesson01.png"))
        finally:
            browser.close()
    assert (OUT / "lesson01.png").stat().st_size > 10_000
