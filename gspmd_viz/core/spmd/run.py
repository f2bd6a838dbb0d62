"""Running per-device code for real: jax.shard_map on the mesh's CPU devices.

Each instruction type runs through one function in RUN (keyed by instruction type, as
kernels.STEP_KERNELS is keyed by reshard step kind); `SPMDProgram` is the per-device program
`gv.partition` returns, runnable: `spmd(*args)`.

Uneven shards: every local buffer has the padded `shard_shape`; the global array handed to
shard_map is padded on the right to `shard_shape * tiles`, and the result is sliced back.
Pending sums (`unreduced` axes) travel as an extra leading dim split over those axes.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from gspmd_viz.core.halo.exchange import return_halo, window_ready
from gspmd_viz.core.program.trace import Literal
from gspmd_viz.core.sharding.devices import require_devices
from gspmd_viz.core.sharding.sharding import Sharding, spec_entry
from gspmd_viz.core.spmd.checkpoint_barriers import barriers, fence
from gspmd_viz.core.spmd.instructions import (
    Combine,
    Compute,
    Const,
    Halo,
    MoveBlocks,
    PerDeviceProgram,
    Reshard,
)
from gspmd_viz.core.spmd.local_kernels import all_reduce, run_local
from gspmd_viz.core.spmd.loops_branches import RunCond, RunLoop
from gspmd_viz.core.spmd.processes import (
    check_this_process_in,
    global_array,
    readable_everywhere,
    several_processes,
)
from gspmd_viz.core.spmd.reduce_combine import ArgCombine, run_arg_combine
from gspmd_viz.core.spmd.reshard_kernels import apply_plan

# --- one function per instruction type (inside shard_map) --------------------------------------


def _run_compute(ins: Compute, env) -> None:
    args = [a.value if isinstance(a, Literal) else env[a] for a in ins.ins]
    if ins.local_op is not None:  # operands already shifted into place (halo exchange)
        env[ins.outs[0]] = ins.local_op(*args, **ins.params)
        return
    outs = run_local(ins.eqn, ins.params, args, ins.masks, ins.offsets, ins.lookup)
    env.update(zip(ins.outs, outs, strict=True))


def _run_reshard(ins: Reshard, env) -> None:
    env[ins.dst] = apply_plan(ins.plan, env[ins.src])


def _run_combine(ins: Combine, env) -> None:
    env[ins.dst] = all_reduce(env[ins.src], ins.combine, ins.axes)


def _run_const(ins: Const, env) -> None:
    env[ins.name] = jnp.asarray(ins.literal.value, ins.literal.dtype)


def _run_halo(ins: Halo, env) -> None:
    if ins.returned:  # [.., span, ..] -> the exchange backwards, added home -> [.., shard, ..]
        env[ins.dst] = return_halo(env[ins.src], ins.splits)
        return
    # [.., shard, ..] -> collective-permutes, concat, dynamic_slice -> [.., window-ready, ..]
    fill = env[ins.fill] if isinstance(ins.fill, str) else ins.fill  # pad's value: a buffer
    fill = fill.value if isinstance(fill, Literal) else fill
    env[ins.dst] = window_ready(env[ins.src], ins.splits, fill)


def _run_move_blocks(ins: MoveBlocks, env) -> None:
    env[ins.dst] = ins.plan.run(env[ins.src])


def _run_loop(ins: RunLoop, env) -> None:
    """A per-device lax.scan (or lax.while_loop) whose step runs the partitioned body (its
    collectives included)."""

    def run(instructions, names, values) -> dict:
        inner = {**env, **dict(zip(names, values, strict=True))}
        for one in instructions:
            RUN[type(one)](one, inner)
        return inner

    init = [env[n] for n in ins.init]
    if ins.pred is not None:
        final = jax.lax.while_loop(
            lambda carry: run(ins.cond, ins.cond_carried, carry)[ins.pred],
            lambda carry: [run(ins.body, ins.carried, carry)[n] for n in ins.carry_out],
            init,
        )
        env.update(zip(ins.final, final, strict=True))
        return

    def step(carry, sliced):
        inner = run(ins.body, ins.carried + ins.sliced, [*carry, *sliced])
        return [inner[n] for n in ins.carry_out], [inner[n] for n in ins.y_out]

    xs = [env[n] for n in ins.xs]
    final, ys = jax.lax.scan(step, init, xs, length=ins.loop.trips, reverse=ins.loop.reverse)
    env.update(zip(ins.outs, [*final, *ys], strict=True))


def _run_cond(ins: RunCond, env) -> None:
    """A per-device lax.switch: every device reads the same (replicated) selector."""

    def branch(b: int):
        def run():
            inner = dict(env)
            for one in ins.branches[b]:
                RUN[type(one)](one, inner)
            return [inner[n] for n in ins.results[b]]

        return run

    outs = jax.lax.switch(env[ins.selector], [branch(b) for b in range(len(ins.branches))])
    env.update(zip(ins.outs, outs, strict=True))


RUN = {
    Compute: _run_compute,
    Reshard: _run_reshard,
    Combine: _run_combine,
    ArgCombine: run_arg_combine,
    Const: _run_const,
    Halo: _run_halo,
    MoveBlocks: _run_move_blocks,
    RunLoop: _run_loop,
    RunCond: _run_cond,
}


# --- one function per step kind (inside shard_map) -----------------------------------------


# --- global <-> per-device buffers -----------------------------------------------------------


def padded_shape(sharding: Sharding, shape) -> tuple[int, ...]:
    """The global shape whose even split gives every device its padded shard."""
    tiles = sharding.tiles(len(shape))
    return tuple(k * t for k, t in zip(sharding.shard_shape(shape), tiles, strict=True))


def pad_global(x, sharding: Sharding):
    x = jnp.asarray(x)  # a Python or numpy scalar too (a learning rate, a step counter)
    if x.ndim == 0:
        return x
    target = padded_shape(sharding, x.shape)
    return jnp.pad(x, [(0, t - n) for n, t in zip(x.shape, target, strict=True)])


def padded_input(shape, dtype, sharding: Sharding, jmesh) -> jax.ShapeDtypeStruct:
    """An input as the per-device program's shard_map takes it: padded to an even split."""
    placed = NamedSharding(jmesh, in_spec(sharding))
    return jax.ShapeDtypeStruct(padded_shape(sharding, shape), dtype, sharding=placed)


