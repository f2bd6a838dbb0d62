"""Execute any pipeline schedule for real: one SPMD program under jax.shard_map.

Device s of mesh axis `axis` is stage s. The schedule's lockstep table says what every stage does
at every tick; the program scans over ticks and, on each device, ``lax.switch``es to that action
(idle, F, B or W) for the microbatch and chunk the table names. After each tick one ``ppermute``
carries activations to the next stage and one carries gradients to the previous one; the
receiver files them under (chunk, microbatch) as the table says. Layer l = c·S + s is chunk c on
stage s, so the send from stage S-1 wraps to stage 0's next chunk (the circular pipeline).

B recomputes its layer's forward from the stashed input (jax.vjp): activation
re-materialisation as in GPipe, at layer granularity. The schedule arrives as data (anything
with the attributes of ``gv.pipeline.schedule``'s result); core imports nothing from sim.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from gspmd_viz.core.sharding.mesh import Mesh

_IDLE, _F, _B, _W = range(4)  # lax.switch branch per action


def tick_tables(sched) -> np.ndarray:
    """[T, S, 9] int32 per tick and stage: branch, microbatch, chunk of the action; then
    (valid, microbatch, chunk) of the activation and of the gradient received after the tick."""
    S, T = sched.stages, sched.n_ticks
    out = np.zeros((T, S, 9), np.int32)
    branch = {"F": _F, "B": _B, "W": _W}
    for i, (s, t) in enumerate(zip(sched.stage, sched.tick, strict=True)):
        kind = sched.kind_names[sched.kind[i]]
        out[t, s, :3] = branch[kind], sched.microbatch[i], sched.chunk[i]
    for t, _, dst, what, m, fed_layer in sched.sends:
        col = 3 if what == "activation" else 6
        out[t, dst, col : col + 3] = 1, m, fed_layer // S
    return out


def _jax_mesh(mesh):
    if isinstance(mesh, Mesh):
        return mesh.to_jax()
    if isinstance(mesh, jax.sharding.Mesh):
        return mesh
    raise TypeError(f"mesh must be a gv.Mesh or a jax.sharding.Mesh, got {type(mesh).__name__}")


def _check_inputs(sched, jmesh, axis, params, xs, ys):
    if not all(hasattr(sched, a) for a in ("kind_names", "tick", "sends", "virtual")):
        raise TypeError(
            f"sched must be a pipeline schedule, e.g. gv.pipeline.schedule('1f1b', stages=4, "
            f"microbatches=8); got {type(sched).__name__}"
        )
    S, V, M = sched.stages, sched.virtual, sched.microbatches
    sizes = dict(zip(jmesh.axis_names, jmesh.axis_sizes, strict=True))
    if axis not in sizes:
        raise ValueError(f"mesh has no axis {axis!r} (axes: {list(sizes)}); pass axis=<name>")
    if sizes[axis] != S:
        raise ValueError(
            f"mesh axis {axis!r} has {sizes[axis]} devices but the schedule has {S} stages: "
            f"one device per stage; build the schedule with stages={sizes[axis]} or resize the mesh"
        )
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        if jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != S * V:
            raise ValueError(
                f"params{jax.tree_util.keystr(path)} has shape {jnp.shape(leaf)}: every leaf "
                f"needs a leading layer dim of S*V = {S}*{V} = {S * V} (layer l on stage l % S)"
            )
    for name, arr in (("xs", xs), ("ys", ys)):
        if jnp.ndim(arr) < 1 or jnp.shape(arr)[0] != M:
            raise ValueError(f"{name} has shape {jnp.shape(arr)}: need a leading dim of M = {M}")


def _check_layer(stage_fn, params, xs):
    layer0 = jax.tree.map(lambda a: a[0], params)
    h = jax.ShapeDtypeStruct(xs.shape[1:], xs.dtype)
    out = jax.eval_shape(stage_fn, layer0, h)
    if not isinstance(out, jax.ShapeDtypeStruct) or (out.shape, out.dtype) != (h.shape, h.dtype):
        raise ValueError(
            f"stage_fn must map one microbatch to the same shape and dtype (every layer feeds "
            f"the next): in {h.dtype}{list(h.shape)}, out {out}"
        )


class _Device:
    """What one device (stage `me`) does inside the shard_map: the four actions and a tick.

    State: (inputs [V, M, h]: each chunk's stashed input per microbatch, grads_in [V, M, h]: the
    gradient each chunk's output received, acc: the weight gradients [V, ...], total loss).
    """

    def __init__(self, stage_fn, loss_fn, sched, axis, params, xs, ys):
        self.stage_fn, self.loss_fn, self.sched, self.axis = stage_fn, loss_fn, sched, axis
        self.params, self.xs, self.ys = params, xs, ys
        self.me = jax.lax.axis_index(axis)
        S = sched.stages
        self.perms = ([(s, (s + 1) % S) for s in range(S)], [(s, (s - 1) % S) for s in range(S)])

    def initial_state(self):
        zeros_h = jnp.zeros((self.sched.virtual, self.sched.microbatches, *self.xs.shape[1:]),
                            self.xs.dtype)  # fmt: skip
        acc = jax.tree.map(jnp.zeros_like, self.params)
        return zeros_h, zeros_h, acc, jnp.zeros((), self.xs.dtype)

    def layer_io(self, state, m, c):
        """(this layer's params, its input, the gradient of its output) for microbatch m."""
        first = (self.me == 0) & (c == 0)
        x = jnp.where(first, self.xs[m], state[0][c, m])  # [h]
        return jax.tree.map(lambda a: a[c], self.params), x, state[1][c, m]

    def idle(self, state, m, c):
        return state, jnp.zeros_like(self.xs[0]), jnp.zeros_like(self.xs[0])

    def forward(self, state, m, c):
        p, x, _ = self.layer_io(state, m, c)
        return state, self.stage_fn(p, x), jnp.zeros_like(x)

    def backward(self, state, m, c, input_grad=True, weight_grad=None):
        """B (input gradient; also the weight gradient unless the schedule has W actions)."""
        weight_grad = not self.sched.has_weight_actions if weight_grad is None else weight_grad
        p, x, g = self.layer_io(state, m, c)
        y, vjp = jax.vjp(self.stage_fn, p, x)  # re-materialise this layer's forward
        M = self.sched.microbatches
        is_last = (self.me + c * self.sched.stages) == self.sched.layers - 1
        loss, dloss = jax.value_and_grad(self.loss_fn)(y, self.ys[m])
        dp, dx = vjp(jnp.where(is_last, dloss / M, g))  # the loss is a mean over microbatches
        inputs, grads_in, acc, total = state
        if weight_grad:
            acc = jax.tree.map(lambda a, d: a.at[c].add(d), acc, dp)
        if input_grad:
            total = total + jnp.where(is_last, loss / M, 0.0)
        dx = dx if input_grad else jnp.zeros_like(x)
        return (inputs, grads_in, acc, total), jnp.zeros_like(x), dx

    def weight(self, state, m, c):
        return self.backward(state, m, c, input_grad=False, weight_grad=True)

    def tick(self, state, row):
        """Run this tick's action, then pass activations on and gradients back."""
        branch, m, c = row[self.me, 0], row[self.me, 1], row[self.me, 2]
        actions = [self.idle, self.forward, self.backward, self.weight]
        state, out_f, out_b = jax.lax.switch(branch, actions, state, m, c)
        got_f = jax.lax.ppermute(out_f, self.axis, self.perms[0])  # [h] from stage s-1
        got_b = jax.lax.ppermute(out_b, self.axis, self.perms[1])  # [h] from stage s+1
        inputs, grads_in, acc, total = state
        inputs = _file(inputs, got_f, row[self.me, 3:6])
        grads_in = _file(grads_in, got_b, row[self.me, 6:9])
        return (inputs, grads_in, acc, total), None


def _stage_program(stage_fn, loss_fn, sched, axis):
    """The per-device function for jax.shard_map: scan over ticks, switch per action."""

    def body(params, xs, ys, tables):
        params = jax.tree.map(lambda a: a[0], params)  # [1, V, ...] -> [V, ...]
        device = _Device(stage_fn, loss_fn, sched, axis, params, xs, ys)
        (_, _, acc, total), _ = jax.lax.scan(device.tick, device.initial_state(), tables)
        return jax.lax.psum(total, axis), jax.tree.map(lambda a: a[None], acc)

    return body


def _file(buffer, value, where):
    """buffer[chunk, microbatch] = value when the table says something arrived."""
    valid, m, c = where[0], where[1], where[2]
    return buffer.at[c, m].set(jnp.where(valid == 1, value, buffer[c, m]))


@functools.lru_cache(maxsize=32)
def _compiled(sched, stage_fn, loss_fn, axis, jmesh):
    """One jitted SPMD program per (schedule, functions, mesh): repeated runs skip tracing."""
    program = jax.shard_map(
        _stage_program(stage_fn, loss_fn, sched, axis),
        mesh=jmesh,
        in_specs=(P(axis), P(), P(), P()),
        out_specs=(P(), P(axis)),
        check_vma=False,
    )
    return jax.jit(program), jnp.asarray(tick_tables(sched))


def run(sched, stage_fn, params, xs, ys, loss_fn, *, mesh, axis: str = "stage"):
    """(mean loss over microbatches, grads shaped like params), executing `sched` on `mesh`."""
    jmesh = _jax_mesh(mesh)
    _check_inputs(sched, jmesh, axis, params, xs, ys)
    xs, ys = jnp.asarray(xs), jnp.asarray(ys)
    _check_layer(stage_fn, params, xs)
    S, V = sched.stages, sched.virtual
    # [S*V, ...] in layer order -> [V, S, ...] -> [S, V, ...]: device s holds layers c*S + s
    by_stage = jax.tree.map(lambda a: jnp.swapaxes(a.reshape(V, S, *a.shape[1:]), 0, 1), params)
    program, tables = _compiled(sched, stage_fn, loss_fn, axis, jmesh)
    loss, grads = program(by_stage, xs, ys, tables)
    grads = jax.tree.map(lambda g: jnp.swapaxes(g, 0, 1).reshape(S * V, *g.shape[2:]), grads)
    return loss, grads


def sequential_loss(stage_fn, params, xs, ys, loss_fn):
    """The model the pipeline splits: all layers in order, mean loss over microbatches."""

    def one(x, y):
        h, _ = jax.lax.scan(lambda h, p: (stage_fn(p, h), None), x, params)
        return loss_fn(h, y)

    return jnp.mean(jax.vmap(one)(xs, ys))
