"""RuleBuilder.rule's shortcut gives what renumbering always gives: when the factors first
appear in the tensors' dims in index order (`_in_order`), the rule keeps the factors as they
were made. The reference renumbers every rule in order of first appearance (unseen factors
last, in index order), on hypothesis draws and on every rule of the keras-hub models."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.rules import factors
from gspmd_viz.core.rules.factors import Factor, FactorRule, RuleBuilder
from gspmd_viz.core.rules.registry import entry_for


def _renumbered(made: list[Factor], operands, results) -> FactorRule:
    """The rule with factors renumbered and named in order of first appearance, always."""
    tensors = [tuple(tuple(d) for d in t) for t in (*operands, *results)]
    order = list(dict.fromkeys(f for t in tensors for d in t for f in d))
    order += [f for f in range(len(made)) if f not in order]
    new = {old: i for i, old in enumerate(order)}
    fs = tuple(
        Factor(factors._letter(i), made[old].size, made[old].kind) for i, old in enumerate(order)
    )
    tensors = [tuple(tuple(new[f] for f in d) for d in t) for t in tensors]
    return FactorRule(fs, tuple(tensors[: len(operands)]), tuple(tensors[len(operands) :]))


def _tensors(n: int):
    dim = st.lists(st.integers(0, n - 1), max_size=2, unique=True).map(tuple)
    return st.lists(st.lists(dim, max_size=3), min_size=1, max_size=3)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.just(n), _tensors(n), _tensors(n))))
def test_rule_is_that_of_renumbering(drawn):
    n, operands, results = drawn
    b = RuleBuilder()
    for k in range(n):
        b.new(2 + k, "reduction" if k % 2 else "pass")
    assert b.rule(operands, results) == _renumbered(b.factors, operands, results)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_rules_are_those_of_renumbering(name, monkeypatch):
    f, args = build(name)
    made = []
    real = RuleBuilder.rule

    def both(self, operands, results):
        made.append((real(self, operands, results), _renumbered(self.factors, operands, results)))
        return made[-1][0]

    monkeypatch.setattr(RuleBuilder, "rule", both)
    for eqn in gv.trace(f, *args).equations:
        entry_for(eqn).rule(eqn)
    assert made and all(got == want for got, want in made)
