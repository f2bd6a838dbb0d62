"""Whole decoder models with production layouts (FSDP over "data" + tensor parallel over
"model"), partitioned by us and by XLA, side by side in one run (prints; never asserts).

Per model: max |ours - the unpartitioned program| ("exact" if 0) and the same for XLA's
partitioned run (jax.jit; a contraction split over devices sums in another order, in both),
outputs' shardings == XLA's propagation, ours / XLA's per device: wire bytes, FLOPs (each op
once) and memory (compiled); and our propagate + partition time on a first call (wall, and
CPU; timing.first_call: a fresh trace, the package's caches empty; "again": CPU when the same
program is partitioned again) / XLA's lower + compile of the same program from jax's traced
jaxpr (wall; "lower" is its lowering alone; medians, the two sides taking turns). Every
timing mode times first calls.
Goals (issue 45): exact; bytes <= 1.0; FLOPs <= 1.05; time <= 0.15, a 2-layer model < 250 ms.

The models are keras-hub's own (tests/library_models.py: llama with grouped-query
attention and rotary embeddings, mixtral with a top-2 MoE, gpt_neox with partial rotary
embeddings and parallel attention + MLP) at tiny sizes with random weights, each with
MaxText's FSDP + tensor-parallel layout given per keras variable path; llama_kh is llama
with the layout keras-hub ships for it (LlamaBackbone.get_layout_map).

    PYTHONPATH=$PWD python benchmarks/models.py [--profile | --layers | --phases [MODEL]]

--layers: our propagate + partition time at 2, 4 and 8 layers (CPU ms, and per equation: flat
when the cost of a plan grows linearly in equations). --phases [MODEL]: that time split into
propagate, each pass of gv.partition and the plans' costing.
"""

import os
import statistics
import sys
import time
from pathlib import Path

import gspmd_viz as gv

gv.use_cpu_devices(8)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from library_models import MESH, MODELS, VERSION, build  # noqa: E402
from timing import first_call  # noqa: E402

from gspmd_viz.xla import cost as xla_cost  # noqa: E402
from gspmd_viz.xla.compiled import traced  # noqa: E402


def _error(got, want) -> str:
    diff = max(
        float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
    )
    return "exact" if diff == 0 else f"{diff:.1e}"


def _errors(spmd, f, args) -> str:
    """Ours and XLA's max error against the unpartitioned program, as two columns."""
    want = spmd.program.unpartitioned(*args)
    return f"{_error(spmd(*args), want):>7} {_error(jax.jit(f)(*args), want):>7}"


def _seconds(f, args, prop, repeats: int) -> tuple[float, ...]:
    """Medians of (our propagate + partition wall time on a first call, its CPU time, its CPU
    time when the same program is partitioned again, XLA's lower + compile wall time, its
    lowering alone), the two sides taking turns so both see the same machine load. XLA's side
    lowers and compiles a fresh function each time (no cache answers); neither side's tracing
    is counted (ours starts from gv.trace's program, XLA's from jax's Traced)."""
    ours, cpu, again, xla, lowering = [], [], [], [], []
    for _ in range(repeats):
        prog = first_call(f, args)
        start, start_cpu = time.perf_counter(), time.process_time()
        gv.partition(gv.propagate(prog))
        ours.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        start_cpu = time.process_time()
        gv.partition(gv.propagate(prog))
        again.append(time.process_time() - start_cpu)
        fresh = traced(lambda *a: f(*a), *args, mesh=prop.mesh,  # noqa: PLW0108
                       in_shardings=prop.inputs, out_shardings=prop.outputs)  # fmt: skip
        start = time.perf_counter()
        low = fresh.lower()
        lowering.append(time.perf_counter() - start)
        low.compile()
        xla.append(time.perf_counter() - start)
    return tuple(statistics.median(t) for t in (ours, cpu, again, xla, lowering))


