"""gv.explain on the zoo and on random programs from tests/fuzz_programs.py: every collective
of XLA's compiled program must appear in the report (gv.xla.collectives, read separately, is the
oracle), on a line inside the user's function, with a reason. Then the explain widget's handler
times, and the time gv.explain takes beyond XLA's own compile on 300+-equation programs
(transformer_stack), both measured here.

    PYTHONPATH=$PWD python benchmarks/explain.py [--programs 40] [--layers 5 24]
"""

import argparse
import inspect
import sys
import time
import warnings
from pathlib import Path

import gspmd_viz as gv

gv.use_cpu_devices(8)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from fuzz_programs import NO_XLA, programs  # noqa: E402
from hypothesis.errors import NonInteractiveExampleWarning  # noqa: E402

from gspmd_viz.explain.compiled import compile_program  # noqa: E402
from gspmd_viz.viz.explain.widget import ExplainWidget  # noqa: E402
from gspmd_viz.zoo import examples  # noqa: E402


def complete(fn, args, mesh) -> str:
    """'' when the report lists exactly XLA's collectives, each inside fn with a reason."""
    report = gv.explain(fn, *args, mesh=mesh)
    theirs = sorted(str(c) for c in gv.xla.collectives(fn, *args, mesh=mesh))
    if theirs != sorted(str(e.collective) for e in report.entries):
        return f"lists differ: XLA {len(theirs)}, report {len(report.entries)}"
    lines, first = inspect.getsourcelines(inspect.unwrap(fn))
    outside = [e.line for e in report.entries if not first <= e.line < first + len(lines)]
    unexplained = [e for e in report.entries if not e.reason.strip()]
    if outside or unexplained:
        return f"lines outside the function {outside}, {len(unexplained)} without a reason"
    return ""


def zoo() -> tuple[int, int]:
    bad = 0
    for name in sorted(examples.ZOO):
        ex = examples.get(name)
        problem = complete(ex.fn, ex.args, ex.mesh)
        bad += bool(problem)
        print(f"zoo {name}: {problem or 'every collective explained'}")
    return len(examples.ZOO), bad


def random_programs(count: int) -> tuple[int, int, int]:
    warnings.simplefilter("ignore", NonInteractiveExampleWarning)
    strategy, seen, bad, collectives = programs(), 0, 0, 0
    while seen < count:
        p = strategy.example()
        if any(name in NO_XLA for name, _ in p.steps):
            continue
        seen += 1
        try:
            problem = complete(p.fn, p.args, p.mesh)
            collectives += len(gv.xla.collectives(p.fn, *p.args, mesh=p.mesh))
        except Exception as err:  # noqa: BLE001 - every crash is a finding
            problem = f"{type(err).__name__}: {str(err)[:200]}"
        if problem:
            bad += 1
            print(f"--- {problem}\n{p}")
    return seen, bad, collectives


def timing(layers: int, repeats: int = 3) -> None:
    ex = examples.get("transformer_stack")
    stack = examples.transformer_stack(examples._Annotator(ex.mesh, ex.specs), layers)[0]
    args = ex.args[: 1 + 6 * layers]  # x, then six weights per layer
    eqns = len(gv.trace(stack, *args).equations)
    gv.explain(stack, *args, mesh=ex.mesh)  # warm jax's tracing caches for both sides
    compile_s, explain_s = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        compile_program(stack, *args, mesh=ex.mesh)
        compile_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = gv.explain(stack, *args, mesh=ex.mesh)
        explain_s.append(time.perf_counter() - t)
    c, e = min(compile_s), min(explain_s)
    print(
        f"transformer_stack ({eqns} equations, {len(report.entries)} collectives): "
        f"XLA's compile {c:.2f} s, gv.explain {e:.2f} s, beyond the compile {e - c:.2f} s "
        f"(explain / compile = {e / c:.2f}x)"
    )


def _shuffle(mesh, specs):
    def shuffle_features(x, perm):
        x = gv.mesh_split(x, mesh, specs["x"])
        y = x[:, perm]
        return jnp.tanh(y)

    return shuffle_features


def _timed(act) -> float:
    t = time.perf_counter()
    act()
    return time.perf_counter() - t


def widget_timing() -> None:
    """The explain widget's handlers in Python: a setting seen for the first time (one XLA
    compile and the reference), the same settings again (kept reports), a click on each line."""
    args = (jnp.ones((16, 64)), jnp.asarray(np.random.default_rng(1).permutation(64)))
    w = ExplainWidget(_shuffle, args, mesh="x=2, y=4", specs={"x": "x, y"})
    settings = [
        (m, s) for m in ("x=4, y=2", "x=8, y=1", "x=2, y=4") for s in ("(x y), None", "x, y")
    ]

    def visit(mesh, spec):
        w.mesh_text.value, w.spec_texts["x"].value = mesh, spec

    firsts = [_timed(lambda m=m, s=s: visit(m, s)) for m, s in settings]
    agains = [_timed(lambda m=m, s=s: visit(m, s)) for m, s in settings]
    clicks = [_timed(button.click) for button in w.lines.children]
    assert not w.message.value, w.message.value
    show = lambda xs: f"median {1e3 * sorted(xs)[len(xs) // 2]:.0f} ms, max {1e3 * max(xs):.0f} ms"  # noqa: E731
    print(
        f"explain widget: new setting {show(firsts)}; seen before {show(agains)}; "
        f"line click {show(clicks)}"
    )


def main(count: int, layers: list[int]) -> None:
    n, bad = zoo()
    print(f"zoo: {n - bad} of {n} programs fully explained")
    seen, bad, collectives = random_programs(count)
    print(f"random: {seen - bad} of {seen} programs fully explained ({collectives} collectives)")
    widget_timing()
    for n in layers:
        timing(n)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--layers", type=int, nargs="+", default=[5, 24])
    args = parser.parse_args()
    main(args.programs, args.layers)
