"""Packaging promises: binder installs exactly the package's runtime dependencies."""

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


def test_public_surface_is_exported():
    import gspmd_viz as gv

    for name in ("Mesh", "Sharding", "mesh_split", "use_cpu_devices"):
        assert callable(getattr(gv, name)), name