def row(name: str, repeats: int = 7) -> str:
    f, args = build(name)
    prog = gv.trace(f, *args)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    side = xla_cost.compare(f, args, spmd)
    agree = tuple(prop.outputs) == tuple(gv.xla.propagate_program(prog).outputs)
    ours_t, ours_cpu, again_t, xla_t, lower_t = _seconds(f, args, prop, repeats)
    return (
        f"{name:<9}{len(prog.equations):>5} {_errors(spmd, f, args)} {str(agree):>6} "
        f"{side.ratio('wire_bytes'):>6.2f} {side.ratio('flops'):>6.3f} "
        f"{side.ratio('memory'):>6.3f} {ours_t * 1e3:>8.0f} {ours_cpu * 1e3:>8.0f} "
        f"{again_t * 1e3:>6.0f} "
        f"{xla_t * 1e3:>8.0f} {lower_t * 1e3:>6.0f} "
        f"{ours_t / xla_t:>6.2f}   {side.text()}"
    )


def table() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    mesh = " x ".join(f"{axis}={n}" for axis, n in MESH.shape.items())
    print(f"keras-hub {VERSION} decoder models, 2 layers, mesh {mesh}; ours / XLA's per device")
    print("model     eqns max err XLA err  outs   bytes  FLOPs memory  ours ms  ours CPU  again"
          "  XLA ms  lower   time")  # fmt: skip
    for name in MODELS:
        print(row(name))


def scaling(name: str = "llama", layers=(2, 4, 8), repeats: int = 5) -> None:
    """Our propagate + partition time (median CPU ms) as the model grows, per equation too."""
    print(f"{name}: layers  eqns  ours CPU ms  us per eqn")
    for n in layers:
        f, args = build(name, layers=n)
        cpu = []
        for _ in range(repeats):
            prog = first_call(f, args)
            start = time.process_time()
            gv.partition(gv.propagate(prog))
            cpu.append(time.process_time() - start)
        ms, eqns = statistics.median(cpu) * 1e3, len(prog.equations)
        print(f"{n:>14} {eqns:>5} {ms:>12.0f} {ms * 1e3 / eqns:>11.0f}")


def phases(name: str = "llama", repeats: int = 9) -> None:
    """Where our time goes (median CPU ms): propagate, each pass of gv.partition (spread:
    idle axes share work; greedy; follow: XLA's split everywhere; every_trip: loop constants
    moved every trip) and the plans' costing. Timed by wrapping Partitioner.run and
    whole_plan.with_cost for this call only."""
    from gspmd_viz.core.partition import partitioner, whole_plan

    f, args = build(name)
    gv.partition(gv.propagate(gv.trace(f, *args)))  # the first run in the process: imports
    rounds: list[dict[str, float]] = []  # per repeat: label -> CPU seconds
    real_run, real_cost = partitioner.Partitioner.run, whole_plan.with_cost

    def timed(label, fn, *a):
        start = time.process_time()
        out = fn(*a)
        rounds[-1][label] = rounds[-1].get(label, 0.0) + time.process_time() - start
        return out

    def run(self, start=None):
        kind = [n for n in ("follow", "spread", "every_trip") if getattr(self, n)]
        return timed(f"{(kind or ['greedy'])[0]} pass", real_run, self, start)

    partitioner.Partitioner.run = run
    whole_plan.with_cost = lambda *a: timed("plan cost", real_cost, *a)
    try:
        for _ in range(repeats):
            rounds.append({})
            prog = first_call(f, args)
            timed("total partition", gv.partition, timed("propagate", gv.propagate, prog))
    finally:
        partitioner.Partitioner.run, whole_plan.with_cost = real_run, real_cost
    labels = dict.fromkeys(label for r in rounds for label in r)
    parts = [f"{x} {statistics.median(r.get(x, 0.0) for r in rounds) * 1e3:.1f}" for x in labels]
    print(f"{name}: CPU ms, medians of {repeats}: " + "  ".join(parts))


def profile(name: str = "llama", top: int = 12) -> None:
    """The partitioner's top functions by cumulative time on one model."""
    import cProfile
    import pstats

    f, args = build(name)
    prop = gv.propagate(gv.trace(f, *args))
    profiler = cProfile.Profile()
    profiler.runcall(gv.partition, prop)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    jnp.zeros(())  # start the backend before timing anything
    names = [a for a in sys.argv[1:] if a in MODELS]
    if "--profile" in sys.argv:
        profile(*names[:1])
    elif "--phases" in sys.argv:
        for name in names or MODELS:
            phases(name)
    elif "--layers" in sys.argv:
        for name in names or MODELS:
            scaling(name)
    else:
        table()
