"""The planner's shortcuts give the plans its full search gives.

The search stops once no later step can reach the goal cheaper: checked against the cheapest
costs found by relaxing every move to a fixpoint. Mover.holds_own skips counting a
collective-permute's rounds (a pass over every device) where every device already holds its
new shard: checked against the device-level pairing (permute_rounds) and, whole plans,
against the search with the shortcut switched off.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reshard import MESHES, sharding_pairs

import gspmd_viz as gv
from gspmd_viz.core.reshard.permute_rounds import moving, permute_rounds
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.reshard.steps import Mover, state_key


@st.composite
def grown_specs(draw):
    """(mesh, shape, spec, target): target appends unused mesh axes to some dims' ends."""
    mesh = gv.Mesh(draw(st.sampled_from(MESHES)))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=ndim, max_size=ndim)))
    spec, target = [[] for _ in range(ndim)], [[] for _ in range(ndim)]
    for axis in draw(st.permutations(mesh.axis_names)):
        where = draw(st.integers(-2, ndim - 1))  # -2: unused, -1: added by target, else in spec
        dim = draw(st.integers(0, ndim - 1))
        if where == -1:
            target[dim].append(axis)
        elif where >= 0:
            spec[where].append(axis)
    target = [tuple(s) + tuple(t) for s, t in zip(spec, target, strict=True)]
    return mesh, shape, tuple(map(tuple, spec)), tuple(target)


@settings(max_examples=300)
@given(grown_specs())
def test_a_device_said_to_hold_its_new_shard_sends_nothing(case):
    mesh, shape, spec, target = case
    mover = Mover(mesh, shape, "float32", "", (target, frozenset()))
    if mover.holds_own(spec, target):
        rounds = permute_rounds(gv.Sharding(mesh, spec), gv.Sharding(mesh, target), shape)
        assert moving(rounds) == []


def test_shards_that_do_not_nest_are_not_said_to_be_held():
    """5 rows over x=2 (3 a shard) then (x, y) on 2x4 (1 a shard): device (0, 3) wants row 3,
    which x=1's devices hold (rows 3..5), not it (rows 0..2): it is sent."""
    mesh = gv.Mesh({"x": 2, "y": 4})
    mover = Mover(mesh, (5,), "float32", "", ((("x", "y"),), frozenset()))
    assert not mover.holds_own((("x",),), (("x", "y"),))
    rounds = permute_rounds(gv.Sharding(mesh, ("x",)), gv.Sharding(mesh, (("x", "y"),)), (5,))
    assert moving(rounds) != []


@settings(max_examples=200)
@given(sharding_pairs())
def test_plans_with_the_shortcut_equal_the_full_search(case):
    src, dst, shape = case
    plan = reshard_plan(src, dst, shape)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Mover, "holds_own", lambda self, spec, target: False)
        full = reshard_plan(src, dst, shape)
    assert plan.steps == full.steps


def cheapest_costs(start, mover: Mover) -> dict:
    """(wire bytes, collectives, steps) of the cheapest way to every reachable state, by
    relaxing every move until nothing improves (no search order, no early stop)."""
    best, changed = {start: (0.0, 0, 0)}, True
    while changed:
        changed = False
        for state, cost in list(best.items()):
            for move in mover.moves(state):
                c = (cost[0] + mover.cost(move), cost[1] + (move.operand is not None), cost[2] + 1)
                if c < best.get(move.new, (float("inf"),)):
                    best[move.new], changed = c, True
    return best


@settings(max_examples=200)
@given(sharding_pairs())
def test_the_search_stops_at_a_cheapest_plan(case):
    src, dst, shape = case
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    plan = reshard_plan(src, dst, shape)
    costs = cheapest_costs(start, Mover(src.mesh, shape, np.dtype("float32"), "", goal))
    wire = sum(step.wire_bytes for step in plan.steps)
    collectives = sum(step.collective is not None for step in plan.steps)
    assert (wire, collectives, len(plan.steps)) == pytest.approx(costs[goal])
