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


def executed(S=4, M=16, D=256, rows=64, V=2):
    rng = np.random.default_rng(0)
    L = S * V
    params = {"w": jnp.asarray(rng.normal(size=(L, D, D)) / np.sqrt(D), jnp.float32),
              "b": jnp.zeros((L, D), jnp.float32)}  # fmt: skip
    xs = jnp.asarray(rng.normal(size=(M, rows, D)), jnp.float32)
    ys = jnp.asarray(rng.normal(size=(M, rows, D)), jnp.float32)
    seq = jax.jit(jax.value_and_grad(pipe.sequential_loss, argnums=1), static_argnums=(0, 4))
    t_seq = wall(lambda: seq(stage_fn, params, xs, ys, loss_fn))
    want, want_g = seq(stage_fn, params, xs, ys, loss_fn)
    mesh = gv.Mesh({"stage": S})
    print(f"\n2) executed on {S} CPU devices: {L} layers of [{rows}, {D}] @ [{D}, {D}], M={M}")
    print(f"   sequential model, jax.jit(value_and_grad), one device: {t_seq * 1e3:8.1f} ms")
    for name in pipe.SCHEDULES:
        v = V if name in ("interleaved-1f1b", "circular") else 1
        sched = pipe.schedule(name, stages=S, microbatches=M, virtual=v)
        p = params if v == V else jax.tree.map(lambda a: a[:S], params)
        loss, grads = pipe.run(sched, stage_fn, p, xs, ys, loss_fn, mesh=mesh)  # compile
        t = wall(lambda sched=sched, p=p: pipe.run(sched, stage_fn, p, xs, ys, loss_fn,
                                                   mesh=mesh))  # fmt: skip
        ref = seq(stage_fn, p, xs, ys, loss_fn) if v != V else (want, want_g)
        err = float(jnp.abs(grads["w"] - ref[1]["w"]).max())
        print(f"   {name:<18} V={v}  {sched.n_ticks:>4} ticks  {t * 1e3:8.1f} ms"
              f"  ({t / t_seq:5.2f}x sequential; max |grad diff| {err:.1e})")  # fmt: skip


if __name__ == "__main__":
    simulator()
    executed()