def unpad_global(x, shape):
    return x[tuple(slice(0, n) for n in shape)]


def pending_axes(sharding: Sharding) -> tuple[str, ...]:
    """Unreduced axes in mesh order: the leading dim that carries partial sums."""
    return tuple(a for a in sharding.mesh.axis_names if a in sharding.unreduced)


def in_spec(sharding: Sharding) -> PartitionSpec:
    """shard_map spec of a value; pending sums get a leading dim split over their axes."""
    entries = [spec_entry(axes) for axes in sharding.spec]
    pending = pending_axes(sharding)
    return PartitionSpec(pending, *entries) if pending else PartitionSpec(*entries)


def device_buffers(fn, mesh, in_shardings, out_sharding, *args):
    """Run `fn` per device; return {device id: its local output buffer} (for tests)."""
    jmesh = mesh.to_jax()
    everyone = PartitionSpec(mesh.axis_names)

    def body(*locals_):
        locals_ = [x[0] if s.unreduced else x for x, s in zip(locals_, in_shardings, strict=True)]
        return fn(*locals_)[None]

    run = jax.shard_map(
        body,
        mesh=jmesh,
        in_specs=tuple(in_spec(s) for s in in_shardings),
        out_specs=everyone,
        check_vma=False,
    )
    out = np.asarray(jax.jit(run)(*args))
    return {d: out[d] for d in range(mesh.size)}


# --- a whole per-device program ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Runner:
    """How an SPMDProgram runs, built once: `run` pads the global inputs, runs `mapped` (every
    device's program under shard_map, on inputs evenly split) and slices the outputs back."""

    run: Callable
    mapped: Callable
    outs: list  # (position among the program's outputs, buffer name) of each computed output


