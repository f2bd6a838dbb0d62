"""Shortcuts of choose_split.choose, checked against ranking every candidate in full with
every bytes held worked out at once (the references, kept here). Where both plans of a
gather-or-reduce conflict are recorded (choose with `ranked`), choose still passes over the
candidates that cannot win (rank head above the lowest so far, or wire bytes past it:
choose_split._pruning) and records only ranks worked out in full: both plans' (always
ranked in full) and the winner's.
The bytes a candidate holds (rank's last entry) are worked out only when a tie reads them,
where no split can be over the chip's memory (split_cost.HeldBytes). At every choice the
winner must be the reference's, each rank recorded the reference's, and both plans and the
winner recorded; the whole plan (its per-device program, notes, costs and gather-or-reduce
records) must be the reference's, on the zoo (with no chip, and chips so small that some
splits do not fit), the keras-hub models and random programs after an FSDP dot
(tests/fuzz_programs.py). What the operands promise is worked out only where a rule may
repeat work, weighing only the factors some operand splits: every promise must be that of
weighing every factor (and the choices those of always working it out)."""

import dataclasses

import pytest
from fuzz_programs import fsdp_dot, programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build
from test_costing_shortcuts import _unread
from test_pass_memo import _every_key, _text

import gspmd_viz as gv
from gspmd_viz.core.choice import choose_split
from gspmd_viz.core.cost import split_cost
from gspmd_viz.core.partition import partitioner
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.zoo import examples

_REAL_CHOOSE = choose_split.choose


def _head_ranker_eager(q, costs, promise, lazy=False):
    """The reference: every candidate's bytes held worked out at once, and held against the
    chip's memory."""
    count = split_cost.twice_counter(q, costs, promise)
    hbm = None if costs.chip is None else costs.chip.hbm_bytes

    def head(fa: dict) -> tuple:
        held = split_cost.local_bytes(q, fa)
        over = hbm is not None and held > hbm
        return (over, count(fa) * split_cost.idle_on_padding(q, fa)), held

    return head


def _promise_always(splits, costs, repeating):
    """The reference: what the operands promise worked out for every choice."""
    return split_cost.promised_by_any(splits, costs)


def _promised_every_factor(q, costs):
    """The reference: split_cost.promised weighing every factor an operand holds, split or
    not, each operand's bytes read whatever the op."""
    found: dict[int, list] = {}
    arrived = split_cost.arrivals(q, costs)
    axes = split_cost._split_by_every_operand([split for *_, split in arrived])
    for v, tensor, sharding, split in arrived:
        axes |= set(sharding.unreduced)
        for f in {f for fs in tensor for f in fs}:
            found.setdefault(f, []).append((set(split.get(f, ())), split_cost._value_bytes(v)))
    windowed = any(f.kind.startswith("windowed") for f in q.rule.factors)
    for held in found.values():
        sets = [s for s, _ in held]
        agreed = set.intersection(*sets)
        if agreed or all(sets) or (windowed and split_cost._split_holder_bigger(held)):
            axes |= agreed or set.union(*sets)
    return axes


REFERENCES = (
    (split_cost, "promised", _promised_every_factor),  # factors no operand splits weighed
    (choose_split, "_promise", _promise_always),  # even where no rule may repeat work
    (choose_split, "_lowest", _every_key),  # every candidate ranked in full
    (choose_split, "head_ranker", _head_ranker_eager),
    (split_cost, "head_ranker", _head_ranker_eager),  # rank_head's too
)


def _every_rank(splits, costs, also, ranked):
    """choose's answer and ranks the references' way (reads not counted)."""
    with pytest.MonkeyPatch.context() as m:
        for owner, name, reference in REFERENCES:
            m.setattr(owner, name, reference)
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
        for owner, name, reference in REFERENCES:
            m.setattr(owner, name, reference)
        reference = _text(gv.partition(prop, **kw))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(partitioner, "choose", _checked_choose)
        assert _text(gv.partition(prop, **kw)) == reference
    assert _text(gv.partition(prop, **kw)) == reference


def _small_chip(hbm_bytes: int):
    return dataclasses.replace(chip_cost("tpu-v3"), hbm_bytes=hbm_bytes)


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize(
    "kw", [{}, {"chip": None}, {"chip": _small_chip(2**12)}, {"chip": _small_chip(2**14)}]
)
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


_REAL_PROMISED = split_cost.promised


def _checked_promised(q, costs):
    ours = _REAL_PROMISED(q, costs)
    assert ours == _promised_every_factor(q, costs)
    return ours


def assert_promises_of_every_factor(prop):
    """Every promise worked out in a partition (every pass, every rule) the reference's."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(split_cost, "promised", _checked_promised)
        gv.partition(prop)


@pytest.mark.parametrize("name", sorted(examples.ZOO) + list(MODELS))
def test_promises_are_those_of_weighing_every_factor(name):
    ex = examples.get(name) if name in examples.ZOO else None
    f, args = (ex.fn, ex.args) if ex else build(name)
    assert_promises_of_every_factor(gv.propagate(gv.trace(f, *args)))


@settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs(max_steps=3))
def test_random_promises_are_those_of_weighing_every_factor(p):
    assert_promises_of_every_factor(gv.propagate(gv.trace(p.fn, *p.args)))
