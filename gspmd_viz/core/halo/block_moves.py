"""Whole blocks of a split dim move between devices, nothing is gathered: rotation and reversal.

A rotation along a split dim moves whole shards (or two pieces of each) to their neighbours.

`jnp.roll(x, k, axis=d)` traces to `concatenate(slice(x, [n−k:n]), slice(x, [0:n−k]))` on dim d.
Read piece by piece, each slice is a shift whose halo, at one stage per device, is a whole shard
or a single element far away; read as one rotation, shard i's output block is simply input
positions [i·s − k, i·s − k + s) mod n. With k = q·s + r (0 ≤ r < s), every shard j sends

    its first s − r elements to shard j + q      (they land at [r, s) of the receiver's block)
    its last r elements to shard j + q + 1       (they land at [0, r))

(all mod S): at most two collective-permutes and one shard's bytes per device, or none where a
distance is a multiple of S. This is the shift of a GSPMD pipeline: the state buffer moves one
stage on per iteration.  # XLA: the partitioner turns the same concat(slice, slice) into one
collective-permute of the shards.

A reversal (`jnp.flip`, `lax.rev`) of dims split evenly sends block b of the blocks those dims
make (their mesh axes in dim order, major first) to block N − 1 − b, which reverses every dim's
block index at once, then reverses its own shard locally: one collective-permute, one shard.
A dim split unevenly (padded at its end) takes one more rotation of its padding (both plans).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.halo.exchange import permute_blocks
from gspmd_viz.core.program.trace import Equation, Program, Value
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.sharding import Sharding


@dataclasses.dataclass(frozen=True)
class Rotation:
    """`concat` computes `source` rotated by `shift` along `dim` from the two `slices`."""

    concat: Equation
    slices: tuple[Equation, Equation]
    source: Value
    dim: int
    shift: int


def _plain_slice(eqn: Equation | None, dim: int):
    """(start, limit) on `dim` of a unit-stride slice that keeps every other dim whole."""
    if eqn is None or eqn.primitive != "slice":
        return None
    p, shape = eqn.params, eqn.inputs[0].shape
    if p["strides"] is not None and any(s != 1 for s in p["strides"]):
        return None
    for d, (a, b) in enumerate(zip(p["start_indices"], p["limit_indices"], strict=True)):
        if d != dim and (a, b) != (0, shape[d]):
            return None
    return p["start_indices"][dim], p["limit_indices"][dim]


def rotation_of(program: Program, eqn: Equation) -> Rotation | None:
    """The rotation a concatenation computes, or None (see the module doc for the pattern)."""
    if eqn.primitive != "concatenate" or len(eqn.inputs) != 2:
        return None
    if not all(isinstance(v, Value) for v in eqn.inputs):
        return None
    d = int(eqn.params["dimension"])
    first, second = (program.producer.get(v) for v in eqn.inputs)
    a, b = _plain_slice(first, d), _plain_slice(second, d)
    if a is None or b is None or first.inputs[0] is not second.inputs[0]:
        return None
    source = first.inputs[0]
    if not isinstance(source, Value):  # a constant rolled: it is whole everywhere anyway
        return None
    n = source.shape[d]
    if a[1] != n or b != (0, a[0]) or not 0 < a[0] < n:
        return None
    return Rotation(eqn, (first, second), source, d, n - a[0])


def rotations(program: Program, outputs) -> tuple[dict, dict]:
    """The concatenations that roll a value ({concat: Rotation}) and the slices feeding only
    them ({slice: Rotation}): such a slice is partitioned only if its rotation is not taken."""
    found = {}
    for eqn in program.equations:
        rot = rotation_of(program, eqn)
        if rot is not None:
            found[eqn] = rot
    deferred = {
        s: rot
        for rot in found.values()
        for s in rot.slices
        if s.outputs[0] not in outputs
        and [e for e, _ in program.consumers[s.outputs[0]]] == [rot.concat]
    }
    return found, deferred


def plan_for(eqn: Equation, rot: Rotation | None, target: Sharding, available=lambda v: []):
    """(the value moved, its RotatePlan / PaddedRotatePlan / ReversePlan) when `eqn` is a roll
    or flip of dims its result `target` splits; None otherwise, or when the value is already
    whole along those dims in one of its `available(value)` shardings (done locally, 0 B)."""
    if target.unreduced:
        return None
    if rot is not None:
        v, plan, dims = rot.source, _rotate_plan(rot, target), (rot.dim,)
    elif eqn.primitive == "rev":
        v, plan, dims = eqn.inputs[0], _reverse_plan(eqn, target), eqn.params["dimensions"]
    else:
        return None
    if plan is None or any(all(s.dim_shards(d) == 1 for d in dims) for s in available(v)):
        return None
    return v, plan


def _rotate_plan(rot: Rotation, target: Sharding):
    v, shards = rot.source, target.dim_shards(rot.dim)
    if shards == 1:
        return None
    local = target.shard_shape(v.shape)
    plan = RotatePlan(rot.dim, target.dim_axes(rot.dim), shards, rot.shift, local, v.dtype)
    padding = local[rot.dim] * shards - v.shape[rot.dim]
    if padding == 0:
        return plan
    return PaddedRotatePlan(plan, dataclasses.replace(plan, shift=rot.shift + padding))


def _reverse_plan(eqn: Equation, target: Sharding):
    v, dims = eqn.inputs[0], tuple(eqn.params["dimensions"])
    split = [d for d in sorted(dims) if target.dim_shards(d) > 1]
    if not isinstance(v, Value) or not split:
        return None
    axes = tuple(a for d in split for a in target.dim_axes(d))
    blocks = int(np.prod([target.dim_shards(d) for d in split]))
    local = target.shard_shape(v.shape)
    realign = tuple(  # an uneven dim: its padding, reversed, leads; rotate it back to the end
        RotatePlan(d, target.dim_axes(d), target.dim_shards(d), v.shape[d] - n, local, v.dtype)
        for d in split
        if (n := local[d] * target.dim_shards(d)) != v.shape[d]
    )
    return ReversePlan(dims, axes, blocks, local, v.dtype, realign)


@dataclasses.dataclass(frozen=True)
class Piece:
    """Elements [lo, hi) of every shard go `distance` shards on, landing at `at`."""

    lo: int
    hi: int
    distance: int
    at: int


def pieces(n: int, shards: int, shift: int) -> tuple[Piece, ...]:
    """The (at most two) pieces of a rotation by `shift` of n elements split evenly."""
    if n % shards:
        raise ValueError(f"a rotation moves whole shards: {n} elements do not split {shards} ways")
    s = n // shards
    q, r = divmod(shift % n, s)
    out = [Piece(0, s - r, q, r), Piece(s - r, s, q + 1, 0)]
    return tuple(p for p in out if p.hi > p.lo)


@dataclasses.dataclass(frozen=True)
class RotatePlan:
    """One rotation on one device's shard: dim `dim` split over mesh `axes` into `shards`."""

    name = "rotate"

    dim: int
    axes: tuple[str, ...]
    shards: int
    shift: int
    local_shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return pieces(self.local_shape[self.dim] * self.shards, self.shards, self.shift)

    def moves(self, piece: Piece) -> bool:
        return piece.distance % self.shards != 0

    def pairs(self, piece: Piece) -> list[tuple[int, int]]:
        return [(j, (j + piece.distance) % self.shards) for j in range(self.shards)]

    def collectives(self, source: str) -> list[Collective]:
        out = []
        for p in filter(self.moves, self.pieces):
            shape = list(self.local_shape)
            shape[self.dim] = p.hi - p.lo
            kind, dims = "collective-permute", (self.dim,)
            out.append(
                Collective(kind, self.axes, tuple(shape), self.dtype, self.shards, source, dims)
            )
        return out

    def describe(self) -> str:
        return f"by {self.shift} along dim {self.dim}"

    def run(self, x):
        """[.., s, ..] -> ppermute per piece -> concat in landing order -> [.., s, ..]"""
        landed = []
        for p in self.pieces:
            piece = jax.lax.slice_in_dim(x, p.lo, p.hi, axis=self.dim)
            if self.moves(p):
                piece = permute_blocks(piece, self.axes, self.pairs(p))
            landed.append((p.at, piece))
        parts = [piece for _, piece in sorted(landed, key=lambda item: item[0])]
        return jax.lax.concatenate(parts, self.dim) if len(parts) > 1 else parts[0]


