"""An all-to-all over a pair of devices, as our kernels run it (one collective-permute of the
half that moves: reshard_kernels._swap_halves) and as XLA's all-to-all: memory and time on the 8 CPU
devices, side by side in one process (prints; never asserts).

The swap holds less: XLA:CPU's all-to-all copies both halves out to send and both in. It takes
longer here: XLA:CPU's collective-permute costs more per call than its all-to-all, which the
last lines time alone. On a TPU torus a pair's exchange is one link's transfer either way.

Run: .venv/bin/python benchmarks/pair_swap.py
"""

import jax
import numpy as np
from jax.sharding import PartitionSpec as P
from timing import paired_times  # (benchmarks/ is the script's directory)

import gspmd_viz as gv

gv.use_cpu_devices(8)

from gspmd_viz.core.spmd import reshard_kernels  # noqa: E402
from gspmd_viz.xla import cost as xla_cost  # noqa: E402
from gspmd_viz.zoo import examples  # noqa: E402

MESH = gv.Mesh({"x": 2, "y": 4})


def xlas_all_to_all(axes, x, split: int, concat: int):
    return jax.lax.all_to_all(x, axes, split, concat, tiled=True)


def moved(rows: int):
    """[rows@x, rows] -> a * a + a -> [rows, rows@x]: one all-to-all over x."""

    def f(a):
        a = gv.mesh_split(a, MESH, ("x", None))
        return gv.mesh_split(a * a + a, MESH, (None, "x"))

    return f, (np.random.default_rng(0).normal(size=(rows, rows)).astype(np.float32),)


def placed(prop, args):
    pairs = zip(args, prop.inputs, strict=True)
    return tuple(jax.device_put(x, sharding.to_named_sharding()) for x, sharding in pairs)


def both_ways(prop, args, on):
    """[(program, compiled memory)] for ours and with XLA's all-to-all, each run on `on` (the
    placed args) and measured while its kernel is in place: a program is lowered when first
    run or compiled, for each placement of its arguments."""
    built = []
    for swap in (reshard_kernels._swap_halves, xlas_all_to_all):
        ours, reshard_kernels._swap_halves = reshard_kernels._swap_halves, swap
        try:
            spmd = gv.partition(prop)
            spmd(*on)
            built.append((spmd, xla_cost.ours(spmd, args).memory))
        finally:
            reshard_kernels._swap_halves = ours
    return built


def compare(name, f, args):
    prop = gv.propagate(gv.trace(f, *args))
    on = placed(prop, args)
    (swap, swap_mem), (a2a, a2a_mem) = both_ways(prop, args, on)
    t_swap, t_a2a = paired_times(lambda: swap(*on), lambda: a2a(*on), repeats=61)
    print(
        f"{name:10} memory {swap_mem:>7,} B / {a2a_mem:>7,} B = {swap_mem / a2a_mem:.3f}   "
        f"time {t_swap * 1e6:6.0f} µs / {t_a2a * 1e6:6.0f} µs = {t_swap / t_a2a:.2f}"
    )


def collectives_alone():
    """One collective on f32[8, 32] a device over x, nothing else."""
    x = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)

    def run(body):
        spec = P("x")
        return jax.jit(jax.shard_map(body, mesh=MESH.to_jax(), in_specs=spec, out_specs=spec))

    a2a = run(lambda a: jax.lax.all_to_all(a, "x", 1, 0, tiled=True).reshape(a.shape))
    permute = run(lambda a: jax.lax.ppermute(a, "x", [(0, 1), (1, 0)]))
    t_permute, t_a2a = paired_times(lambda: permute(x), lambda: a2a(x), repeats=101)
    print(f"alone      collective-permute {t_permute * 1e6:.0f} µs, ", end="")
    print(f"all-to-all {t_a2a * 1e6:.0f} µs")


def main():
    print("ours (swap) / XLA's all-to-all, per device: memory (compiled) and time (median)")
    moe = examples.get("moe")
    compare("moe", moe.fn, moe.args)
    for rows in (16, 256):
        compare(f"move {rows}", *moved(rows))
    collectives_alone()


if __name__ == "__main__":
    main()
