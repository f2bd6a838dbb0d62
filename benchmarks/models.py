"""Whole decoder models with production layouts (FSDP over "data" + tensor parallel over
"model"), partitioned by us and by XLA, side by side in one run (prints; never asserts).

Per model: max |ours - the unpartitioned program| ("exact" if 0), outputs' shardings ==
XLA's propagation, ours / XLA's per device: wire bytes, FLOPs (each op once) and memory (compiled);
and our propagate + partition time (wall, and CPU) / XLA's lower + compile of the same
program (wall; medians, the two sides taking turns).
Goals (issue 45): exact; bytes <= 1.0; FLOPs <= 1.05; time <= 0.15, a 2-layer model < 250 ms.

The models are written in plain jax (benchmarks/model_zoo.py) at tiny sizes with random
weights (no downloads), each block following a library's own implementation, the decoders of
Hugging Face transformers (flax, the project's test-only extra, ships its example models
outside its package, so none is imported from a model library here):
  llama    LlamaForCausalLM: RMSNorm, rotary embeddings by `rotate_half` (split the head dim
           in halves, concatenate), grouped-query attention, SwiGLU MLP, untied head
  mixtral  MixtralForCausalLM: llama attention and a top-2 MoE of SwiGLU experts, experts
           over "model" (dense dispatch: every expert on its tokens' combine weights)
  gptj     GPTJForCausalLM: LayerNorm, interleaved rotary (`rotate_every_two`: stack and
           flatten), parallel attention + MLP, multi-head attention, GELU MLP
Layouts as MaxText ships them: embeddings [vocab@model, embed@data], q/k/v [embed@data,
heads@model, ..], out [heads@model, .., embed@data], MLP in [embed@data, hidden@model], out
[hidden@model, embed@data], experts [expert@model, embed@data, hidden], tokens [batch@data].

    PYTHONPATH=$PWD python benchmarks/models.py [--profile [MODEL]] [--layers [MODEL]]

--layers: our propagate + partition time at 2, 4 and 8 layers (CPU ms, and per equation: flat
when the cost of a plan grows linearly in equations).
"""

import os
import statistics
import sys
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from model_zoo import MODELS, build  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.xla import cost as xla_cost  # noqa: E402
from gspmd_viz.xla.compiled import lowered  # noqa: E402


def _exact(spmd, args) -> str:
    got, want = spmd(*args), spmd.program.unpartitioned(*args)
    diff = max(
        float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
    )
    return "exact" if diff == 0 else f"{diff:.1e}"


def _seconds(prog, f, args, prop, repeats: int) -> tuple[float, float, float]:
    """Medians of (our propagate + partition wall time, its CPU time, XLA's lower + compile
    wall time), the two sides taking turns so both see the same machine load. XLA's side
    compiles a fresh function each time (no cache answers); tracing is not counted."""
    ours, cpu, xla = [], [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        gv.partition(gv.propagate(prog))
        ours.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        fresh = lowered(lambda *a: f(*a), *args, mesh=prop.mesh,  # noqa: PLW0108
                        in_shardings=prop.inputs, out_shardings=prop.outputs)  # fmt: skip
        start = time.perf_counter()
        fresh.compile()
        xla.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(cpu), statistics.median(xla)


def row(name: str, repeats: int = 7) -> str:
    f, args = build(name)
    prog = gv.trace(f, *args)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    side = xla_cost.compare(f, args, spmd)
    agree = tuple(prop.outputs) == tuple(gv.xla.propagate_program(prog).outputs)
    ours_t, ours_cpu, xla_t = _seconds(prog, f, args, prop, repeats)
    return (
        f"{name:<8} {len(prog.equations):>5} {_exact(spmd, args):>7} {str(agree):>6} "
        f"{side.ratio('wire_bytes'):>6.2f} {side.ratio('flops'):>6.3f} "
        f"{side.ratio('memory'):>6.3f} {ours_t * 1e3:>8.0f} {ours_cpu * 1e3:>8.0f} "
        f"{xla_t * 1e3:>8.0f} "
        f"{ours_t / xla_t:>6.2f}   {side.text()}"
    )


def table() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("decoder models, 2 layers, mesh data=2 x model=4; ours / XLA's per device")
    head = "model     eqns max err  outs   bytes  FLOPs memory  ours ms  ours CPU  XLA ms   time"
    print(head)
    for name in MODELS:
        print(row(name))


def scaling(name: str = "llama", layers=(2, 4, 8), repeats: int = 5) -> None:
    """Our propagate + partition time (median CPU ms) as the model grows, per equation too."""
    print(f"{name}: layers  eqns  ours CPU ms  us per eqn")
    for n in layers:
        f, args = build(name, layers=n)
        prog = gv.trace(f, *args)
        cpu = []
        for _ in range(repeats):
            start = time.process_time()
            gv.partition(gv.propagate(prog))
            cpu.append(time.process_time() - start)
        ms, eqns = statistics.median(cpu) * 1e3, len(prog.equations)
        print(f"{n:>14} {eqns:>5} {ms:>12.0f} {ms * 1e3 / eqns:>11.0f}")


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
    elif "--layers" in sys.argv:
        for name in names or MODELS:
            scaling(name)
    else:
        table()
