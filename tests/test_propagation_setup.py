"""Propagation's set-up shortcuts (algorithm.Propagator) give what working each equation out
alone gives: an equation's tensors take their factors, side, factor set and size from the
first equation with the same rule object (`places`: program_rules gives twins one rule, and
twins' operands are values or literals alike, of one shape each); kinds number the rule and
the tensors' factors, sides and sizes once per rule object (`_kinds`). The reference works
both out per equation, on the zoo, the keras-hub models and random programs
(tests/fuzz_programs.py)."""

import math

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from propagation_reference import PROGRAMS

import gspmd_viz as gv
from gspmd_viz.core.program.trace import Value
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.core.propagation.record import user_annotations


def _tensors_by_reference(eqn, rule) -> list[tuple]:
    """(value, factors, is_result, factor set, size) of each operand then result that is a value."""
    found = []
    for values, factor_lists, result in (
        (eqn.inputs, rule.operands, False),
        (eqn.outputs, rule.results, True),
    ):
        for v, factors in zip(values, factor_lists, strict=True):
            if isinstance(v, Value):
                found.append((v, factors, result, frozenset(sum(factors, ())), math.prod(v.shape)))
    return found


def _kinds_by_reference(p) -> list[int]:
    """A number per equation for its whole key: rule, per tensor factors, side, size,
    closed, open dims, and which tensors share a value."""
    numbers, rules, kinds = {}, {}, []
    for rule, ts in zip(p.rules, p.tensors, strict=True):
        slots = [t.slot for t in ts]
        shape = tuple((t.factors, t.is_result, t.size, t.closed, t.opened) for t in ts)
        key = (rules.setdefault(rule, len(rules)), shape, tuple(slots.index(k) for k in slots))
        kinds.append(numbers.setdefault(key, len(numbers)))
    return kinds


def assert_setup_is_each_equations_own(prog):
    p = algorithm.Propagator(prog, prog.mesh, user_annotations(prog, prog.mesh, None))
    for eqn, rule, ts in zip(prog.equations, p.rules, p.tensors, strict=True):
        got = [(t.value, t.factors, t.is_result, t.mine, t.size) for t in ts]
        assert got == _tensors_by_reference(eqn, rule), eqn
    assert p.kinds == _kinds_by_reference(p)


@pytest.mark.parametrize("make", PROGRAMS)
def test_setup_is_each_equations_own(make):
    assert_setup_is_each_equations_own(make())


@settings(
    max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs())
def test_random_setup_is_each_equations_own(p):
    assert_setup_is_each_equations_own(gv.trace(p.fn, *p.args))
