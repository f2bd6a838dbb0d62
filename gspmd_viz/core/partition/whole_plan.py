"""`best_plan(prop)`: up to four whole plans, one kept. Each equation choosing its cheapest split
(greedy, one equation at a time) against every equation taking propagation's split, the plan
XLA's partitioner emits. A greedy choice can cost more later than it saves: gathering a weight
to keep rows split eight ways, say, then moving those rows at every later matmul. With
`share_idle` (the default), the plan kept is then weighed against the greedy plan in which the
mesh axes an equation leaves idle share its work (`shared`). A kept plan that moves a loop
constant once, before its loop, holding the moved copy through it, is weighed against the same
plan with that move priced every trip, as XLA prices it (`held_less`). Last, a kept plan that
sends more bytes than XLA's and is slower on the chip too gives way to it
(`no_heavier_and_slower`).
"""

from __future__ import annotations

from gspmd_viz.core.cost.plan_cost import with_cost
from gspmd_viz.core.partition.partitioner import Partitioner, PassMemo
from gspmd_viz.core.spmd.run import SPMDProgram
from gspmd_viz.units import format_bytes, format_time

__all__ = ["held_less", "follow_plan", "no_heavier_and_slower", "best_plan", "preferred", "shared"]

CLOSE = 0.05  # the time model is no finer: a follow plan may be this much slower on the chip,
# and a plan that leaves it (or shares idle work) for the same bytes must save more FLOPs
ROOM = 0.10  # a plan that shares idle devices' work may hold this much more peak memory
SLACK = 0.05  # or send and compute this much more, to hold ROOM less

_SHARED = (
    "devices along mesh axes an equation leaves idle share its work: {} on the wire and "
    "{:,.0f} FLOPs per device, where the plan without sharing gave {} and {:,.0f}"
)
_WITHIN = " (more FLOPs for fewer bytes, within the {:,.0f} of propagation's split everywhere)"
_LEANER = " (in {} peak memory where the plan without sharing holds {})"
_EVERY_TRIP = (
    "a loop constant's reshard is priced every trip, as XLA prices it, so the loop moves what "
    "changes per trip instead: {} on the wire and {} peak memory, where moving the constant once "
    "and holding it through the loop gave {} and {}"
)
_FOLLOWED = (
    "every equation takes propagation's split, as XLA does: {} on the wire and {} peak memory, "
    "where choosing each equation's cheapest split alone gave {} and {}"
)
_FASTER = (
    "every equation takes propagation's split, as XLA does: {} on the wire in {} on the chip, "
    "where the plan that did fewer FLOPs or held less took {} and sent {}"
)
_AS_GOOD = (
    "every equation takes propagation's split, as XLA does: {} on the wire and {:,.0f} FLOPs "
    "per device; choosing each equation's cheapest split alone sent and held as much and "
    "saved too few FLOPs to leave it ({:,.0f})"
)


def best_plan(prop, chip=None, share_idle: bool = True):
    """The per-device program (an SPMDProgram) for a propagated program
    (`gv.propagate(gv.trace(f, ...))`); `chip`: a split_cost.ChipCost the splits are timed on
    (gv.partition passes gv.sim's); `share_idle`: weigh the plan of `shared` too."""
    if not hasattr(prop, "factor_axes") or not hasattr(prop, "program"):
        raise TypeError(
            f"gv.partition takes the result of gv.propagate(...), got {type(prop).__name__}"
        )
    memo = PassMemo()  # what every pass over prop would work out alike, worked out once
    if share_idle:  # first: its choices answer for the greedy pass where sharing did not win
        spreader = Partitioner(prop, chip, spread=True, memo=memo)
        spread = with_cost(spreader.run(), chip)
    greedy = made_by = Partitioner(prop, chip, memo=memo)
    start = (spreader.fork or None) if share_idle else None  # where the spread pass's
    # choices stop being the greedy pass's: the greedy pass goes on from there
    chosen = follow = with_cost(greedy.run(start), chip)
    if greedy.departed:
        follow = follow_plan(greedy, chosen, memo)
        chosen = preferred(chosen, follow)
    if share_idle:
        chosen = shared(chosen, spread, follow)
        made_by = spreader if chosen is spread else greedy
    if chosen is not follow and made_by.held:
        every_trip = Partitioner(prop, chip, spread=made_by.spread, every_trip=True, memo=memo)
        chosen = held_less(chosen, with_cost(every_trip.run(), chip))
    kept = no_heavier_and_slower(chosen, follow)
    kept.choices = kept.choices  # its gather-or-reduce records made now; the other plans'
    return kept  # never are (Partitioner.record)


def follow_plan(greedy: Partitioner, greedy_plan, memo: PassMemo):
    """The plan that takes propagation's split everywhere (XLA's), costed. Where the greedy
    pass made every choice the follow pass would (Partitioner.replays_follow), it is the
    greedy plan's program again, without its gather-or-reduce records (a follow pass weighs
    no plans): its instructions, outputs, notes and cost."""
    if greedy.replays_follow():
        plan = greedy_plan
        again = SPMDProgram(plan.prop, plan.instructions, plan.outputs, plan.notes)
        again.cost = plan.cost
        return again
    follow = Partitioner(greedy.prop, greedy.chip, follow=True, memo=memo)
    return with_cost(follow.run(), greedy.chip)


