"""A spatially partitioned program: convolutions, pooling and elementwise ops on a split image.

`spatial_program(fn, x, *weights, mesh=, axes=)` traces `fn`, splits `x`'s dims in `axes` over
mesh axes (weights replicated, as spatial partitioning does), and runs one program per device
under `jax.shard_map`: every windowed equation exchanges its halos first (`window_ready`), every
elementwise equation runs on the local tile as it is. A layer's output tiles (ceil(W/S) windows
per shard, garbage past the end) are exactly the next layer's input tiles, so activations stay
split from the first layer to the last; the exchange masks the garbage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
from jax.extend.core import Literal
from jax.sharding import PartitionSpec

from gspmd_viz.core.halo.exchange import HaloPermute, halo_permutes, window_ready
from gspmd_viz.core.halo.windowed_ops import (
    WINDOWED,
    pad_value,
    splits_for,
    window_of,
    windowed_params,
)
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import ceil_div

ELEMENTWISE = frozenset((
    "add", "sub", "mul", "div", "max", "min", "neg", "abs", "exp", "log", "tanh", "logistic",
    "sqrt", "rsqrt", "integer_pow", "square", "convert_element_type",
))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Step:
    eqn: object
    splits: tuple  # SpatialSplits of operand 0 (windowed), () for elementwise
    params: dict
    fill: float = 0.0


@dataclasses.dataclass(frozen=True)
class SpatialProgram:
    """`program(*inputs)` runs the partitioned function; `permutes` are its halo exchanges."""

    program: Callable
    inputs: tuple
    permutes: tuple[HaloPermute, ...]

    def __call__(self):
        return self.program(*self.inputs)

    def collectives(self, mesh: Mesh):
        """The permutes as ledger entries (`gv.Collective`, source = the equation)."""
        return [p.collective(mesh.axis_size(p.split.axis)) for p in self.permutes]


def _split_inputs(eqn, layout) -> list:
    return [v for v in eqn.invars if not isinstance(v, Literal) and v in layout]


def _plan_steps(jaxpr, axes, mesh: Mesh):
    """(steps, permutes, layout of the output): which halos each windowed equation needs."""
    layout = {jaxpr.invars[0]: dict(axes)}  # var -> {dim: mesh axis}
    steps, permutes = [], []
    for i, eqn in enumerate(jaxpr.eqns):
        name, split = eqn.primitive.name, _split_inputs(eqn, layout)
        if not split:
            raise ValueError(f"eqn {i} {name} does not read the split activation")
        if name in WINDOWED and split == [eqn.invars[0]]:
            dims = layout[eqn.invars[0]]
            splits = tuple(splits_for(eqn, dims, mesh))
            steps.append(_Step(eqn, splits, windowed_params(eqn, splits), pad_value(eqn)))
            local = [s.plan.shard_size for s in splits]
            shape = [n for n in eqn.invars[0].aval.shape]
            for s, n in zip(splits, local, strict=True):
                shape[s.dim] = n
            src = f"eqn {i} {name}"
            permutes += halo_permutes(splits, shape, eqn.invars[0].aval.dtype, src)
            windows = window_of(eqn)
            layout[eqn.outvars[0]] = {windows[d].out_dim: a for d, a in dims.items()}
        elif name in ELEMENTWISE and all(layout[v] == layout[split[0]] for v in split):
            _check_elementwise(eqn, split, i)
            steps.append(_Step(eqn, (), eqn.params))
            layout[eqn.outvars[0]] = layout[split[0]]
        else:
            raise ValueError(
                f"eqn {i} {name}: a spatial program runs convolutions, pooling and elementwise "
                f"ops ({', '.join(sorted(ELEMENTWISE))}) on the split activation"
            )
    return steps, tuple(permutes), layout[jaxpr.outvars[0]]


def _check_elementwise(eqn, split, i):
    shape = eqn.outvars[0].aval.shape
    for v in eqn.invars:
        if v not in split and getattr(v.aval, "shape", ()) not in ((), shape):
            raise ValueError(f"eqn {i} {eqn.primitive.name}: only scalars may meet the split image")


def _run_steps(jaxpr, consts, steps, x, rest):
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    env |= dict(zip(jaxpr.invars, (x, *rest), strict=True))
    for step in steps:
        ins = [v.val if isinstance(v, Literal) else env[v] for v in step.eqn.invars]
        if step.splits:
            # [.., shard, ..] -> halo exchange -> [.., span, ..] -> op -> [.., c, ..]
            ins[0] = window_ready(ins[0], step.splits, step.fill)
        env[step.eqn.outvars[0]] = step.eqn.primitive.bind(*ins, **step.params)
    return env[jaxpr.outvars[0]]


def _pad_to_shards(x, axes, mesh: Mesh, filler):
    # [N] -> pad right with `filler` -> [shard * S]: every device holds a full shard
    pads = [(0, 0)] * x.ndim
    for dim, axis in axes.items():
        s = mesh.axis_size(axis)
        pads[dim] = (0, ceil_div(x.shape[dim], s) * s - x.shape[dim])
    return jnp.pad(x, pads, constant_values=filler)


def _spec(ndim: int, dims_axes: Mapping[int, str]) -> PartitionSpec:
    return PartitionSpec(*(dims_axes.get(d) for d in range(ndim)))


def spatial_program(fn, x, *weights, mesh: Mesh, axes: Mapping[int, str], filler=0.0):
    """Partition `fn(x, *weights)` with `x`'s `axes` dims split over mesh axes (see module
    doc). The uneven shards' padding holds `filler` on the way in (the exchange masks it)."""
    closed = jax.make_jaxpr(fn)(x, *weights)
    jaxpr = closed.jaxpr
    if len(jaxpr.outvars) != 1:
        raise ValueError("spatial_program partitions a function with one output")
    steps, permutes, out_layout = _plan_steps(jaxpr, axes, mesh)

    def per_device(local, *rest):
        return _run_steps(jaxpr, closed.consts, steps, local, rest)

    padded = _pad_to_shards(x, axes, mesh, filler)
    in_specs = (_spec(x.ndim, axes), *(PartitionSpec() for _ in weights))
    out_aval = jaxpr.outvars[0].aval
    run = jax.shard_map(per_device, mesh=mesh.to_jax(), in_specs=in_specs,
                        out_specs=_spec(out_aval.ndim, out_layout), check_vma=False)  # fmt: skip
    crop = tuple(slice(0, n) for n in out_aval.shape)
    return SpatialProgram(jax.jit(lambda *a: run(*a)[crop]), (padded, *weights), permutes)
