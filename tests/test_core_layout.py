"""The layout shows the architecture: core's folders are its phases, read in one order.

Every core module is listed in core/__init__.py's "Module order:" and imports only modules listed
before it (so each phase folder imports only earlier phases); no module of the package imports a
project module inside a function (a `_repr_html_` may import gspmd_viz.viz); no two core
modules share a name; each core folder keeps within a line budget; functions stay within 40 lines.
"""

import ast
from pathlib import Path

import gspmd_viz
import gspmd_viz.core as core

PACKAGE = Path(gspmd_viz.__file__).parent
CORE = Path(core.__file__).parent
FOLDER_BUDGET = 1600  # lines per core folder: the phase, not the file, is the unit
FUNCTION_BUDGET = 40


def _order() -> list[str]:
    return core.__doc__.split("Module order:")[1].split()


def _core_module(path: Path) -> str:
    return ".".join(path.relative_to(CORE).with_suffix("").parts)


def _project_imports(tree: ast.AST) -> list[tuple[str, str | None]]:
    """(imported gspmd_viz module, the function it is imported in or None) for every import."""
    found = []
    scopes = [(tree, None)] + [
        (n, n.name) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for scope, name in scopes:
        body = ast.walk(scope) if name else scope.body
        for node in body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gspmd_viz"):
                found += [(f"{node.module}.{a.name}", name) for a in node.names]
            elif isinstance(node, ast.Import):
                found += [(a.name, name) for a in node.names if a.name.startswith("gspmd_viz")]
    return found


def _core_dependency(imported: str, order: list[str]) -> str | None:
    """The core module an import names (`gspmd_viz.core.halo.exchange.X` -> `halo.exchange`)."""
    parts = imported.split(".")[2:]
    for n in (2, 1):
        if ".".join(parts[:n]) in order:
            return ".".join(parts[:n])
    return None


def test_every_core_module_is_in_the_documented_order():
    modules = {_core_module(p) for p in CORE.rglob("*.py") if p.stem != "__init__"}
    assert sorted(_order()) == sorted(modules)


def test_core_imports_only_earlier_modules():
    order = _order()
    for name in order:
        tree = ast.parse((CORE / (name.replace(".", "/") + ".py")).read_text())
        for imported, _ in _project_imports(tree):
            assert imported.startswith(("gspmd_viz.core.", "gspmd_viz.units.")), (
                f"core/{name} imports {imported}: core imports only core (and units)"
            )
            if imported.startswith("gspmd_viz.units."):
                continue
            dep = _core_dependency(imported, order)
            assert dep is not None, f"core/{name} imports a folder ({imported}): name the module"
            assert order.index(dep) < order.index(name), f"core/{name} imports {dep} (later)"


def test_no_function_local_project_imports():
    for path in PACKAGE.rglob("*.py"):
        for imported, function in _project_imports(ast.parse(path.read_text())):
            allowed = function == "_repr_html_" and imported.startswith("gspmd_viz.viz")
            assert function is None or allowed, f"{path}: {function} imports {imported}"


def test_core_module_names_are_unique():
    stems = [p.stem for p in CORE.rglob("*.py") if p.stem != "__init__"]
    assert len(stems) == len(set(stems)), sorted(s for s in stems if stems.count(s) > 1)


def test_each_core_folder_keeps_its_line_budget():
    for folder in (p for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        lines = sum(len(p.read_text().splitlines()) for p in folder.glob("*.py"))
        assert lines <= FOLDER_BUDGET, f"core/{folder.name}: {lines} lines"


def test_functions_stay_small_everywhere():
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                assert n <= FUNCTION_BUDGET, (
                    f"{path.relative_to(PACKAGE)}: {node.name} has {n} lines"
                )
