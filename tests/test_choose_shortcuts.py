"""Where both plans of a gather-or-reduce conflict are recorded (choose with `ranked`), choose
still passes over the candidates that cannot win (rank head above the lowest so far, or wire
bytes past it: choose_split._pruning) and records only ranks worked out in full: both plans'
(always ranked in full) and the winner's. The reference ranks every candidate in full, as
choose did before: at every such choice the winner must be the reference's, each rank
recorded the reference's, and both plans and the winner recorded; and the whole plan (its
per-device program, notes, costs and gather-or-reduce records) must be the reference's, on
the zoo (with and without a chip), the keras-hub models and random programs after an FSDP dot
(tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import fsdp_dot, programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build
from test_costing_shortcuts import _unread
from test_pass_memo import _text

import gspmd_viz as gv
from gspmd_viz.core.choice import choose_split
from gspmd_viz.core.partition import partitioner
from gspmd_viz.zoo import examples

_REAL_CHOOSE, _REAL_PRUNING = choose_split.choose, choose_split._pruning


def _pruning_none_where_ranked(splits, also, ranked):
    """The reference: nothing is passed over where ranks are recorded."""
    return None if ranked is not None else _REAL_PRUNING(splits, (), None)


def _every_rank(splits, costs, also, ranked):
    """choose's answer and ranks with the reference's pruning (reads not counted)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(choose_split, "_pruning", _pruning_none_where_ranked)
        return _unread(costs, _REAL_CHOOSE, splits, costs, also, ranked)


def _checked_choose(splits, costs, also=(), ranked=None):
    reference_ranks = None if ranked is None else {}
    reference = _every_rank(splits, costs, also, reference_ranks)
    ours = _REAL_CHOOSE(splits, costs, also, ranked)
    assert ours[0] is reference[0] and ours[1:] == reference[1:]
    if ranked and reference_ranks:  # choose returned early when neither ranked anything
        for fa in (*also, ours[1]) if ours[0] is splits[0] else also:
            assert choose_split.frozen(fa) in ranked
        assert all(reference_ranks[fa] == ranks for fa, ranks in ranked.items())
    return ours


def assert_same_as_every_rank(prop, **kw):
    """Every choice checked against the reference's, and the plan's text the reference's."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(choose_split, "_pruning", _pruning_none_where_ranked)
        reference = _text(gv.partition(prop, **kw))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(partitioner, "choose", _checked_choose)
        assert _text(gv.partition(prop, **kw)) == reference
    assert _text(gv.partition(prop, **kw)) == reference


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize("kw", [{}, {"chip": None}])
def test_zoo_choices_are_those_of_ranking_every_candidate(name, kw):
    ex = examples.get(name)
    assert_same_as_every_rank(gv.propagate(gv.trace(ex.fn, *ex.args)), **kw)


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_choices_are_those_of_ranking_every_candidate(name):
    f, args = build(name)
    assert_same_as_every_rank(gv.propagate(gv.trace(f, *args)))


@settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs(max_steps=2, first=fsdp_dot))
def test_random_choices_are_those_of_ranking_every_candidate(p):
    assert_same_as_every_rank(gv.propagate(gv.trace(p.fn, *p.args)))
