"""The resharding planner: move a value from one sharding to another, cheapest first.

A plan is a list of steps over the sharding's spec. Each step is one of (XLA: ReshardNoCache):
  slice               keep a sub-block of the local shard: free (XLA: dynamic-slice)
  all-reduce          resolve pending partial sums over some axes
  reduce-scatter      resolve pending sums and split a dim over the same axes at once
  all-to-all          move axes from one tensor dim to another
  all-gather          un-split the minor axes of a dim
  collective-permute  every new shard lies inside an old one: its holder slices it out and
                      sends it (same tiling, other device order is the case with no slicing)
Collectives run on subgroups: only the mesh axes they name. The plan is the cheapest path by
wire bytes (then fewer collectives) found by Dijkstra over the reachable specs.

Uneven dims: every local buffer has the padded `shard_shape`; shard i of a dim split S ways
starts at i * ceil(N/S). Gathering or slicing only some axes of a dim keeps that layout only
when the shards nest (`_nests`); otherwise the plan gathers the whole dim first.
"""

import dataclasses
import heapq
import itertools
import math
from typing import NamedTuple

import numpy as np

from gspmd_viz.core.collective import Collective, total_wire_bytes, wire_bytes
from gspmd_viz.core.sharding import Sharding
from gspmd_viz.units import format_bytes

Spec = tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Step:
    """One resharding step; `dims` = (dim,) or, for all-to-all, (split dim, concat dim)."""

    kind: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    before: Sharding
    after: Sharding
    collective: Collective | None = None

    @property
    def wire_bytes(self) -> float:
        return self.collective.wire_bytes if self.collective else 0.0


