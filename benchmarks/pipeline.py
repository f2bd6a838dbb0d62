"""Pipeline benchmark: simulator speed at scale, and the executed pipeline against the sequential
model on the same CPU devices.

Run: PYTHONPATH=. .venv/bin/python benchmarks/pipeline.py
Prints (1) wall time to build each schedule and simulate it for S = 64 stages, M = 1024
microbatches (goal: under 1 s), (2) runtime of gv.pipeline.run (loss and gradients, one SPMD
program on S CPU devices) next to jax.jit(jax.value_and_grad) of the sequential model on one of
them. CPU devices share this machine's cores, so (2) measures the cost of the schedule's
machinery (switch, buffers, ppermutes), not a speed-up; (3) GSPMD's own pipelining (a vmapped
stage and a shifted state buffer, partitioned by gv.partition) against XLA's partitioner on the
same program: wire bytes per device, ours / XLA's (goal <= 1.0), and both runtimes.
"""

from __future__ import annotations

import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from timing import paired_times  # noqa: E402  (benchmarks/ is the script's directory)

pipe = gv.pipeline


def wall(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def simulator(S=64, M=1024):
    print(f"1) build + simulate, S={S}, M={M} (goal < 1 s)")
    print(f"   {'schedule':<18}{'V':>3}{'actions':>9}{'schedule':>11}{'simulate':>11}{'total':>9}"
          f"{'bubble':>9}{'closed form':>13}")  # fmt: skip
    for name, V in [("gpipe", 1), ("1f1b", 1), ("zb-h1", 1), ("interleaved-1f1b", 2),
                    ("circular", 2)]:  # fmt: skip
        t0 = time.perf_counter()
        sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
        t1 = time.perf_counter()
        tl = pipe.simulate(sched, forward=1.0, backward=1.0, weight=1.0)
        t2 = time.perf_counter()
        closed = pipe.bubble_fraction(name, S, M, V, forward=1.0, backward=1.0, weight=1.0)
        print(f"   {name:<18}{V:>3}{len(sched.kind):>9}{(t1 - t0) * 1e3:>9.0f}ms"
              f"{(t2 - t1) * 1e3:>9.0f}ms{t2 - t0:>8.2f}s{tl.bubble_fraction:>9.2%}"
              f"{closed:>13.2%}")  # fmt: skip


def stage_fn(p, h):
    return jnp.tanh(h @ p["w"] + p["b"])  # [b, D] @ [D, D] -> [b, D]


def loss_fn(h, y):
    return jnp.mean((h - y) ** 2)


def executed(S=4, M=16, D=256, rows=64):
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(M, rows, D)), jnp.float32)
    ys = jnp.asarray(rng.normal(size=(M, rows, D)), jnp.float32)
    seq = jax.jit(jax.value_and_grad(pipe.sequential_loss, argnums=1), static_argnums=(0, 4))
    mesh = gv.Mesh({"stage": S})
    print(
        f"\n2) executed on {S} CPU devices, M={M} microbatches of [{rows}, {D}], layers "
        f"[{D}, {D}]; sequential = jax.jit(value_and_grad) of the same layers on one device"
    )
    for name in pipe.SCHEDULES:
        V = 2 if name in ("interleaved-1f1b", "circular") else 1
        params = {"w": jnp.asarray(rng.normal(size=(S * V, D, D)) / np.sqrt(D), jnp.float32),
                  "b": jnp.zeros((S * V, D), jnp.float32)}  # fmt: skip
        sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
        loss, grads = pipe.run(sched, stage_fn, params, xs, ys, loss_fn, mesh=mesh)  # compile
        want, want_grads = seq(stage_fn, params, xs, ys, loss_fn)
        t_pipe = wall(lambda s=sched, p=params: pipe.run(s, stage_fn, p, xs, ys, loss_fn,
                                                         mesh=mesh), repeats=5)  # fmt: skip
        t_seq = wall(lambda p=params: seq(stage_fn, p, xs, ys, loss_fn), repeats=5)
        err = float(jnp.abs(grads["w"] - want_grads["w"]).max())
        print(f"   {name:<17} {S * V} layers, {sched.n_ticks:3d} ticks: pipeline "
              f"{t_pipe * 1e3:7.1f} ms, sequential {t_seq * 1e3:7.1f} ms, ratio "
              f"{t_pipe / t_seq:5.2f}; max |grad diff| {err:.1e}")  # fmt: skip


GSPMD_VARIANTS = [
    ("roll", "unrolled", 1),
    ("concatenate", "unrolled", 1),
    ("roll", "scan", 1),
    ("concatenate", "scan", 1),
    ("roll", "scan", 2),
    ("roll", "unrolled", 2),
]


def gspmd_row(shift, loop, R, mesh, xs, rng):
    """(ours bytes, XLA bytes, ours s, jax.jit s, exact) for one GSPMD-style pipeline."""
    S, D = mesh.axis_size("stage"), xs.shape[-1]
    lead = (S, R) if R > 1 else (S,)
    w = {"w": jnp.asarray(rng.normal(size=lead + (D, D)) / np.sqrt(D), jnp.float32),
         "b": jnp.zeros(lead + (D,), jnp.float32)}  # fmt: skip
    f = pipe.gspmd_pipeline(stage_fn, mesh, shift=shift, loop=loop, repeats=R)
    prop = gv.propagate(gv.trace(f, w, xs))
    spmd = gv.partition(prop)
    theirs = gv.xla.collectives(f, w, xs, mesh=mesh, in_shardings=prop.inputs,
                                out_shardings=prop.outputs)  # fmt: skip
    leaves, tree = jax.tree.flatten((w, xs))
    named = [s.to_named_sharding() for s in prop.inputs]
    placed = [jax.device_put(a, s) for a, s in zip(leaves, named, strict=True)]
    args = jax.tree.unflatten(tree, placed)
    jitted = jax.jit(f, in_shardings=jax.tree.unflatten(tree, named))
    exact = np.allclose(
        spmd(*args), pipe.gspmd_sequential(stage_fn, w, xs, R), rtol=1e-5, atol=1e-5
    )
    t_ours, t_xla = paired_times(lambda: spmd(*args), lambda: jitted(*args), repeats=15)
    return spmd.wire_bytes, sum(c.wire_bytes for c in theirs), t_ours, t_xla, bool(exact)


def gspmd_style(S=4, M=8, D=64, rows=16):
    rng = np.random.default_rng(1)
    mesh = gv.Mesh({"stage": S})
    xs = jnp.asarray(rng.normal(size=(M, rows, D)), jnp.float32)
    print(f"\n3) GSPMD-style pipelines, S={S}, M={M} microbatches of [{rows}, {D}]: ours / XLA")
    print(f"   {'variant':<30}{'ours B':>9}{'XLA B':>9}{'ratio':>7}{'ours ms':>9}{'jit ms':>8}"
          f"{'ratio':>7}  exact")  # fmt: skip
    for shift, loop, R in GSPMD_VARIANTS:
        ours_b, xla_b, t_ours, t_xla, exact = gspmd_row(shift, loop, R, mesh, xs, rng)
        name = f"{shift}, {loop}" + (f", circular R={R}" if R > 1 else "")
        times = f"{t_ours * 1e3:>9.2f}{t_xla * 1e3:>8.2f}{t_ours / t_xla:>7.2f}"
        print(f"   {name:<30}{ours_b:>9.0f}{xla_b:>9.0f}{ours_b / xla_b:>7.2f}{times}  {exact}")


if __name__ == "__main__":
    simulator()
    executed()
    gspmd_style()
