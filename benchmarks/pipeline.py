"""Pipeline benchmark: simulator speed at scale, and the executed pipeline against the sequential
model on the same CPU devices.

Run: PYTHONPATH=. .venv/bin/python benchmarks/pipeline.py
Prints (1) wall time to build each schedule and simulate it for S = 64 stages, M = 1024
microbatches (goal: under 1 s), (2) runtime of gv.pipeline.run (loss and gradients, one SPMD
program on S CPU devices) next to jax.jit(jax.value_and_grad) of the sequential model on one of
them. CPU devices share this machine's cores, so (2) measures the cost of the schedule's
machinery (switch, buffers, ppermutes), not a speed-up.
"""

from __future__ import annotations

import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

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


if __name__ == "__main__":
    simulator()
    executed()
