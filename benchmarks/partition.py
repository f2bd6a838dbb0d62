"""Partitioner benchmarks, measured side by side in one run (prints; never asserts).

1. Per zoo program, same input and output shardings, ours / XLA's per device: FLOPs and memory
   (each compiled program's own cost and memory analysis, the FLOPs with XLA's loop fusion off:
   gv.xla_cost; goals <= 1.05, <= 1.10) and wire bytes
   (XLA's all-reduce + dynamic-slice counted as a reduce-scatter; goal <= 1.0); the FLOPs the
   fused programs' cost analysis charges ("fused": each slice of a fused chain for the whole
   chain, benchmarks/fusion_count.py; no goal); then our
   partitioned runtime / jax.jit on 8 CPU devices (medians of several runs; goal <= 1.15).
2. At real sizes (d_model 8192, vocab 32k, a 16x16 mesh; symbolic: no devices, so no XLA): the
   estimated step time on tpu-v3 of our plan / the plan chosen by wire bytes alone (the chooser
   before issue 11), with each plan's FLOPs, bytes and peak memory per device.
3. Partition time on a 64x64 mesh / on a 2x4 mesh (symbolic; goal <= 1.2): one plan (the
   greedy planner's run), and gv.partition's whole choice, which builds two to four plans (on
   64x64 every toy dim is split over more devices than it has elements, so the greedy plan
   departs from propagation's and the follow plan is built as well).

Run: .venv/bin/python benchmarks/partition.py
"""

import contextlib
import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
from timing import paired_times  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.core.choice import choose_split as split  # noqa: E402
from gspmd_viz.core.cost import plan_cost as plan_record  # noqa: E402
from gspmd_viz.core.partition.partitioner import Partitioner  # noqa: E402
from gspmd_viz.partition_on_chip import chip_cost  # noqa: E402
from gspmd_viz.units import format_bytes, format_time  # noqa: E402
from gspmd_viz.xla import cost as xla_cost  # noqa: E402
from gspmd_viz.zoo import examples  # noqa: E402


@contextlib.contextmanager
def bytes_only():
    """The chooser before issue 11: candidates ranked by wire bytes alone, none merged."""
    saved = split.rank, split.twice, split.merged
    split.rank = lambda q, fa, costs, wire_bytes, promise: (wire_bytes,)
    split.twice, split.merged = (lambda *a: 1), (lambda found: [])
    try:
        yield
    finally:
        split.rank, split.twice, split.merged = saved


def costs_and_runtime(name: str) -> tuple[xla_cost.Side, float, float]:
    ex = examples.get(name)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    spmd = gv.partition(prop)
    side = xla_cost.compare(ex.fn, ex.args, spmd)
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
    return side, ours_t, jit_t


def zoo_table() -> None:
    print("zoo programs on a 2x4 mesh, per device, ours / XLA's")
    print(
        f"{'zoo program':<20} {'FLOPs':>6} {'memory':>6} {'bytes':>6} {'fused':>6}   {'runtime':>7}"
    )
    for name in sorted(examples.ZOO):
        side, ours_t, jit_t = costs_and_runtime(name)
        kinds = ("flops", "memory", "wire_bytes", "fused_flops")
        flops, memory, wire, fused = (side.ratio(k) for k in kinds)
        print(
            f"{name:<20} {flops:>6.3f} {memory:>6.3f} {wire:>6.3f} {fused:>6.3f}   "
            f"{ours_t / jit_t:>7.2f}   {side.text()}"
        )


def real_size_table(mesh=None) -> None:
    mesh = mesh or {"x": 16, "y": 16}
    chip = chip_cost("tpu-v3")
    print("\nreal sizes on a 16x16 mesh, per device on tpu-v3: our plan vs the bytes-only plan")
    for name in examples.REAL_SHAPES:
        ex = examples.real(name, mesh=mesh)
        prop = gv.propagate(gv.trace(ex.fn, *ex.args))
        ours = gv.partition(prop).cost
        with bytes_only():
            old = plan_record.plan_cost(gv.partition(prop), chip)
        print(
            f"{name:<18} time {format_time(ours.time_s):>9} / {format_time(old.time_s):>9} = "
            f"{ours.time_s / old.time_s:.3f};  FLOPs {ours.flops:.3g} / {old.flops:.3g};  "
            f"bytes {format_bytes(ours.wire_bytes)} / {format_bytes(old.wire_bytes)};  "
            f"peak {format_bytes(ours.peak_bytes)} / {format_bytes(old.peak_bytes)}"
        )


def partition_times(
    meshes, run=gv.partition, name: str = "transformer_block", repeats: int = 9
) -> list[float]:
    """Median time of `run(prop)` per mesh (symbolic), meshes taking turns, planner cache
    cleared."""
    props = []
    for mesh in meshes:
        ex = examples.get(name, mesh=mesh, symbolic=True)
        props.append(gv.propagate(gv.trace(ex.fn, *ex.args)))
    times = [[] for _ in meshes]
    for r in range(repeats + 1):
        for prop, ts in zip(props, times, strict=True):
            split.cached_plan.cache_clear()  # measure planning too, not a cache hit
            start = time.perf_counter()
            run(prop)
            if r:  # the first round warms up
                ts.append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


def one_plan(prop):
    """The greedy planner's run alone: one whole plan."""
    return Partitioner(prop, chip_cost("tpu-v3")).run()


def main() -> None:
    zoo_table()
    real_size_table()
    print("\npartition time, transformer block (goal: 64x64 / 2x4 <= 1.2)")
    for label, run in (("one plan", one_plan), ("gv.partition", gv.partition)):
        small, big = partition_times([{"x": 2, "y": 4}, {"x": 64, "y": 64}], run)
        print(
            f"{label:<13} 2x4 {small * 1e3:5.1f} ms, 64x64 {big * 1e3:5.1f} ms, "
            f"ratio {big / small:.2f}"
        )


if __name__ == "__main__":
    main()