def _runner(spmd) -> Runner:
    """jit(shard_map(body)) over padded global arrays, built once per SPMDProgram."""
    prop, program = spmd.prop, spmd.program
    in_sh = [prop.sharding(v) for v in program.inputs]
    outs = [(i, name) for i, name in enumerate(spmd.outputs) if isinstance(name, str)]
    out_sh = [prop.sharding(program.outputs[i]) for i, _ in outs]
    # jax.checkpoint's recomputation kept apart: its operands fenced
    fences = barriers(spmd.instructions, program.calls)
    jmesh = spmd.mesh.to_jax()

    def body(*locals_):
        # XLA:CPU fused the padding's per-device slice into a one-index scatter (rewritten as
        # a dynamic-update-slice) at the wrong offset: keep the local inputs materialized
        locals_ = jax.lax.optimization_barrier(locals_)
        env = dict(zip((v.name for v in program.inputs), locals_, strict=True))
        for i, ins in enumerate(spmd.instructions):
            fence(env, fences.get(i, ()))
            RUN[type(ins)](ins, env)
        return tuple(env[name] for _, name in outs)

    mapped = jax.shard_map(
        body,
        mesh=jmesh,
        in_specs=tuple(in_spec(s) for s in in_sh),
        out_specs=tuple(in_spec(s) for s in out_sh),
        check_vma=False,
    )

    @functools.partial(jax.jit, **readable_everywhere(jmesh))  # several processes: replicated
    def run(*flat):
        padded = [pad_global(x, s) for x, s in zip(flat, in_sh, strict=True)]
        results = mapped(*padded)
        shapes = [program.outputs[i].shape for i, _ in outs]
        return [unpad_global(r, shape) for r, shape in zip(results, shapes, strict=True)]

    return Runner(run, mapped, outs)


def _checked_runner(spmd, args):
    """The runner (built on first use) and `args` flattened, each checked against its input."""
    if spmd._runner is None:
        require_devices(spmd.mesh.size, f"running on {spmd.mesh!r}")
        spmd._runner = _runner(spmd)
    flat = spmd.program.flatten_args(*args)
    for v, x in zip(spmd.program.inputs, flat, strict=True):
        if tuple(np.shape(x)) != v.shape:
            raise ValueError(
                f"argument {v.name} has shape {tuple(np.shape(x))}, but the program was traced "
                f"and partitioned for {v.type_text()}: partition again for new shapes"
            )
    return spmd._runner, flat


def _global_inputs(spmd, flat) -> list:
    """Several processes: each input a global array split like its shard_map input, or
    replicated where that split is uneven (the runner pads it inside jit)."""
    jmesh = spmd.mesh.to_jax()
    check_this_process_in(jmesh)
    out = []
    for v, x in zip(spmd.program.inputs, flat, strict=True):
        s = spmd.prop.sharding(v)
        even = padded_shape(s, v.shape) == v.shape and not s.unreduced
        out.append(global_array(x, in_spec(s) if even else PartitionSpec(), jmesh))
    return out


def run_spmd(spmd, *args):
    """Run the per-device program on the mesh's devices; returns global arrays like f(*args)
    (with several processes: on all processes' devices, each process reading every result)."""
    runner, flat = _checked_runner(spmd, args)
    flat = _global_inputs(spmd, flat) if several_processes() else flat
    results = iter(runner.run(*flat))
    values = [next(results) if isinstance(o, str) else jnp.asarray(o.value) for o in spmd.outputs]
    return jax.tree.unflatten(spmd.program.out_tree, values)


class SPMDProgram(PerDeviceProgram):
    """What every device runs: `spmd.per_device_text()`, `spmd.collectives`, `spmd(*args)`."""

    def __init__(self, prop, instructions, outputs, notes):
        super().__init__(prop, instructions, outputs, notes)
        self._runner = None

    def __call__(self, *args):
        return run_spmd(self, *args)

    def compiled(self, *args):
        """The compiled per-device program for `args`' shapes (for its `cost_analysis()` and
        `memory_analysis()`): `lowered(*args)`, compiled."""
        return self.lowered(*args).compile()

    def lowered(self, *args):
        """The per-device program for `args`' shapes, lowered for XLA (jax's Lowered): the
        shard_map over inputs already padded to an even split. The runner's global pad and
        slice around it are left out: XLA's partitioner keeps an uneven shard padded in place
        and runs nothing like them, while XLA:CPU compiles our pad of an unevenly split input
        into collective-permutes and selects."""
        runner, _ = _checked_runner(self, args)
        jmesh = self.mesh.to_jax()
        padded = [
            padded_input(v.shape, v.dtype, self.prop.sharding(v), jmesh)
            for v in self.program.inputs
        ]
        return jax.jit(runner.mapped).lower(*padded)
