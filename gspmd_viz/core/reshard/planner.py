"""The resharding planner: move a value from one sharding to another, cheapest first.

A plan is a list of steps over the sharding's spec. Each step is one of (XLA: ReshardNoCache):
  slice               keep a sub-block of the local shard: free (XLA: dynamic-slice)
  all-reduce          resolve pending partial sums over some axes; or un-split a dim whose
                      gathered blocks would be mostly padding by summing zero-padded blocks
  reduce-scatter      resolve pending sums and split a dim over the same axes at once
  all-to-all          move axes from one tensor dim to another (in another order than dst's:
                      a collective-permute after it puts the blocks in place)
  all-gather          un-split the minor axes of a dim
  collective-permute  every new shard lies inside an old one: its holder slices it out and
                      sends it (same tiling, other device order is the case with no slicing;
                      a holder asked for several pieces sends one a round)
Collectives run on subgroups: only the mesh axes they name. The plan is the cheapest path by
wire bytes (then fewer collectives) found by Dijkstra over the reachable specs.

Uneven dims: every local buffer has the padded `shard_shape`; shard i of a dim split S ways
starts at i * ceil(N/S). Gathering or slicing only some axes of a dim keeps that layout only
when the shards nest (`_nests`); otherwise the plan gathers the whole dim first, or permutes
each new block from the old one it lies in (4 rows over 8 devices, padding on four, to 4 over 4;
or to the same blocks over the dim's minor axes alone before a gather: steps.Mover.on_data).
"""

import functools
import heapq
import itertools
import math

import numpy as np

from gspmd_viz.core.reshard.steps import Mover, ReshardStep, state_key
from gspmd_viz.core.sharding.collective import Collective, total_wire_bytes
from gspmd_viz.core.sharding.sharding import Sharding, as_dtype
from gspmd_viz.units import format_bytes

_NEVER = (math.inf,)  # the cost of a state not reached yet


def _search(start, goal, mover: Mover) -> tuple[float, tuple]:
    """Cheapest path by (wire bytes, collectives, steps): Dijkstra over spec states. Of
    equal-cost ways the first pushed is kept; the search returns as soon as no other way can
    cost less: a free step to the goal, or one step from the start that no plan goes below
    (Mover.at_floor_from), ends it with the rest of the state's moves not even made; a move
    to the goal that no other way on from its state goes below ends that state's moves, the
    search going on; a state no way on from which costs less than the way found is not
    expanded (at_floor_from again: a tie keeps the way found).
    Returns the way's wire bytes and its (state, move) pairs."""
    heap = [((0.0, 0, 0), 0, start, ())]
    best = {start: (0.0, 0, 0)}
    found = None  # (cost, path): the cheapest way to the goal pushed so far
    tie = itertools.count(1)
    while heap:
        cost, _, state, path = heapq.heappop(heap)
        # every step adds at least (0, 0, 1) and costs only grow from here: no way pushed
        # from now on costs less than `least` (the goal's own entry would be popped next)
        least = (cost[0], cost[1], cost[2] + 1)
        if found is not None and found[0] <= least:
            return found[0][0], found[1]
        if best.get(state, cost) < cost:
            continue
        if found is not None and mover.at_floor_from(state, cost, found[0]):
            continue  # no way on from here costs less than the way found
        # a state reached already at no more than `least` is a state no move from here betters
        for move in mover.moves(state, lambda new, least=least: best.get(new, _NEVER) <= least):
            c = (cost[0] + mover.cost(move), cost[1] + (move.operand is not None), cost[2] + 1)
            if c < best.get(move.new, _NEVER):
                best[move.new], way = c, (*path, (state, move))
                if move.new == goal:
                    found = (c, way)
                    # no other way costs less (a tie keeps this one); from the start: none
                    if c <= least or (not path and mover.at_floor_from(state, cost, c)):
                        return c[0], way
                    if path and mover.at_floor_from(state, cost, c):
                        break  # no other way on from state costs less: its other moves unmade
                heapq.heappush(heap, (c, next(tie), move.new, way))
    if found is None:
        raise AssertionError(f"no resharding plan from {start} to {goal}")  # gathers always work
    return found[0][0], found[1]  # no state left leads to a cheaper way


# --- public --------------------------------------------------------------------------------


class ReshardPlan:
    """`gv.reshard_plan(src, dst, shape)`: steps, their collectives, and the bytes they move."""

    def __init__(self, src: Sharding, dst: Sharding, shape, dtype, steps, wire_bytes=None):
        """`steps`: a list of ReshardSteps, or a function that makes them when first asked
        (most plans are only costed: `wire_bytes`, given, is then theirs)."""
        self.src, self.dst, self.shape, self.dtype, self._steps = src, dst, shape, dtype, steps
        if wire_bytes is not None:
            self.wire_bytes = wire_bytes

    @property
    def steps(self) -> list[ReshardStep]:
        if callable(self._steps):
            self._steps = self._steps()
        return self._steps

    @property
    def collectives(self) -> list[Collective]:
        return [s.collective for s in self.steps if s.collective is not None]

    @functools.cached_property
    def wire_bytes(self) -> float:  # asked on every costing of a split that needs this move
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
    shape = tuple(map(int, shape))
    _check(src, dst, shape)
    dtype = as_dtype(dtype)
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    if start == goal:
        return ReshardPlan(src, dst, shape, dtype, [], 0.0)
    wire_bytes, way = _search(start, goal, Mover(src.mesh, shape, dtype, source, goal))
    steps = functools.partial(_steps, src.mesh, shape, dtype, source, goal, way)
    return ReshardPlan(src, dst, shape, dtype, steps, wire_bytes)


def least_wire_bytes(src: Sharding, dst: Sharding, shape, dtype=np.float32) -> float:
    """Wire bytes no plan from src to dst goes below, known without a search (Mover.floor:
    the most some device must receive; 0.0 where that is not known: pending sums, or costs
    that may round)."""
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    if start == goal:
        return 0.0
    return Mover(src.mesh, shape, as_dtype(dtype), "", goal).floor(start)[0]


def _steps(mesh, shape, dtype, source, goal, way) -> list[ReshardStep]:
    """The steps of a way the search found, made by a Mover of their own: a cached plan
    does not keep the search's (its memos of every state reached)."""
    return Mover(mesh, shape, dtype, source, goal).steps(way)


def _check(src: Sharding, dst: Sharding, shape) -> None:
    for s in (src, dst):
        if not isinstance(s, Sharding):
            raise TypeError(f"reshard_plan takes gv.Sharding objects, got {type(s).__name__}")
        s.check_rank(len(shape))
    if src.mesh is not dst.mesh and src.mesh != dst.mesh:
        raise ValueError(f"cannot reshard between meshes {src.mesh!r} and {dst.mesh!r}")
    extra = dst.unreduced - src.unreduced
    if extra:
        raise ValueError(
            f"{dst!r} holds pending sums over {sorted(extra)} that {src!r} does not: a plan can "
            "resolve pending sums but never create them"
        )
