"""The planner returns a way to the goal as soon as no other can beat it, and gives the plan
its full search gives.

A free step to the goal ends the search while it is still expanding a state (every other way
pushed from then on costs at least as much, and a tie keeps the way found first). The
reference is the search run to its end (`full_search` below: Dijkstra with no early return).
"""

import heapq
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.reshard.steps import Mover, state_key

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from reshard_plans import asked_plans  # noqa: E402


def full_search(src, dst, shape, dtype) -> list:
    """The steps Dijkstra finds when it runs until the cheapest heap entry cannot lead to a
    cheaper way to the goal: the first way pushed among the cheapest."""
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    mover = Mover(src.mesh, shape, np.dtype(dtype), "", goal)
    heap, best, found, tie = [((0.0, 0, 0), 0, start, ())], {start: (0.0, 0, 0)}, None, 0
    while heap and start != goal:
        cost, _, state, path = heapq.heappop(heap)
        if found is not None and found[0] <= (cost[0], cost[1], cost[2] + 1):
            break
        for move in mover.moves(state) if best[state] == cost else ():
            c = (cost[0] + mover.cost(move), cost[1] + (move.operand is not None), cost[2] + 1)
            if c < best.get(move.new, (float("inf"),)):
                best[move.new], way, tie = c, (*path, (state, move)), tie + 1
                found = (c, way) if move.new == goal else found
                heapq.heappush(heap, (c, tie, move.new, way))
    return [] if start == goal else mover.steps(found[1])


@st.composite
def cases(draw, pending=True):
    """(src, dst, shape, dtype) on a mesh of 1-3 axes of 1, 2, 4 or 3 devices (size-1 axes
    split nothing; 3 makes costs round), dims of 1-13 (uneven and size 1), pending sums."""
    sizes = draw(st.lists(st.sampled_from([1, 2, 2, 4, 4, 3]), min_size=1, max_size=3))
    mesh = gv.Mesh({name: n for name, n in zip("xyz", sizes, strict=False)})
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=ndim, max_size=ndim)))

    def place(allow_pending: bool):
        dims, sums = [[] for _ in range(ndim)], []
        for axis in draw(st.permutations(mesh.axis_names)):
            where = draw(st.integers(-2 if allow_pending else -1, ndim - 1))
            (sums if where == -2 else dims[where] if where >= 0 else []).append(axis)
        return tuple(map(tuple, dims)), sums

    src_spec, src_sums = place(pending)
    dst_spec, _ = place(False)
    dst_sums = [a for a in src_sums if draw(st.booleans())]
    dst_spec = tuple(tuple(a for a in axes if a not in dst_sums) for axes in dst_spec)
    dtype = draw(st.sampled_from(["float32", "bfloat16", "int8"]))
    return (
        gv.Sharding(mesh, src_spec, src_sums),
        gv.Sharding(mesh, dst_spec, dst_sums),
        shape,
        dtype,
    )


@settings(max_examples=400)
@given(cases())
def test_plans_equal_the_full_search(case):
    src, dst, shape, dtype = case
    assert reshard_plan(src, dst, shape, dtype).steps == full_search(src, dst, shape, dtype)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_plan_a_library_model_asks_for_equals_the_full_search(name):
    f, args = build(name)
    for src, dst, shape, dtype in asked_plans(f, args):
        assert reshard_plan(src, dst, shape, dtype).steps == full_search(src, dst, shape, dtype)
