"""Equations that differ only in their values' names are one kind (Program.kinds,
records.equation_key): one factor rule is made per kind (registry.program_rules, which
propagation reads) and the partitioner's twins (partition/twins.py: `static`) are told apart
by kind. The reference for the rules is each equation's rule made from the equation alone
(its entry's rule function): every equation's shared rule must equal it, on the zoo, the
keras-hub models and random programs (tests/fuzz_programs.py). The twins' use of kinds is
checked against partitioning without twins in tests/test_pass_memo.py, and params that
compare equal as keys but are not the same param in tests/test_twin_applied.py."""

import numpy as np
import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.program.records import Literal, equation_key
from gspmd_viz.core.rules import registry
from gspmd_viz.zoo import examples

SLOW = HealthCheck.too_slow


def assert_rules_are_each_equations_own(prog) -> None:
    shared = registry.program_rules(prog)
    for eqn, rule in zip(prog.equations, shared, strict=True):
        assert rule == registry.entry_for(eqn).rule(eqn), (eqn.index, eqn.primitive)


@pytest.mark.parametrize("name", sorted(examples.ZOO))
def test_zoo_rules_are_each_equations_own(name):
    ex = examples.get(name)
    assert_rules_are_each_equations_own(gv.trace(ex.fn, *ex.args))


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_rules_are_each_equations_own(name):
    f, args = build(name)
    assert_rules_are_each_equations_own(gv.trace(f, *args))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_program_rules_are_each_equations_own(p):
    assert_rules_are_each_equations_own(gv.trace(p.fn, *p.args))


def test_a_layer_shares_the_rules_of_the_layer_before():
    """Not vacuous: a 2-layer keras-hub llama has fewer than half as many kinds (and rule
    objects) as equations."""
    f, args = build("llama")
    prog = gv.trace(f, *args)
    rules = registry.program_rules(prog)
    kinds = len(set(prog.kinds.values()))
    assert kinds < len(prog.equations) / 2
    assert len({id(rule) for rule in rules}) == kinds


def test_literal_operands_are_part_of_the_kind():
    """x + 1 and x + 2 are different equations, though their types agree."""

    def f(x):
        return x + 1.0, x + 2.0, x + 1.0

    prog = gv.trace(f, np.zeros((4, 4), np.float32))
    adds = [e for e in prog.equations if e.primitive == "add"]
    assert all(isinstance(e.inputs[1], Literal) for e in adds)
    kinds = [prog.kinds[e] for e in adds]
    assert kinds == [kinds[0], kinds[1], kinds[0]] and kinds[0] != kinds[1]
    assert equation_key(adds[0]) == equation_key(adds[2])