def _ceil(n: int, k: int) -> int:
    return -(-n // k)


def _nests(n: int, outer: int, inner: int) -> bool:
    """Do the shards of a dim of size n split `outer` ways nest into `outer * inner` ways?"""
    return outer == 1 or _ceil(n, outer) == inner * _ceil(n, outer * inner)


class _Move(NamedTuple):
    kind: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    new: tuple  # the (spec, unreduced) state it leads to
    operand: tuple[int, ...] | None  # per-device operand shape (None: slice)


class _Mover:
    """Moves from one (spec, unreduced) state to the next, with their bytes. Plain tuples
    while searching; Steps (with Shardings and Collectives) only for the chosen path."""

    def __init__(self, mesh, shape, dtype, source: str):
        self.mesh, self.shape, self.dtype, self.source = mesh, tuple(shape), dtype, source
        self.sizes = mesh.shape

    def sharding(self, state) -> Sharding:
        return Sharding(self.mesh, state[0], state[1])

    def size(self, axes) -> int:
        return math.prod(self.sizes[a] for a in axes)

    def local(self, spec) -> list[int]:
        return [_ceil(n, self.size(axes)) for n, axes in zip(self.shape, spec, strict=True)]

    def nests(self, dim: int, prefix, extra) -> bool:
        return _nests(self.shape[dim], self.size(prefix), self.size(extra))

    def cost(self, move: _Move) -> float:
        if move.operand is None:
            return 0.0
        nbytes = self.dtype.itemsize * math.prod(move.operand)
        group = 2 if move.kind == "collective-permute" else self.size(move.axes)
        return wire_bytes(move.kind, nbytes, group)

    def step(self, state, move: _Move) -> Step:
        collective = None
        if move.operand is not None:
            group = 2 if move.kind == "collective-permute" else self.size(move.axes)
            collective = Collective(
                move.kind, move.axes, move.operand, self.dtype, group, self.source, move.dims
            )
        before, after = self.sharding(state), self.sharding(move.new)
        return Step(move.kind, move.axes, move.dims, before, after, collective)

    def padded(self, spec, new, dim, axes) -> tuple[int, ...]:
        """The operand of a collective that splits `dim` over `axes`: padded to divide."""
        operand = self.local(spec)
        operand[dim] = self.size(axes) * self.local(new)[dim]
        return tuple(operand)

    # --- one generator per kind of move ---------------------------------------------------
    def slices(self, state, dst):
        spec, unreduced = state
        used = {a for axes in spec for a in axes} | unreduced
        for d, extra in _growth(spec, dst):
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if used & set(axes) or not self.nests(d, spec[d], axes):
                    break
                new = (_set(spec, d, spec[d] + axes), unreduced)
                yield _Move("slice", axes, (d,), new, None)

    def reduce_scatters(self, state, dst):
        spec, unreduced = state
        todo = unreduced - dst.unreduced
        for d, extra in _growth(spec, dst):
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if not set(axes) <= todo or not self.nests(d, spec[d], axes):
                    break
                new_spec = _set(spec, d, spec[d] + axes)
                operand = self.padded(spec, new_spec, d, axes)
                yield _Move(
                    "reduce-scatter", axes, (d,), (new_spec, unreduced - set(axes)), operand
                )

    def all_reduces(self, state, dst):
        spec, unreduced = state
        todo = [a for a in self.mesh.axis_names if a in unreduced - dst.unreduced]
        for k in range(1, len(todo) + 1):
            for axes in itertools.combinations(todo, k):
                new = (spec, unreduced - set(axes))
                yield _Move("all-reduce", axes, (), new, tuple(self.local(spec)))

    def all_gathers(self, state, dst):
        spec, unreduced = state
        for d, cur in enumerate(spec):
            for k in range(1, len(cur) + 1):
                keep, axes = cur[: len(cur) - k], cur[len(cur) - k :]
                if self.nests(d, keep, axes):
                    new = (_set(spec, d, keep), unreduced)
                    yield _Move("all-gather", axes, (d,), new, tuple(self.local(spec)))

    def all_to_alls(self, state, dst):
        spec, unreduced = state
        growth = dict(_growth(spec, dst))
        for d, cur in enumerate(spec):
            for k in range(1, len(cur) + 1):
                keep, axes = cur[: len(cur) - k], cur[len(cur) - k :]
                for e, extra in growth.items():
                    if e == d or extra[:k] != axes:
                        continue
                    if not (self.nests(d, keep, axes) and self.nests(e, spec[e], axes)):
                        continue
                    new_spec = _set(_set(spec, d, keep), e, spec[e] + axes)
                    operand = self.padded(spec, new_spec, e, axes)
                    yield _Move("all-to-all", axes, (e, d), (new_spec, unreduced), operand)

    def permutes(self, state, dst):
        """Straight to dst when every dst shard lies inside one src shard: the holder slices it
        out and sends it (same tiling in another device order has nothing to slice). Or, on the
        way, reorder each dim's axes so those dst keeps there come first: then only the minor
        axes need gathering (# XLA: reshard by collective-permute before an all-gather)."""
        spec, unreduced = state
        if unreduced or dst.unreduced:
            return
        goal = _key(dst, len(self.shape))[0]
        for target in dict.fromkeys((goal, _dst_major(spec, goal))):
            if target != spec and self.inside(spec, target):
                roles = _roles(spec), _roles(target)
                axes = tuple(a for a in self.mesh.axis_names if roles[0].get(a) != roles[1].get(a))
                new = (target, unreduced)
                yield _Move("collective-permute", axes, (), new, tuple(self.local(target)))

    def inside(self, spec, target) -> bool:
        """Does every shard of `target` lie inside one shard of `spec`?"""
        for n, have, want in zip(self.shape, spec, target, strict=True):
            s, t = self.size(have), self.size(want)
            if t % s or (t != s and n % t):
                return False  # a target shard would straddle two spec shards
        return True

    def moves(self, state, dst):
        for gen in (
            self.slices,
            self.reduce_scatters,
            self.all_reduces,
            self.all_to_alls,
            self.all_gathers,
            self.permutes,
        ):
            yield from gen(state, dst)


def _roles(spec) -> dict[str, tuple[int, int]]:
    """axis -> (tensor dim, position within the dim's axes)."""
    return {a: (d, i) for d, axes in enumerate(spec) for i, a in enumerate(axes)}


def _dst_major(spec, goal):
    """spec with each dim's axes reordered: the longest prefix of goal's axes there comes first."""
    out = []
    for have, want in zip(spec, goal, strict=True):
        lead = []
        for a in want:
            if a not in have:
                break
            lead.append(a)
        out.append(tuple(lead) + tuple(a for a in have if a not in lead))
    return tuple(out)


def _set(spec, dim, axes):
    return spec[:dim] + (tuple(axes),) + spec[dim + 1 :]


def _growth(spec, dst: Sharding):
    """(dim, axes dst wants after the current ones) for dims whose axes are a prefix of dst's."""
    for d, cur in enumerate(spec):
        want = dst.dim_axes(d)
        if want[: len(cur)] == cur and len(want) > len(cur):
            yield d, want[len(cur) :]


def _key(sharding: Sharding, ndim: int):
    """(spec, unreduced) without size-1 mesh axes: they split nothing and sum nothing, so
    shardings that differ only there hold the same data on every device."""
    size = sharding.mesh.shape
    spec = tuple(tuple(a for a in sharding.dim_axes(d) if size[a] > 1) for d in range(ndim))
    return spec, frozenset(a for a in sharding.unreduced if size[a] > 1)


def _search(src: Sharding, dst: Sharding, shape, dtype, source) -> list[Step]:
    """Cheapest path by (wire bytes, collectives, steps): Dijkstra over spec states."""
    mover = _Mover(src.mesh, shape, dtype, source)
    start, goal = _key(src, len(shape)), _key(dst, len(shape))
    dst = mover.sharding(goal)
    heap = [((0.0, 0, 0), 0, start, ())]
    best = {start: (0.0, 0, 0)}
    tie = itertools.count(1)
    while heap:
        cost, _, state, path = heapq.heappop(heap)
        if state == goal:
            return [mover.step(before, move) for before, move in path]
        if best.get(state, cost) < cost:
            continue
        for move in mover.moves(state, dst):
            c = (cost[0] + mover.cost(move), cost[1] + (move.operand is not None), cost[2] + 1)
            if c < best.get(move.new, (float("inf"),)):
                best[move.new] = c
                heapq.heappush(heap, (c, next(tie), move.new, (*path, (state, move))))
    raise AssertionError(f"no resharding plan from {src!r} to {dst!r}")  # gathers always work


# --- public --------------------------------------------------------------------------------


class ReshardPlan:
    """`gv.reshard_plan(src, dst, shape)`: steps, their collectives, and the bytes they move."""

    def __init__(self, src: Sharding, dst: Sharding, shape, dtype, steps: list[Step]):
        self.src, self.dst, self.shape, self.dtype, self.steps = src, dst, shape, dtype, steps

    @property
    def collectives(self) -> list[Collective]:
        return [s.collective for s in self.steps if s.collective is not None]

    @property
    def wire_bytes(self) -> float:
        return total_wire_bytes(self.collectives)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def lines(self) -> list[str]:
        """One line per step: `all-gather(x) dim 0   # [4, 6] -> [7, 6]   48 B`."""
        out = []
        for step in self.steps:
            before = list(step.before.shard_shape(self.shape))
            after = list(step.after.shard_shape(self.shape))
            where = "" if not step.dims else " dims " + "<-".join(map(str, step.dims))
            where = where.replace("dims", "dim") if len(step.dims) == 1 else where
            op = f"{step.kind}({','.join(step.axes)}){where}"
            cost = "free" if step.collective is None else format_bytes(step.wire_bytes)
            out.append(f"{op:<34}# {before} -> {after}   {cost}")
        return out

    def __str__(self) -> str:
        head = (
            f"reshard {self.src.describe(self.shape, self.dtype)} -> "
            f"{self.dst.describe(self.shape, self.dtype)}: "
            f"{format_bytes(self.wire_bytes)} per device on the wire"
        )
        body = self.lines() or ["(nothing to do)"]
        return "\n".join([head, *("  " + line for line in body)])

    def __repr__(self) -> str:
        return str(self)


def reshard_plan(src: Sharding, dst: Sharding, shape, dtype=np.float32, source: str = ""):
    """The cheapest plan (by wire bytes) that turns `src`-sharded data into `dst`-sharded."""
    shape = tuple(int(n) for n in shape)
    _check(src, dst, shape)
    dtype = np.dtype(dtype)
    if _key(src, len(shape)) == _key(dst, len(shape)):
        return ReshardPlan(src, dst, shape, dtype, [])
    return ReshardPlan(src, dst, shape, dtype, _search(src, dst, shape, dtype, source))


def _check(src: Sharding, dst: Sharding, shape) -> None:
    for s in (src, dst):
        if not isinstance(s, Sharding):
            raise TypeError(f"reshard_plan takes gv.Sharding objects, got {type(s).__name__}")
        s.check_rank(len(shape))
    if src.mesh != dst.mesh:
        raise ValueError(f"cannot reshard between meshes {src.mesh!r} and {dst.mesh!r}")
    extra = dst.unreduced - src.unreduced
    if extra:
        raise ValueError(
            f"{dst!r} holds pending sums over {sorted(extra)} that {src!r} does not: a plan can "
            "resolve pending sums but never create them"
        )
