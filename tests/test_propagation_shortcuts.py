"""Propagation's shortcuts in the visit itself (algorithm.Propagator) give what working
everything out gives: a tensor whose every factor's wanted axes are a prefix of what it holds
keeps its spec without a proposal being worked out (`holds_already`); a factor that gets
no axes is left out of what an equation wants (it would claim last and take nothing), and
its tensors' holdings are not merged when none holds an axis, and one tensor's axes are
taken as they are when it alone holds some (`wanted`);
equations of a kind share one category and narrow operands, worked out once (`_categories`).
The reference is the propagation with every shortcut off (these, and the reuse of
tests/test_propagation_reuse.py): its steps, conflicts, settled splits and shardings must be
the same, on the zoo, the keras-hub models and random programs (tests/fuzz_programs.py)."""

from types import SimpleNamespace

import pytest
from fuzz_programs import fsdp_dot, programs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from library_models import build
from propagation_reference import FORGETFUL, PROGRAMS, propagated_with, record

import gspmd_viz as gv
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.core.propagation.record import category, narrow_operands, user_annotations
from gspmd_viz.core.rules.registry import rule_for

SLOW = HealthCheck.too_slow


def _source_by_reference(held, f, axes):
    holders = [(k, t) for k, (t, h) in enumerate(held) if f in h and h[f][: len(axes)] == axes]
    return min(holders, key=lambda kt: (-kt[1].size, kt[0]))


def _wanted_by_reference(self, i, pass_only=False, split=False, skip=frozenset()) -> dict:
    """Propagator.wanted reading every factor: one that gets no axes claims last (in factor
    order) with no source."""
    eqn, rule = self.program.equations[i], self.rules[i]
    held = [(t, self.held_now(rule, t)) for k, t in enumerate(self.tensors[i]) if k not in skip]
    merged, order = {}, {}
    for f, factor in enumerate(rule.factors):
        cands = [h[f] for _, h in held if f in h]
        waits = factor.kind == "need_replication" or (pass_only and factor.kind != "pass")
        if cands and not waits:
            axes = self.merge(eqn, rule, f, cands)
            if not axes:
                merged[f], order[f] = ((), None), (0, 0, len(held), f)
                continue
            k, src = _source_by_reference(held, f, axes)
            most = -self._shards(axes) if self.categories[i] == "pass-through" else 0
            order[f] = (-src.size, most, k, f)
            if split:
                others = (algorithm._held_by_others(h, f) for _, h in held if f in h)
                axes = algorithm._prefix_free(axes, set().union(*others))
            merged[f] = (axes, src)
    return {f: merged[f] for f in sorted(merged, key=order.get)}


_NO_SHORTCUTS = {
    "quiet": FORGETFUL,
    "made": FORGETFUL,
    "settled_made": FORGETFUL,
    "holds_already": lambda self, t, rule, wanted: False,
    "wanted": _wanted_by_reference,
}


def assert_same_as_reference(prog):
    assert record(gv.propagate(prog)) == record(propagated_with(prog, _NO_SHORTCUTS))
    assert_categories_are_each_equations_own(prog)


def assert_categories_are_each_equations_own(prog):
    p = algorithm.Propagator(prog, prog.mesh, user_annotations(prog, prog.mesh, None))
    for i, e in enumerate(prog.equations):
        kind = category(rule_for(e), e)
        factors = [t.factors for t in p.tensors[i]]
        narrow = narrow_operands(factors, rule_for(e)) if kind == "broadcasting" else set()
        assert (p.categories[i], p.narrow[i]) == (kind, narrow), e


@pytest.mark.parametrize("make", PROGRAMS)
def test_propagation_is_that_of_working_everything_out(make):
    assert_same_as_reference(make())


@settings(max_examples=80, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_propagation_is_that_of_working_everything_out(p):
    assert_same_as_reference(gv.trace(p.fn, *p.args))


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs(first=fsdp_dot))
def test_random_propagation_after_an_fsdp_dot_is_that_of_working_everything_out(p):
    assert_same_as_reference(gv.trace(p.fn, *p.args))


def test_most_proposals_are_answered_by_what_the_tensor_holds(monkeypatch):
    """Not vacuous: in a 2-layer keras-hub llama, most tensors a visit could write hold
    their wanted axes already (366 of 482)."""
    f, args = build("llama")
    prog = gv.trace(f, *args)
    answers = []
    real = algorithm.Propagator.holds_already
    monkeypatch.setattr(
        algorithm.Propagator, "holds_already", lambda *a: answers.append(real(*a)) or answers[-1]
    )
    gv.propagate(prog)
    assert sum(answers) > len(answers) / 2


_HOLDINGS = st.dictionaries(
    st.integers(0, 2), st.lists(st.sampled_from("xyz"), max_size=3, unique=True).map(tuple)
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), _HOLDINGS), min_size=1, max_size=4), st.data())
def test_source_is_the_biggest_holder_earliest_on_a_tie(tensors, data):
    held = [(SimpleNamespace(size=size), h) for size, h in tensors]
    pairs = [(f, h) for _, h in held for f in h if h[f]]
    assume(pairs)
    f, h = data.draw(st.sampled_from(pairs))
    axes = h[f][: data.draw(st.integers(1, len(h[f])))]  # wanted asks only for some axes
    assert algorithm._source(held, f, axes) == _source_by_reference(held, f, axes)
