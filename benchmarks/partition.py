"""Partitioner benchmarks, measured side by side in one run (prints; never asserts).

1. Our wire bytes / XLA's, per zoo program, same input and output shardings (goal <= 1.0).
2. Our partitioned runtime / jax.jit with the same shardings on 8 CPU devices
   (medians of several runs; goal <= 1.15).
3. Partition time on a 64x64 mesh / on a 2x4 mesh (symbolic; goal <= 1.2).

Run: .venv/bin/python benchmarks/partition.py
"""

import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
from timing import paired_times  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz import examples  # noqa: E402
from gspmd_viz.core import split  # noqa: E402


def bytes_and_runtime(name: str) -> tuple[float, float, float, float]:
    ex = examples.get(name)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    spmd = gv.partition(prop)
    theirs = gv.xla.collectives(
        ex.fn, *ex.args, mesh=ex.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    xla_bytes = sum(c.wire_bytes for c in theirs)
    flat = jax.tree.leaves(ex.args)
    placed = [
        jax.device_put(x, s.to_named_sharding()) for x, s in zip(flat, prop.inputs, strict=True)
    ]
    args = jax.tree.unflatten(jax.tree.structure(ex.args), placed)
    jitted = jax.jit(
        ex.fn,
        in_shardings=jax.tree.unflatten(
            jax.tree.structure(ex.args), [s.to_named_sharding() for s in prop.inputs]
        ),
        out_shardings=jax.tree.unflatten(
            jax.tree.structure(jax.eval_shape(ex.fn, *ex.args)),
            [s.to_named_sharding() for s in prop.outputs],
        ),
    )
    ours_t, jit_t = paired_times(lambda: spmd(*args), lambda: jitted(*args))
    return spmd.wire_bytes, xla_bytes, ours_t, jit_t


def partition_times(meshes, name: str = "transformer_block", repeats: int = 9) -> list[float]:
    """Median partition time per mesh (symbolic), meshes taking turns, planner cache cleared."""
    props = []
    for mesh in meshes:
        ex = examples.get(name, mesh=mesh, symbolic=True)
        props.append(gv.propagate(gv.trace(ex.fn, *ex.args)))
    times = [[] for _ in meshes]
    for r in range(repeats + 1):
        for prop, ts in zip(props, times, strict=True):
            split.cached_plan.cache_clear()  # measure planning too, not a cache hit
            start = time.perf_counter()
            gv.partition(prop)
            if r:  # the first round warms up
                ts.append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


def main() -> None:
    head = f"{'zoo program':<20} {'ours B':>9} {'XLA B':>9} {'bytes':>6}   "
    print(head + f"{'ours':>9} {'jit':>9} {'time':>6}")
    for name in sorted(examples.ZOO):
        ours_b, xla_b, ours_t, jit_t = bytes_and_runtime(name)
        ratio_b = ours_b / xla_b if xla_b else float("nan")
        print(
            f"{name:<20} {ours_b:>9.0f} {xla_b:>9.0f} {ratio_b:>6.2f}   "
            f"{ours_t * 1e3:>7.2f}ms {jit_t * 1e3:>7.2f}ms {ours_t / jit_t:>6.2f}"
        )
    small, big = partition_times([{"x": 2, "y": 4}, {"x": 64, "y": 64}])
    print(
        f"partition time, transformer block: 2x4 {small * 1e3:.1f} ms, "
        f"64x64 {big * 1e3:.1f} ms, ratio {big / small:.2f} (goal <= 1.2)"
    )


if __name__ == "__main__":
    main()
