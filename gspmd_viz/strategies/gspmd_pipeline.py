"""GSPMD's own pipelining: an ordinary program the partitioner turns into a pipeline.

No schedule table, no ppermute written by hand: the S stages are one vectorised layer
(`jax.vmap` of the stage over weights [S, ...] split on the stage axis), and a state buffer
[S, B, D] (split the same way) holds each stage's microbatch. Every iteration

    1. shifts the state one stage on (`jnp.roll`, or concatenate + slice) while stage 0 reads
       the next microbatch: the partitioner makes the shift a collective-permute;
    2. runs every stage on its slot (local: weights and state are split alike);
    3. reads the last stage's slot (a masked sum over the stage dim: one all-reduce of [B, D]).

M + S − 1 iterations (S − 1 of them fill and drain the pipe). The circular variant (weights
[S, R, ...], layer r·S + s on stage s) runs every microbatch R times around the ring of stages:
R·M + S − 1 iterations, with the last stage's output fed back to stage 0 M − S + 1 iterations
later (a FIFO, so M ≥ S). Unrolled, or in one `lax.scan`.
# praxis: layers/pipeline.py LayerwiseShardablePipelined; GSPMD paper (2105.04663) section 3.3
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split

SHIFTS = ("roll", "concatenate")
LOOPS = ("unrolled", "scan")


def gspmd_sequential(stage_fn, weights, xs, repeats: int = 1):
    """The model the pipeline must equal: layer r·S + s is stage s's weights (repeat r).
    xs: [M, B, D] -> [M, B, D]."""
    stages = jax.tree.leaves(weights)[0].shape[0]
    h = xs
    for r in range(repeats):
        for s in range(stages):
            w = jax.tree.map(lambda a, s=s, r=r: a[s, r] if repeats > 1 else a[s], weights)
            h = jax.vmap(lambda x, w=w: stage_fn(w, x))(h)
    return h


def gspmd_iterations(stages: int, microbatches: int, repeats: int = 1) -> int:
    """R·M + S − 1: the pipe fills in S − 1 iterations, then one microbatch leaves per trip."""
    return repeats * microbatches + stages - 1


def _check(weights, xs, stages: int, repeats: int, shift: str, loop: str):
    if shift not in SHIFTS:
        raise ValueError(f"shift must be one of {SHIFTS}, got {shift!r}")
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    lead = (stages, repeats) if repeats > 1 else (stages,)
    for leaf in jax.tree.leaves(weights):
        if tuple(leaf.shape[: len(lead)]) != lead:
            raise ValueError(
                f"every weight needs leading dims {lead} (stages{', repeats' * (repeats > 1)}), "
                f"got a leaf of shape {tuple(leaf.shape)}"
            )
    if np.ndim(xs) < 1 or (repeats > 1 and xs.shape[0] < stages):
        raise ValueError(
            f"xs is [microbatches, ...]; a circular pipeline needs at least as many "
            f"microbatches as stages ({stages}), got shape {np.shape(xs)}"
        )


def _split_stage(x, mesh: Mesh, axis: str):
    """[S, ...] split on the stage axis, every other dim whole."""
    return mesh_split(x, mesh, (axis,) + (None,) * (x.ndim - 1))


def _on_stage(stage_ids, stage: int, ndim: int):
    """[S, 1, ...] mask of one stage's slot, broadcastable against the state [S, B, D]."""
    return (stage_ids == stage).reshape((-1,) + (1,) * (ndim - 1))


def _shift_in(state, inp, stage_ids, shift: str):
    """Stage s takes stage s−1's slot, stage 0 the new input.  [S, B, D] -> [S, B, D]"""
    if shift == "concatenate":
        return jnp.concatenate([inp[None], state[:-1]], axis=0)
    rolled = jnp.roll(state, 1, axis=0)  # the last stage's slot wraps round to stage 0
    return jnp.where(_on_stage(stage_ids, 0, state.ndim), inp[None], rolled)


