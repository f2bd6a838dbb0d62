"""The planner returns a way to the goal as soon as no other can beat it, and gives the plan
its full search gives.

Two stops end the search while it is still expanding a state: a free step to the goal (every
other way pushed from then on costs at least as much, and a tie keeps the way found first),
and a one-step way from the start whose cost no plan can go below (Mover.floor: a device
must receive the data of its goal shard it does not hold, Mover.missing). A move to the goal
no other way on from its state goes below ends that state's moves, and a popped state no way
on from which costs less than the way found is not expanded (Mover.at_floor_from; its bound
is checked in test_reshard_floor_from). Most plans are only costed: a plan's steps are made
when first asked for, its bytes summed by the search. The references are the search run to
its end (`full_search` below: Dijkstra with no early return, as the planner was) and its
steps' collectives; for `missing`, the device slices of the two shardings; for `floor`, the
cheapest plans found by relaxing every move (test_reshard_shortcuts.cheapest_costs). A
permute to a state the search reached already at no more than any move from the popped state
costs is not made (Mover.permutes' `reached`): the full search makes every move. A
collective-permute's rounds are known without pairing devices where every dim nests and
some device sends (Mover.rounds): checked against the pairing (permute_rounds).
"""

import heapq
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_models import MODELS, build
from test_reshard_shortcuts import cheapest_costs

import gspmd_viz as gv
from gspmd_viz.core.reshard.permute_rounds import moving, permute_rounds
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.reshard.steps import Mover, state_key
from gspmd_viz.core.sharding.collective import total_wire_bytes

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
    assert_same_plan(*case)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_plan_a_library_model_asks_for_equals_the_full_search(name):
    f, args = build(name)
    for src, dst, shape, dtype in asked_plans(f, args):
        assert_same_plan(src, dst, shape, dtype)


def assert_same_plan(src, dst, shape, dtype) -> None:
    """Steps equal; the bytes the search summed (a plan's steps are made when first asked
    for) equal those of the full search's collectives."""
    plan, full = reshard_plan(src, dst, shape, dtype), full_search(src, dst, shape, dtype)
    wire_bytes = plan.wire_bytes  # asked first: from the search, the steps not made yet
    assert plan.steps == full
    assert wire_bytes == total_wire_bytes([s.collective for s in full if s.collective])


def missing_by_device(src, dst, shape) -> list[int]:
    """Per device: the elements of its dst slice outside its src slice (Sharding.device_slices)."""
    held, wanted = src.device_slices(shape), dst.device_slices(shape)
    out = []
    for device in range(src.mesh.size):
        overlap = [
            max(0, min(w.stop, h.stop) - max(w.start, h.start))
            for w, h in zip(wanted[device], held[device], strict=True)
        ]
        out.append(int(np.prod([w.stop - w.start for w in wanted[device]]) - np.prod(overlap)))
    return out


def unit_device(mesh, axis) -> int:
    """The device at 1 along `axis` and 0 along the others (device 0 for None)."""
    return next(
        d for d in range(mesh.size) if mesh.coords(d) == {a: a == axis for a in mesh.axis_names}
    )


@settings(max_examples=300)
@given(cases(pending=False))
def test_missing_counts_what_a_device_lacks_and_no_plan_goes_below_the_floor(case):
    src, dst, shape, dtype = case
    start, goal = state_key(src, len(shape)), state_key(dst, len(shape))
    mover = Mover(src.mesh, shape, np.dtype(dtype), "", goal)
    by_device = missing_by_device(src, dst, shape)
    for axis in [None, *(a for a in src.mesh.axis_names if src.mesh.axis_size(a) > 1)]:
        assert mover.missing(start[0], axis) == by_device[unit_device(src.mesh, axis)]
    plan = full_search(src, dst, shape, dtype)
    assert sum(s.wire_bytes for s in plan) >= np.dtype(dtype).itemsize * max(by_device)
    if start != goal:
        floor, cheapest = mover.floor(start), cheapest_costs(start, mover)[goal]
        assert floor <= cheapest
        for probe in (floor, cheapest, (floor[0], floor[1] + 1, 1), (floor[0] + 1, 1, 1)):
            assert mover.at_floor_from(start, (0.0, 0, 0), probe) == (probe <= floor)


def test_a_gather_whose_bytes_a_device_must_receive_is_final():
    """[6@x] -> [6] f32 on x=2: each device lacks 3 of its 6 elements, 12 B, the gather's
    cost. On x=3 the same holds (4 of 6, 16 B), but costs over 3 devices round: the planner
    does not stop on that ground there. [5@x] on x=4 pads: 24 B gathered, 20 B lacking at
    most (device 3 holds padding only)."""
    for sizes, n, final in (({"x": 2}, 6, True), ({"x": 3}, 6, False), ({"x": 4}, 5, False)):
        mesh = gv.Mesh(sizes)
        mover = Mover(mesh, (n,), np.dtype("float32"), "", (((),), frozenset()))
        gather = reshard_plan(gv.Sharding(mesh, ("x",)), gv.Sharding(mesh, (None,)), (n,))
        g = sizes["x"]
        assert gather.wire_bytes == 4 * (g - 1) * -(-n // g)  # ring all-gather
        assert mover.missing((("x",),), None) == n - -(-n // g)
        assert ((gather.wire_bytes, 1, 1) <= mover.floor(((("x",),), frozenset()))) is final


@settings(max_examples=500)
@given(cases(pending=False))
def test_permute_rounds_counted_without_pairing_devices_match_the_pairing(case):
    """Mover.rounds: where every dim nests and a device one step from device 0 sends, one
    round; checked against permute_rounds (each device paired with the one sending to it)."""
    src, dst, shape, dtype = case
    spec, target = state_key(src, len(shape))[0], state_key(dst, len(shape))[0]
    mover = Mover(src.mesh, shape, np.dtype(dtype), "", (target, frozenset()))
    if spec != target and mover.inside(spec, target):
        old, new = gv.Sharding(src.mesh, spec), gv.Sharding(src.mesh, target)
        assert mover.rounds(spec, target) == len(moving(permute_rounds(old, new, shape)))
        if mover.sends(spec, target):
            assert moving(permute_rounds(old, new, shape))
