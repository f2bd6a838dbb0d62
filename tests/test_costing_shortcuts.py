"""Costing a split asks for no reshard plan whose bytes cannot change the choice: a candidate
whose fetches alone already cost more than the cheapest split so far stops at that fetch
(EquationSplit.cost with `above`), and handing a result to its only reader skips planning the
reader's other operands when moving the result to what is asked costs no more than the
reader's halos and onward moves alone (lookahead.handoff_cost: those fetches only add bytes).
A candidate's handoffs get the rest of its budget (`past`): a move to what is asked of a value
(lookahead.asked_cost, for the value and for its reader's results) is not planned once the
bytes so far and the least it may cost (choose_split.plan_floor) are past the budget.
The references work every fetch and move out: the plan kept, its per-device program, notes,
costs and gather-or-reduce records must be the same, on the zoo (with its chip and sharing
options), the training steps, the keras-hub models and random programs
(tests/fuzz_programs.py); and at every ask, the bytes must be the reference's (the bytes to
what is asked worked out afresh, the pass memo's forgotten), or both past the budget (a cut
cost: both above `above`); what the memo keeps of a handoff must be the whole plan worked out
afresh (it keeps no cut sum); and every floor must be at most its plan's bytes."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build
from test_pass_memo import _text
from test_pass_memo import assert_same_as_reference as same_as_pass_memo_reference

import gspmd_viz as gv
from gspmd_viz.core.choice import choose_split
from gspmd_viz.core.partition import lookahead
from gspmd_viz.zoo import examples, training

_REAL_COST = choose_split.EquationSplit.cost


def _cost_in_full(self, fa, costs, above=None):
    """Every fetch and handoff of the split priced, whatever `above` says."""
    return _REAL_COST(self, fa, costs)


def _handoff_cost_in_full(partitioner, v, local, past=None):
    """The cheaper of moving v to what is asked and its reader taking it as it is, with the
    reader's other operands always priced, and every move, whatever `past` says."""
    asked, reader = lookahead.handoff_plan(partitioner, v, local)
    if reader is None:
        return asked
    halo, others, onward = reader
    fetched = sum(lookahead._estimated_fetch(partitioner, u, t) for u, t in others)
    return min(asked, halo + fetched + onward)


def _asked_cost_in_full(partitioner, v, local, past=None):
    return _REAL_ASKED(partitioner, v, local)


REFERENCES = (
    (choose_split.EquationSplit, "cost", _cost_in_full),
    (lookahead, "handoff_cost", _handoff_cost_in_full),
    (lookahead, "asked_cost", _asked_cost_in_full),
)


def _unread(partitioner, fn, *args):
    """fn(*args) without adding to the reads of the choice being made (Versions.reads)."""
    reads, partitioner.versions.reads = partitioner.versions.reads, None
    try:
        return fn(*args)
    finally:
        partitioner.versions.reads = reads


def _afresh(partitioner, fn, *args):
    """fn(*args) unread, with the pass memo's asked and handoff bytes forgotten meanwhile."""
    memo = partitioner.memo
    kept, (memo.asked, memo.handoffs) = (memo.asked, memo.handoffs), ({}, {})
    try:
        return _unread(partitioner, fn, *args)
    finally:
        memo.asked, memo.handoffs = kept


def _checked_cost(self, fa, costs, above=None):
    ours = _REAL_COST(self, fa, costs, above)
    full = _unread(costs, _REAL_COST, self, fa, costs)
    assert ours == full or (above is not None and ours > above and full > above)
    return ours


def _same_or_both_past(ours: float, full: float, past) -> float:
    """ours, checked: the reference's bytes, or (with a budget `past`) both past it."""
    assert ours == full or (past is not None and past(ours) and past(full))
    return ours


def _checked_handoff(partitioner, v, local, past=None):
    ours = _REAL_HANDOFF(partitioner, v, local, past)
    full = _unread(partitioner, _handoff_cost_in_full, partitioner, v, local)
    return _same_or_both_past(ours, full, past)


def _checked_plan(partitioner, v, local, past=None):
    """handoff_plan, and what the memo keeps for this very sharding (asked again or not) the
    plan worked out afresh: a sharding equal to one asked before but naming other size-1
    axes must not get the other's plan (the reader's split follows the names)."""
    ours = _REAL_PLAN(partitioner, v, local, past)
    kept = partitioner.memo.handoffs.get(lookahead.handoff_key(v, local))
    if kept is not None:
        assert kept == _afresh(partitioner, lookahead._handoff_plan, partitioner, v, local)
    return ours


def _checked_asked(partitioner, v, local, past=None):
    ours = _REAL_ASKED(partitioner, v, local, past)
    full = _afresh(partitioner, _REAL_ASKED, partitioner, v, local)
    return _same_or_both_past(ours, full, past)


def _checked_floor(src, dst, shape, dtype):
    floor = _REAL_FLOOR(src, dst, shape, dtype)
    assert floor <= choose_split.cached_plan(src, dst, shape, dtype).wire_bytes
    return floor


_REAL_HANDOFF, _REAL_ASKED = lookahead.handoff_cost, lookahead.asked_cost
_REAL_PLAN, _REAL_FLOOR = lookahead.handoff_plan, lookahead.plan_floor
CHECKS = (
    (choose_split.EquationSplit, "cost", _checked_cost),
    (lookahead, "handoff_cost", _checked_handoff),
    (lookahead, "asked_cost", _checked_asked),
    (lookahead, "handoff_plan", _checked_plan),
    (lookahead, "plan_floor", _checked_floor),
)


def assert_same_as_reference(prop, **kw):
    ours = same_as_pass_memo_reference(prop, REFERENCES, **kw)
    with pytest.MonkeyPatch.context() as m:  # every ask answered as the reference answers it
        for owner, name, check in CHECKS:
            m.setattr(owner, name, check)
        assert _text(gv.partition(prop, **kw)) == ours


def _traced(kind: str, name: str):
    """(function, arguments) of a zoo example, a training step (by its specs) or a keras-hub
    model."""
    if kind == "zoo":
        ex = examples.get(name)
        return ex.fn, ex.args
    if kind == "training":
        params, opt_state, batches = training.init()
        mesh = gv.Mesh({"x": 2, "y": 4})
        return training.make_step(mesh, getattr(training, name)), (params, opt_state, batches(0))
    return build(name)


CASES = [
    *[("zoo", name, kw) for name in sorted(examples.ZOO) for kw in ({}, {"chip": None})],
    *[("zoo", name, {"share_idle": False}) for name in sorted(examples.ZOO)],
    *[("training", specs, {}) for specs in ("DP_SPECS", "TWO_D_SPECS")],
    *[("keras-hub", name, {}) for name in MODELS],
]


@pytest.mark.parametrize(("kind", "name", "kw"), CASES)
def test_plans_are_those_of_costing_every_fetch(kind, name, kw):
    f, args = _traced(kind, name)
    assert_same_as_reference(gv.propagate(gv.trace(f, *args)), **kw)


@settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs())
def test_random_plans_are_those_of_costing_every_fetch(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)))
