"""Propagation's shortcuts in the visit itself (algorithm.Propagator) give what working
everything out gives: a tensor whose every factor's wanted axes are a prefix of what it holds
keeps its spec without a proposal being worked out (`holds_already`); equations of a kind
share one category and narrow operands, worked out once (`_categories`).
The reference is the propagation with every shortcut off (these, and the reuse of
tests/test_propagation_reuse.py): its steps, conflicts, settled splits and shardings must be
the same, on the zoo, the keras-hub models and random programs (tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import fsdp_dot, programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.core.propagation.record import category, narrow_operands, user_annotations
from gspmd_viz.core.rules.registry import rule_for
from gspmd_viz.zoo import examples

SLOW = HealthCheck.too_slow

# a class-level data descriptor wins over __init__'s assignment: every visit sees no record
_FORGETFUL = property(lambda self: {}, lambda self, value: None)
_NO_SHORTCUTS = {
    "quiet": _FORGETFUL,
    "made": _FORGETFUL,
    "settled_made": _FORGETFUL,
    "holds_already": lambda self, t, rule, wanted: False,
}


def _record(prop) -> tuple:
    return (prop.steps, prop.conflicts, prop.settled, tuple(prop.shardings.items()))


def worked_out_in_full(prog):
    with pytest.MonkeyPatch.context() as m:
        for name, slow in _NO_SHORTCUTS.items():
            m.setattr(algorithm.Propagator, name, slow, raising=False)
        return gv.propagate(prog)


def assert_same_as_reference(prog):
    assert _record(gv.propagate(prog)) == _record(worked_out_in_full(prog))
    assert_categories_are_each_equations_own(prog)


def assert_categories_are_each_equations_own(prog):
    p = algorithm.Propagator(prog, prog.mesh, user_annotations(prog, prog.mesh, None))
    for i, e in enumerate(prog.equations):
        kind = category(rule_for(e), e)
        factors = [t.factors for t in p.tensors[i]]
        narrow = narrow_operands(factors, rule_for(e)) if kind == "broadcasting" else set()
        assert (p.categories[i], p.narrow[i]) == (kind, narrow), e


@pytest.mark.parametrize("name", sorted(examples.ZOO))
def test_zoo_propagation_is_that_of_working_everything_out(name):
    ex = examples.get(name)
    assert_same_as_reference(gv.trace(ex.fn, *ex.args))


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_propagation_is_that_of_working_everything_out(name):
    f, args = build(name)
    assert_same_as_reference(gv.trace(f, *args))


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
