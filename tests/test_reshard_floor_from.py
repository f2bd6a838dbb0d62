"""The planner stops expanding a state once it finds a move from it to the goal that costs
no more than any way on from that state can, and does not expand a popped state no way on
from which costs less than the way found (a tie keeps that one): Mover.at_floor_from, from
what some device must receive (Mover.must_receive).

The reference for the bound: the cheapest way from a state to the goal by relaxing every
move (test_reshard_shortcuts.cheapest_costs: no search order, no early stop), on hypothesis
draws (meshes with size-1 and size-3 axes, pending sums, uneven and size-1 dims, three
dtypes). The plans with the stop are checked against the full search (Dijkstra to its end)
by test_reshard_early_stops, on such draws and on every plan the four library models ask.
"""

import numpy as np
from hypothesis import given, settings
from test_reshard_early_stops import cases
from test_reshard_shortcuts import cheapest_costs

import gspmd_viz as gv
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.reshard.steps import Mover, state_key


@settings(max_examples=300)
@given(cases())
def test_no_way_on_from_a_state_costs_less_than_its_floor(case):
    """at_floor_from(state, spent, c) says yes only for a c that no way on from state goes
    below: never for a cost above the cheapest such way."""
    src, dst, shape, dtype = case
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    mover = Mover(src.mesh, shape, np.dtype(dtype), "", goal)
    for state in [start, *(move.new for move in mover.moves(start))]:
        if state == goal:
            continue
        on = cheapest_costs(state, mover)[goal]
        for spent in ((0.0, 0, 0), (8.0, 1, 2)):
            reached = (spent[0] + on[0], spent[1] + on[1], spent[2] + on[2])
            for above in ((1.0, 0, 0), (0.0, 1, 0), (0.0, 0, 1)):
                probe = tuple(r + a for r, a in zip(reached, above, strict=True))
                assert not mover.at_floor_from(state, spent, probe)


def test_a_last_gather_at_the_floor_ends_the_state():
    """[4@x, 16@y] -> [4, 16@y] on x=2, y=4 f32: device 0 lacks 2 rows of its 4 columns,
    32 B, what gathering x sends it: reached after `spent`, that gather is at the floor of
    every way on from [4@x, 16@y]; a cost one byte above it is not."""
    mesh = gv.Mesh({"x": 2, "y": 4})
    state = ((("x",), ("y",)), frozenset())
    mover = Mover(mesh, (4, 16), np.dtype("float32"), "", (((), ("y",)), frozenset()))
    gather = reshard_plan(gv.Sharding(mesh, ("x", "y")), gv.Sharding(mesh, (None, "y")), (4, 16))
    assert gather.wire_bytes == 4 * 2 * 4  # ring all-gather over 2: (2 - 1) * [2, 4] f32
    spent = (5.0, 1, 1)
    assert mover.at_floor_from(state, spent, (spent[0] + gather.wire_bytes, 2, 2))
    assert not mover.at_floor_from(state, spent, (spent[0] + gather.wire_bytes + 1, 2, 2))
