"""Partitioner benchmarks, measured side by side in one run (prints; never asserts).

1. Per zoo program, same input and output shardings, ours / XLA's: per-device FLOPs and memory
   (each compiled program's cost and memory analysis), wire bytes (XLA's reduce-scatter counted
   fairly); goals <= 1.05, <= 1.10, <= 1.0. Then our partitioned runtime / jax.jit on 8 CPU
   devices (medians of several runs; goal <= 1.15).
2. At real sizes (d_model 8192, vocab 32k, a 16x16 mesh; symbolic, so no devices and no XLA):
   the estimated step time on tpu-v3 of the plan chosen by time / the plan chosen by bytes
   alone, and each plan's per-device FLOPs over the ideal (global FLOPs / devices).
3. Partition time on a 64x64 mesh / on a 2x4 mesh (symbolic; goal <= 1.2).

Run: .venv/bin/python benchmarks/partition.py
"""

import math
import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from gspmd_viz import examples  # noqa: E402
from gspmd_viz.core import split  # noqa: E402
from gspmd_viz.core.collective import wire_bytes  # noqa: E402
from gspmd_viz.core.cost import ChipCost  # noqa: E402
from gspmd_viz.core.partition import cost_on  # noqa: E402
from gspmd_viz.units import format_bytes, format_time  # noqa: E402

F32, I32 = np.float32, np.int32
D, V, H = 8192, 32768, 32768  # d_model, vocabulary, feed-forward hidden
REAL = {  # zoo program -> its arguments at real sizes
    "mlp": [(8192, D), (D, H), (H, D)],
    "mlp_train_step": [(8192, D), (8192, D), (D, H), (H, D)],
    "transformer_block": [(16, 2048, D), *[(D, 64, 128)] * 4, (D, H), (H, D)],
    "moe": [(256, 1024, D), (D, 16), (16, D, H), (16, H, D)],
    "embedding_loss": [((256, 2048), I32), ((256, 2048), I32), (V, D)],
    "conv_block": [(64, 128, 128, 256), (3, 3, 256, 512), (512, 10)],
}
DM, VM, HM = 256, 2048, 1024  # middle sizes: XLA still compiles them on 8 CPU devices
MIDDLE = {
    "mlp": [(1024, DM), (DM, HM), (HM, DM)],
    "mlp_train_step": [(1024, DM), (1024, DM), (DM, HM), (HM, DM)],
    "transformer_block": [(8, 128, DM), *[(DM, 8, 32)] * 4, (DM, HM), (HM, DM)],
    "moe": [(8, 64, DM), (DM, 8), (8, DM, HM), (8, HM, DM)],
    "embedding_loss": [((64, 32), I32), ((64, 32), I32), (VM, DM)],
    "conv_block": [(8, 32, 32, 16), (3, 3, 16, 32), (32, 10)],
}
BYTES_ONLY = ChipCost(  # the old chooser: wire bytes, nothing else
    "bytes only",
    math.inf,
    math.inf,
    math.inf,
    lambda kind, s, n: wire_bytes(kind, s / n if kind == "all-gather" else s, n),
)


def paired_times(fn_a, fn_b, repeats: int = 41, warmup: int = 3) -> tuple[float, float]:
    """Median seconds of two functions, run alternately so both see the same machine load."""
    for _ in range(warmup):
        jax.block_until_ready(fn_a())
        jax.block_until_ready(fn_b())
    times_a, times_b = [], []
    for _ in range(repeats):
        for fn, times in ((fn_a, times_a), (fn_b, times_b)):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times.append(time.perf_counter() - start)
    return statistics.median(times_a), statistics.median(times_b)


def runtimes(ex, prop, spmd) -> tuple[float, float]:
    named = [s.to_named_sharding() for s in prop.inputs]
    placed = [jax.device_put(x, s) for x, s in zip(jax.tree.leaves(ex.args), named, strict=True)]
    args = jax.tree.unflatten(jax.tree.structure(ex.args), placed)
    out_tree = jax.tree.structure(jax.eval_shape(ex.fn, *ex.args))
    jitted = jax.jit(
        ex.fn,
        in_shardings=jax.tree.unflatten(jax.tree.structure(ex.args), named),
        out_shardings=jax.tree.unflatten(out_tree, [s.to_named_sharding() for s in prop.outputs]),
    )
    return paired_times(lambda: spmd(*args), lambda: jitted(*args))