def _weights_at(weights, t, stage_ids, microbatches: int, repeats: int):
    """Each stage's weights for iteration t: repeat (t − s) // M of stage s (circular)."""
    if repeats == 1:
        return weights
    r = jnp.clip((t - stage_ids) // microbatches, 0, repeats - 1)  # [S]
    return jax.tree.map(lambda w: jax.vmap(lambda ws, rs: ws[rs])(w, r), weights)


class _Iteration:
    """One trip of the loop: shift in, compute every stage, read the last stage."""

    def __init__(self, stage_fn, mesh, axis, shift, microbatches, repeats, stages):
        self.stage_fn, self.mesh, self.axis, self.shift = stage_fn, mesh, axis, shift
        self.m, self.r, self.s = microbatches, repeats, stages

    def __call__(self, weights, state, inp, t):
        """-> the new state [S, B, D] (split on the stage axis)"""
        stage_ids = jnp.arange(self.s)
        state = _split_stage(_shift_in(state, inp, stage_ids, self.shift), self.mesh, self.axis)
        w = _weights_at(weights, t, stage_ids, self.m, self.r)
        return _split_stage(jax.vmap(self.stage_fn)(w, state), self.mesh, self.axis)

    def last(self, state):
        """The last stage's slot, on every device.  [S, B, D] -> [B, D]"""
        is_last = _on_stage(jnp.arange(self.s), self.s - 1, state.ndim)
        return jnp.sum(jnp.where(is_last, state, 0), axis=0)


def gspmd_pipeline(stage_fn, mesh: Mesh, *, axis="stage", shift="roll", loop="unrolled",
                   repeats: int = 1):  # fmt: skip
    """f(weights, xs) -> ys, equal to `gspmd_sequential(stage_fn, weights, xs, repeats)`: the
    pipeline as one annotated program (see the module doc). `stage_fn(w, h) -> h` runs one
    stage on one microbatch [B, D]; weights' leaves are [S, ...] ([S, R, ...] circular)."""
    stages = mesh.axis_size(axis)

    def f(weights, xs):  # xs: [M, B, D]
        _check(weights, xs, stages, repeats, shift, loop)
        weights = jax.tree.map(lambda w: _split_stage(w, mesh, axis), weights)
        m = xs.shape[0]
        step = _Iteration(stage_fn, mesh, axis, shift, m, repeats, stages)
        state = _split_stage(jnp.zeros((stages,) + xs.shape[1:], xs.dtype), mesh, axis)
        run = _unrolled if loop == "unrolled" else _scanned
        lasts = run(step, weights, state, xs, gspmd_iterations(stages, m, repeats))
        return lasts[-m:]  # the final repeat's outputs

    return f


def _unrolled(step, weights, state, xs, trips: int):
    """Python loop: every iteration's input known statically; the last stage is read only
    once the pipe is full.  -> [trips − S + 1, B, D]"""
    m, lasts = xs.shape[0], []  # lasts[k]: the last stage's slot after iteration k + S − 1
    for t in range(trips):
        if t < m:
            inp = xs[t]
        elif step.r > 1:  # stage S−1's output of this microbatch's previous repeat
            inp = lasts[t - m]
        else:
            inp = jnp.zeros_like(xs[0])  # draining: stage 0 idles
        state = step(weights, state, inp, t)
        if t >= step.s - 1:
            lasts.append(step.last(state))
    return jnp.stack(lasts)


def _scanned(step, weights, state, xs, trips: int):
    """One lax.scan; a circular pipeline carries a FIFO of the last stage's outputs, M − S + 1
    deep, so stage 0 reads a microbatch's previous repeat.  -> [trips, B, D]"""
    m = xs.shape[0]
    padded = jnp.concatenate([xs, jnp.zeros((trips - m,) + xs.shape[1:], xs.dtype)])
    fifo = jnp.zeros((max(m - step.s + 1, 1),) + xs.shape[1:], xs.dtype)

    def body(carry, scanned):
        state, fifo = carry
        x_t, t = scanned
        inp = jnp.where(t < m, x_t, fifo[0]) if step.r > 1 else x_t
        state = step(weights, state, inp, t)
        last = step.last(state)
        if step.r > 1:
            fifo = jnp.concatenate([fifo[1:], last[None]])
        return (state, fifo), last

    _, lasts = jax.lax.scan(body, (state, fifo), (padded, jnp.arange(trips)))
    return lasts
