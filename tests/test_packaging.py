"""Packaging promises: binder installs exactly the package's runtime dependencies."""

import json
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _lines(path: Path) -> list[str]:
    text = path.read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_binder_requirements_equal_package_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(_lines(ROOT / "binder" / "requirements.txt")) == sorted(project["dependencies"])


def test_binder_installs_graphviz_and_the_package():
    assert "graphviz" in _lines(ROOT / "binder" / "apt.txt")
    post_build = ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111, "repo2docker runs postBuild only if executable"
    assert "pip install" in post_build.read_text()


def test_make_lab_turns_the_jupyter_news_prompt_off(tmp_path):
    """`make lab` installs binder/overrides.json where the venv's JupyterLab reads its settings."""
    from jupyterlab.commands import get_app_dir

    overrides = json.loads((ROOT / "binder" / "overrides.json").read_text())
    plugin = "@jupyterlab/apputils-extension:notification"
    assert overrides[plugin] == {"fetchNews": "false", "checkForUpdates": False}
    app_dir = Path(get_app_dir())
    schema = json.loads((app_dir / "schemas" / f"{plugin.replace(':', '/')}.json").read_text())
    fetch = schema["properties"]["fetchNews"]
    assert "false" in [choice["const"] for choice in fetch["oneOf"]]  # "Never", not "Ask"
    assert schema["properties"]["checkForUpdates"]["type"] == "boolean"
    venv = tmp_path / "venv"  # `make` with another VENV: the real one is not touched
    installed = venv / app_dir.relative_to(sys.prefix) / "settings" / "overrides.json"
    subprocess.run(["make", "-s", "-C", str(ROOT), f"VENV={venv}", str(installed)], check=True)
    assert json.loads(installed.read_text()) == overrides


# The public surface: what lessons and outside checks reach from `import gspmd_viz as gv`.
PUBLIC_SURFACE = """
gv.use_cpu_devices gv.Mesh gv.Sharding gv.Sharding.from_hlo gv.Sharding.from_dims_mapping
gv.mesh_split gv.trace gv.propagate gv.partition gv.reshard_plan gv.Collective
gv.xla.propagate gv.xla.collectives gv.xla.compare
gv.sim.torus gv.sim.preset gv.sim.simulate gv.sim.closed_form gv.sim.lower_bound gv.sim.algorithms
gv.pipeline.schedule gv.pipeline.simulate gv.pipeline.bubble_fraction gv.pipeline.run
gv.weight_update_sharding
gv.halo_plan
"""


def test_public_surface_is_reachable_from_a_plain_import():
    # A fresh interpreter: in this one, other tests have imported the submodules already.
    names = PUBLIC_SURFACE.split()
    script = "import gspmd_viz as gv\n" + "".join(f"assert callable({n}), {n!r}\n" for n in names)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT)