def arrays(shapes, symbolic: bool):
    rng, out = np.random.default_rng(0), []
    for s in shapes:
        shape, dtype = s if isinstance(s[1], type) else (s, F32)
        if symbolic:
            out.append(jax.ShapeDtypeStruct(shape, dtype))
        elif dtype == I32:
            out.append(jax.numpy.asarray(rng.integers(0, 32, shape), dtype))
        else:
            out.append(jax.numpy.asarray(rng.standard_normal(shape) / np.sqrt(shape[-1]), dtype))
    return out


def zoo_table(sizes=None) -> None:
    """Ours / XLA's per device; the zoo's own sizes (and runtimes) when `sizes` is None."""
    where = "the zoo's sizes" if sizes is None else f"d_model {DM}, vocab {VM}"
    print(f"\n{where}, 2x4 mesh: ours/XLA per device")
    print(f"{'zoo program':<18} {'FLOPs':>6} {'memory':>7} {'bytes':>6}")
    for name in sorted(examples.ZOO):
        ex = examples.get(name)
        args = ex.args if sizes is None else arrays(sizes[name], symbolic=False)
        prop = gv.propagate(gv.trace(ex.fn, *args))
        spmd = gv.partition(prop)
        side = gv.xla.compare_cost(ex.fn, args, spmd)
        print(
            f"{name:<18} {side.ratio('flops'):>6.3f} {side.ratio('memory'):>7.3f} "
            f"{side.ratio('wire_bytes'):>6.3f}   {side.text()}"
        )
        if sizes is None:
            ours_t, jit_t = runtimes(ex, prop, spmd)
            print(
                f"{'':<18} runtime ours {ours_t * 1e3:.2f} ms / jax.jit {jit_t * 1e3:.2f} ms "
                f"= {ours_t / jit_t:.2f}"
            )


def real_size_table(mesh=None) -> None:
    mesh = mesh or {"x": 16, "y": 16}
    print("\nreal sizes on a 16x16 mesh, estimated on tpu-v3 (time plan vs bytes-only plan)")
    for name, shapes in REAL.items():
        ex = examples.get(name, mesh=mesh, symbolic=True)
        args = arrays(shapes, symbolic=True)
        prop = gv.propagate(gv.trace(ex.fn, *args))
        by_time, by_bytes = gv.partition(prop), gv.partition(prop, chip=BYTES_ONLY)
        ideal = ideal_flops(by_time)
        t, b = by_time.cost, cost_on(by_bytes, "tpu-v3")
        print(
            f"{name:<18} time plan {format_time(t.time_s):>10} / bytes plan "
            f"{format_time(b.time_s):>10} = {t.time_s / b.time_s:.2f}; FLOPs/ideal "
            f"{t.flops / ideal:.2f} vs {b.flops / ideal:.2f}; bytes {format_bytes(t.wire_bytes)} "
            f"vs {format_bytes(b.wire_bytes)}; peak {format_bytes(t.peak_bytes)} "
            f"vs {format_bytes(b.peak_bytes)}"
        )


def ideal_flops(spmd) -> float:
    """Global FLOPs of the program (every equation unsplit) over the devices."""
    part = gv.core.partition.Partitioner(spmd.prop, BYTES_ONLY)
    total = sum(part.split(e).flops({}) for e in part.live())
    return total / spmd.mesh.size


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
    zoo_table()
    zoo_table(MIDDLE)
    real_size_table()
    small, big = partition_times([{"x": 2, "y": 4}, {"x": 64, "y": 64}])
    print(
        f"\npartition time, transformer block: 2x4 {small * 1e3:.1f} ms, "
        f"64x64 {big * 1e3:.1f} ms, ratio {big / small:.2f} (goal <= 1.2)"
    )


if __name__ == "__main__":
    main()
