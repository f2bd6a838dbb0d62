"""core reads top to bottom: every module imports only modules listed above it in
gspmd_viz/core/__init__.py and imports no core module inside a function (hidden cycles);
files stay near 300 lines and functions within 40."""

import ast
from pathlib import Path

import gspmd_viz.core as core

CORE = Path(core.__file__).parent


def _order() -> list[str]:
    text = core.__doc__.split("Module order:")[1]
    return text.split()


def _core_imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, inside a function?) for every `from gspmd_viz.core...` import."""
    found = []
    for fn in [tree, *[n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]]:
        nested = fn is not tree
        body = ast.walk(fn) if nested else fn.body
        for node in body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gspmd_viz"):
                if node.module == "gspmd_viz.core":
                    found += [(a.name, nested) for a in node.names]
                elif node.module.startswith("gspmd_viz.core."):
                    found.append((node.module.split(".")[2], nested))
    return found


def test_every_core_module_is_in_the_documented_order():
    modules = {p.stem for p in CORE.glob("*.py")} - {"__init__"}
    assert sorted(_order()) == sorted(modules)


def test_no_forward_or_function_local_imports_in_core():
    order = _order()
    for name in order:
        tree = ast.parse((CORE / f"{name}.py").read_text())
        for dep, nested in _core_imports(tree):
            assert not nested, f"core/{name}.py imports core/{dep}.py inside a function"
            assert order.index(dep) < order.index(name), f"core/{name}.py imports {dep} (later)"


def test_files_and_functions_stay_small():
    for path in CORE.glob("*.py"):
        lines = path.read_text().splitlines()
        assert len(lines) <= 330, f"{path.name}: {len(lines)} lines"
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef):
                n = node.end_lineno - node.lineno + 1
                assert n <= 40, f"{path.name}: {node.name} has {n} lines"
