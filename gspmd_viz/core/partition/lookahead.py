"""What handing a value to its consumers costs, one reader ahead.

A split's cost ends with moving each result to what its consumers will ask for
(`Partitioner.wanted`: each consumer's likely split). A value read once may instead be taken as
it is: its reader splits to match and moves its own results on. Where that is cheaper, the
producer is charged that instead: a rows-split update handed to a scatter-add that sums rows,
say, costs the [1, d] sum's gather, not the [n, d] operand's. A split being costed against a
cheaper one hands its results on with the rest of its budget: a move that would take them past
it (by the least it may cost) is not planned.
# XLA: GSPMD's partitioner reshards an operand to a consumer's sharding only when it must
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from gspmd_viz.core.choice.choose_split import EquationSplit, cached_plan, past_after, plan_floor
from gspmd_viz.core.partition.partitioner_state import PartitionerState
from gspmd_viz.core.program.trace import Value
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.sharding import Sharding


def asked_cost(
    partitioner: PartitionerState, v: Value, local: Sharding, past: Callable | None = None
) -> float:
    """Wire bytes to move v from `local` into every sharding its consumers will ask for
    (what they ask depends on propagation only: the passes' memo keeps the answer). With
    `past` (bytes -> past the caller's budget?), a floor past it, once the bytes so far and
    the least the next move may cost (plan_floor) are: that move is not planned, and the
    floor not kept (a whole sum is)."""
    known, key = partitioner.memo.asked, (v, local)
    found = known.get(key)
    if found is None:
        found = 0.0
        for t in partitioner.wanted(v):
            if past is not None and past(floor := found + plan_floor(local, t, v.shape, v.dtype)):
                return floor
            found += cached_plan(local, t, v.shape, v.dtype).wire_bytes
        known[key] = found
    return found


def handoff_cost(
    partitioner: PartitionerState, v: Value, local: Sharding, past: Callable | None = None
) -> float:
    """The cheaper of moving v to what is asked and letting v's only reader split as `local`
    implies (its other operands fetched, its results moved to what is asked of them). The
    other operands are priced only where the reader's halos and onward moves alone cost less
    than what is asked: fetches only add bytes. With `past` (bytes -> past the caller's
    budget?), the moves to what is asked (of v; of the reader's results) are planned only
    while their way's bytes may stay within the budget (asked_cost): a way cut short is past
    it, a floor of its bytes, so the answer is either exact or past the budget too."""
    asked, reader = handoff_plan(partitioner, v, local, past)
    if reader is None:
        return asked
    halo, others, onward = reader
    if asked <= halo + onward:  # the reader's other operands can only add bytes: no plan
        return asked  # for them (nor a read of the pass's state)
    fetched = sum(_estimated_fetch(partitioner, u, target) for u, target in others)
    return min(asked, halo + fetched + onward)


def handoff_plan(
    partitioner: PartitionerState, v: Value, local: Sharding, past: Callable | None = None
) -> tuple:
    """What handoff_cost weighs that depends on propagation alone (the passes' memo keeps
    it): the bytes to move v to what is asked and, where its only reader may take it as it
    is, (that reader's halo bytes, (operand, sharding) of each other operand it would fetch,
    the bytes to hand its results on); else None. With `past`, the bytes to what is asked
    and those handed on are priced until past() holds for them; a plan so cut is not kept."""
    known, key = partitioner.memo.handoffs, handoff_key(v, local)
    found = known.get(key)
    if found is None:
        found = _handoff_plan(partitioner, v, local, past)
        if past is None or _whole(found, past):
            known[key] = found
    return found


def handoff_key(v: Value, local: Sharding) -> tuple:
    """handoff_plan's memo key: `local` as written, not only as a layout (Shardings that
    differ in size-1 mesh axes alone are equal, but the reader's split follows the names)."""
    return v, local, local.spec, local.unreduced


def _whole(plan: tuple, past: Callable) -> bool:
    """Was nothing of a handoff plan made under `past` cut short? (A part cut short is past
    the budget; one that is not past it is whole.)"""
    asked, reader = plan
    return not past(asked) and (reader is None or not past(reader[0] + reader[2]))


def _handoff_plan(
    partitioner: PartitionerState, v: Value, local: Sharding, past: Callable | None = None
) -> tuple:
    asked = asked_cost(partitioner, v, local, past)
    reader = sole_reader(partitioner, v)
    if reader is None or asked == 0 or local.unreduced:  # partial sums: summed first
        return asked, None
    q, pos = reader
    fa = q.sanitize(q.from_tensor(q.rule.operands[pos], local))
    if not fa:
        return asked, None
    others = tuple(
        (u, q.operand_sharding(fa, i))
        for i, u in enumerate(q.eqn.inputs)
        if isinstance(u, Value) and u is not v
    )
    halo = q.halo_bytes(fa)
    onward_past = past and functools.partial(past_after, past, halo)  # after the halos
    onward = q.handoff_bytes(fa, functools.partial(asked_cost, partitioner), onward_past)
    return asked, (halo, others, onward)


def sole_reader(partitioner: PartitionerState, v: Value) -> tuple[EquationSplit, int] | None:
    """(the split of v's only consumer, v's operand position), for a value read once by a live
    equation that is not an annotation (those keep what the user wrote) nor an output. Which
    reader that is depends on the program alone: the passes' memo keeps it."""
    known = partitioner.memo.readers
    found = known.get(v, ())  # () never kept: a reader is a tuple or None
    if found == ():
        found = known[v] = _sole_reader(partitioner, v)
    return found and (partitioner.split(found[0]), found[1])  # a windowed op's split: afresh


def _sole_reader(p: PartitionerState, v: Value) -> tuple | None:
    readers = p.program.consumers.get(v, ())
    if v in p.outputs or len(readers) != 1:
        return None
    eqn, pos = readers[0]
    if eqn not in p.live_set or eqn in p.deferred or entry_for(eqn).identity:
        return None
    return eqn, pos


def _estimated_fetch(partitioner: PartitionerState, u: Value, target: Sharding) -> float:
    """Fetching u into `target`: from what exists, or (not made yet) its propagated sharding."""
    if u in partitioner.versions:
        return partitioner.fetch_cost(u, target)
    return cached_plan(partitioner.prop.sharding(u), target, u.shape, u.dtype).wire_bytes