@dataclasses.dataclass(frozen=True)
class PaddedRotatePlan:
    """A rotation by k of a dim of n elements held in S·s slots (the last S·s − n padding):
    rotating the slots by k puts every element right but the first k, which get padding; the
    slots rotated by k + S·s − n hold those (the last k elements). Two rotations (at most four
    permutes, two shards' bytes) and a select on the global position."""

    body: RotatePlan
    wrapped: RotatePlan  # what lands on positions [0, k)
    name = "rotate"

    @property
    def axes(self) -> tuple[str, ...]:
        return self.body.axes

    def collectives(self, source: str) -> list[Collective]:
        return self.body.collectives(source) + self.wrapped.collectives(source)

    def describe(self) -> str:
        return f"{self.body.describe()} (padded)"

    def run(self, x):
        """[.., s, ..] -> two rotations -> the wrapped one where the global position < k"""
        d, s = self.body.dim, self.body.local_shape[self.body.dim]
        shape = [1] * x.ndim
        shape[d] = s
        at = jax.lax.axis_index(self.axes) * s + jnp.arange(s).reshape(shape)
        return jnp.where(at < self.body.shift, self.wrapped.run(x), self.body.run(x))


@dataclasses.dataclass(frozen=True)
class ReversePlan:
    """`lax.rev` of `dims` on one device's shard; the split ones are split over `axes` (their
    mesh axes in dim order) into `blocks` blocks. Reversing a padded (uneven) dim of n
    elements in S·s slots puts its S·s − n padding slots first: `realign` rotates each such
    dim back by that many (two more permutes at most, one shard's bytes).
    # XLA: the partitioned reverse pads, reverses and shifts the same way"""

    dims: tuple[int, ...]
    axes: tuple[str, ...]
    blocks: int
    local_shape: tuple[int, ...]
    dtype: np.dtype
    realign: tuple[RotatePlan, ...] = ()
    name = "reverse"

    def pairs(self) -> list[tuple[int, int]]:
        return [(b, self.blocks - 1 - b) for b in range(self.blocks)]

    def collectives(self, source: str) -> list[Collective]:
        shape, kind = tuple(self.local_shape), "collective-permute"
        out = [Collective(kind, self.axes, shape, self.dtype, self.blocks, source, self.dims)]
        return out[self.blocks == 1 :] + [c for r in self.realign for c in r.collectives(source)]

    def describe(self) -> str:
        return f"dims {', '.join(map(str, self.dims))}"

    def run(self, x):
        """[.., s, ..] -> ppermute(b -> N-1-b) -> local rev -> [.., s, ..]"""
        if self.blocks > 1:
            x = permute_blocks(x, self.axes, self.pairs())
        x = jax.lax.rev(x, self.dims)
        for rotation in self.realign:  # [pad, data] -> rotate by -pad -> [data, pad]
            x = rotation.run(x)
        return x
