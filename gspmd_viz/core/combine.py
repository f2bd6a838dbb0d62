"""Running several all-gathers as one (# XLA: AllGatherCombiner).

On simulated CPU devices every collective is a rendezvous of all device threads, so small
programs are dominated by how many collectives they run, not by their bytes. Independent
all-gathers over the same axes (same local size of the gathered dim, same dtype) are packed
into one buffer, gathered once, and split again: the same bytes, one rendezvous. A later gather
may be hoisted to an earlier one when its source already exists; an annotation's output counts
as its input (annotations compute nothing).
"""

import jax
import jax.numpy as jnp

from gspmd_viz.core.kernels import fit_dim
from gspmd_viz.core.registry import entry_for
from gspmd_viz.core.spmd import Compute, Const, Reshard
from gspmd_viz.core.spmd_regions import RunCond, RunLoop


def _gather_key(ins):
    """(axes, local size of the gathered dim, dtype) for a one-step all-gather reshard."""
    if not isinstance(ins, Reshard):
        return None
    steps = ins.plan.steps
    if len(steps) != 1 or steps[0].kind != "all-gather":
        return None
    step = steps[0]
    return step.axes, step.collective.shape[step.dims[0]], step.collective.dtype


def defines(ins) -> tuple[str, ...]:
    """The buffers an instruction writes."""
    if isinstance(ins, Compute | RunLoop | RunCond):
        return ins.outs
    return (ins.name,) if isinstance(ins, Const) else (ins.dst,)


def _aliases(instructions) -> dict[str, str]:
    """Buffers that are another buffer under a new name (annotations compute nothing)."""
    alias: dict[str, str] = {}
    for ins in instructions:
        if isinstance(ins, Compute) and entry_for(ins.eqn).identity:
            for out, src in zip(ins.outs, ins.ins, strict=False):
                if isinstance(src, str):
                    alias[out] = alias.get(src, src)
    return alias


def combinable(instructions, inputs, apart=lambda ins: None):
    """Groups to run in order. A one-step all-gather takes along every later all-gather with
    the same key whose source already exists (hoisting a gather is safe: it reads one buffer;
    an annotation's output counts as its input), and the same `apart(ins)`: gathers a
    checkpoint recomputes stay in it (hoisted, they would live from forward to backward)."""
    instructions, alias = list(instructions), _aliases(instructions)
    defined, done, groups = set(inputs), set(), []
    for i, ins in enumerate(instructions):
        if i in done:
            continue
        group, key = [ins], _gather_key(ins)
        if key is not None:
            key = (key, apart(ins))
            for j in range(i + 1, len(instructions)):
                other = instructions[j]
                if j in done or (_gather_key(other), apart(other)) != key:
                    continue
                if alias.get(other.src, other.src) in defined:
                    group.append(other)
                    done.add(j)
        groups.append(group)
        defined.update(name for g in group for name in defines(g))
    return groups, alias


def combined_gather(group, env, alias):
    """One all-gather for several buffers (# XLA: AllGatherCombiner): move each gathered dim
    to the front, flatten the rest, concatenate, gather, split back. Same bytes, one hop."""
    step0 = group[0].plan.steps[0]
    flat, shapes = [], []
    for ins in group:
        x = jnp.moveaxis(env[alias.get(ins.src, ins.src)], ins.plan.steps[0].dims[0], 0)
        shapes.append(x.shape[1:])
        flat.append(x.reshape(x.shape[0], -1))
    gathered = jax.lax.all_gather(jnp.concatenate(flat, axis=1), step0.axes, axis=0, tiled=True)
    start = 0
    for ins, rest, piece in zip(group, shapes, flat, strict=True):
        width = piece.shape[1]
        part = gathered[:, start : start + width].reshape(gathered.shape[0], *rest)
        start += width
        step = ins.plan.steps[0]
        part = jnp.moveaxis(part, 0, step.dims[0])
        env[ins.dst] = fit_dim(
            part, step.dims[0], step.after.shard_shape(ins.plan.shape)[step.dims[0]]
        )