def held_less(kept, every_trip):
    """`every_trip` (the plan that prices a loop constant's reshard every trip, so moves what
    changes per trip rather than hold a moved copy of the constant through the loop) when it
    holds ROOM less peak memory for at most SLACK more wire bytes and FLOPs (`_leaner`); else
    `kept`. A moved weight costs its bytes once but its memory for the whole loop."""
    if not _leaner(every_trip.cost, kept.cost):
        return kept
    a, b = kept.cost, every_trip.cost
    sizes = (b.wire_bytes, b.peak_bytes, a.wire_bytes, a.peak_bytes)
    every_trip.notes += (_EVERY_TRIP.format(*map(format_bytes, sizes)),)
    return every_trip


def no_heavier_and_slower(kept, follow):
    """`kept`, unless it sends more wire bytes than `follow` (XLA's plan) and is also more than
    CLOSE slower on the chip: the FLOPs or memory it saves did not buy time. Then `follow`,
    which says why in its notes."""
    a, b = kept.cost, follow.cost
    if kept is follow or a.wire_bytes <= b.wire_bytes or not _slower(a, b):
        return kept
    times = (format_time(b.time_s), format_time(a.time_s))
    follow.notes += (
        _FASTER.format(format_bytes(b.wire_bytes), *times, format_bytes(a.wire_bytes)),
    )
    return follow


def shared(plain, spread, follow=None):
    """Of two SPMDPrograms, `plain` when `spread` (idle mesh axes share the work) is more than
    CLOSE slower on the chip and saves no more than CLOSE of the FLOPs: the collectives sharing
    adds cost more time than the repeated work. Else `spread` when it sends no more wire bytes
    and does no more FLOPs, fewer bytes or more than CLOSE fewer FLOPs, in at most ROOM more
    peak memory; or when it holds ROOM less memory for at most SLACK more bytes and FLOPs;
    or when it sends fewer bytes in no more memory and does no more FLOPs than `follow`, the
    plan that takes propagation's split everywhere (XLA's; `plain` when omitted). Else `plain`.
    Each equation sees only one reader ahead: sharing the work of a forward matmul can leave a
    gradient split where the update must gather it whole, so the whole plans are compared."""
    a, b = plain.cost, spread.cost
    if _slower(b, a) and not _saves_flops(b, a):
        return plain
    ceiling = (follow or plain).cost.flops
    less_work = _fewer((b.wire_bytes, b.flops), (a.wire_bytes, a.flops))
    less_work = less_work and b.peak_bytes <= (1 + ROOM) * a.peak_bytes
    less_work = less_work and (b.wire_bytes < a.wire_bytes or _saves_flops(b, a))
    leaner = _leaner(b, a)
    lighter = b.wire_bytes < a.wire_bytes and b.peak_bytes <= a.peak_bytes and b.flops <= ceiling
    if not (less_work or leaner or lighter):
        return plain
    note = _SHARED.format(format_bytes(b.wire_bytes), b.flops, format_bytes(a.wire_bytes), a.flops)
    if b.flops > a.flops and not leaner:
        note += _WITHIN.format(ceiling)
    if leaner and not less_work:
        note += _LEANER.format(format_bytes(b.peak_bytes), format_bytes(a.peak_bytes))
    spread.notes += (note,)
    return spread


def _slower(plan, than) -> bool:
    """Whether PlanCost `plan` takes more than CLOSE longer on the chip than `than`."""
    return plan.chip is not None and plan.time_s > (1 + CLOSE) * than.time_s


def _leaner(plan, than) -> bool:
    """Whether PlanCost `plan` holds ROOM less peak memory than `than` for at most SLACK more
    wire bytes and FLOPs."""
    return (1 + ROOM) * plan.peak_bytes <= than.peak_bytes and all(
        ours <= (1 + SLACK) * theirs
        for ours, theirs in ((plan.wire_bytes, than.wire_bytes), (plan.flops, than.flops))
    )


def _fewer(ours: tuple, theirs: tuple) -> bool:
    """Whether `ours` is nowhere larger than `theirs` and somewhere smaller."""
    return ours != theirs and all(o <= t for o, t in zip(ours, theirs, strict=True))


def _saves_flops(plan, than) -> bool:
    """Whether PlanCost `plan` does more than CLOSE fewer FLOPs per device than `than`."""
    return plan.flops < (1 - CLOSE) * than.flops


def preferred(greedy, follow):
    """Of two SPMDPrograms, `follow` when it is not slower on the chip by more than CLOSE and
    sends no more wire bytes and holds no more peak memory, one of them less, or both the same
    while greedy saves no more than CLOSE of its FLOPs; else `greedy`. The kept follow plan
    says why in its notes."""
    a, b = greedy.cost, follow.cost
    if _slower(b, a):
        return greedy
    greedy_sizes, follow_sizes = (a.wire_bytes, a.peak_bytes), (b.wire_bytes, b.peak_bytes)
    if _fewer(follow_sizes, greedy_sizes):
        sizes = (b.wire_bytes, b.peak_bytes, a.wire_bytes, a.peak_bytes)
        follow.notes += (_FOLLOWED.format(*map(format_bytes, sizes)),)
        return follow
    if follow_sizes == greedy_sizes and not _saves_flops(a, b):
        follow.notes += (_AS_GOOD.format(format_bytes(b.wire_bytes), b.flops, a.flops),)
        return follow
    return greedy
