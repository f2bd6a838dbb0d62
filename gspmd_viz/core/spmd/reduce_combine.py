"""Reductions over a split dim that combine right away, not as pending sums.

max / min: the partial results are all-reduced (`Combine`, spmd/instructions.py).
argmax / argmin: each device reduces its own block to (value, global index) pairs; the pairs
are all-gathered over the split axes and every device picks the winner with the same
arg-reduction (`ArgCombine`). The gathered pairs are in shard order, so the first of equal
values (and the first NaN) is the lowest global index, as in jnp.argmax; padding of an uneven
split carries the identity (never a winner over a real element: its index is larger).
# XLA: the partitioned variadic reduce of (value, iota): all-gather of both, local reduce
"""

import dataclasses
import math

import jax
import jax.numpy as jnp

from gspmd_viz.core.program.trace import Equation
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.sharding import Sharding, short_dtype
from gspmd_viz.core.spmd.instructions import Combine
from gspmd_viz.core.spmd.local_ops import identity_element
from gspmd_viz.units import format_bytes

RIGHT_AWAY = ("max", "min", "argmax", "argmin")  # combines that cannot stay pending


def combine_collectives(eqn: Equation, how: str, axes, sizes, result: Sharding):
    """What combining equation `eqn`'s partial results over mesh `axes` moves: max/min one
    all-reduce per result; argmax/argmin an all-gather of the values and one of the indices,
    each [.., 1, ..] -> [.., n, ..] along the reduced dim."""
    n, source = math.prod(sizes[a] for a in axes), f"eqn {eqn.index} {eqn.primitive}"
    if how in ("max", "min"):
        return tuple(
            Collective("all-reduce", axes, result.shard_shape(v.shape), v.dtype, n, source)
            for v in eqn.outputs
        )
    (dim,), (v,) = eqn.params["axes"], eqn.outputs
    pair = list(result.shard_shape(v.shape))
    pair.insert(dim, 1)
    return tuple(
        Collective("all-gather", axes, pair, dtype, n, source, dims=(dim,))
        for dtype in (eqn.inputs[0].dtype, v.dtype)
    )


@dataclasses.dataclass(frozen=True)
class ArgCombine(Combine):
    """Pick argmax (argmin) over split `axes` from local winners: `src` holds this device's
    local indices into its block of `operand` (the arg-reduction's input buffer), reduced
    along `dim` (global size `size`, split over `dim_axes`). `collective` gathers the values,
    `index_collective` the global indices."""

    index_collective: Collective
    operand: str
    dim: int
    size: int
    dim_axes: tuple[str, ...]

    @property
    def collectives(self):
        return [self.collective, self.index_collective]

    def text(self) -> str:
        v, axes = self.value, ",".join(self.axes)
        local = ",".join(map(str, self.sharding.shard_shape(v.shape)))
        head = f"{self.dst}:{short_dtype(v.dtype)}[{local}] = "
        head += f"all-gather({axes}) ({self.operand}[{self.src}], {self.src}) -> {self.combine}"
        whole = v.type_text(self.sharding)
        sent = format_bytes(sum(c.wire_bytes for c in self.collectives))
        return f"{head:<47} # {whole}{{{self.combine} over {axes}}} -> {whole}   {sent}"


def run_arg_combine(ins: ArgCombine, env) -> None:
    """Inside shard_map: local winners -> (value, global index) -> all-gather -> pick."""
    x, d = env[ins.operand], ins.dim
    local = jnp.expand_dims(env[ins.src], d)  # [.., 1, ..]
    index = local + (jax.lax.axis_index(ins.dim_axes) * x.shape[d]).astype(local.dtype)
    value = jnp.take_along_axis(x, local, axis=d)
    value = jnp.where(
        index < ins.size, value, identity_element(ins.combine, x.dtype)
    )  # a block of padding only
    # [.., 1, ..] -> all_gather(axes) -> [.., n, ..], in shard order
    values = jax.lax.all_gather(value, ins.dim_axes, axis=d, tiled=True)
    indices = jax.lax.all_gather(index, ins.dim_axes, axis=d, tiled=True)
    pick = jax.lax.argmax if ins.combine == "argmax" else jax.lax.argmin
    winner = jnp.expand_dims(pick(values, d, jnp.int32), d)
    env[ins.dst] = jnp.squeeze(jnp.take_along_axis(indices, winner, axis=d), d)
