"""The passes of one gv.partition share their work (partitioner.PassMemo): a choice one pass
made is reused by another that holds the values it read in the same layouts, and by a twin
equation (partition/twins.py: the same signature, the values in the same places in the same
layouts; layer 2 of a decoder is costed as layer 1 was). The references are the chooser
without the memo (choose_split.choose on every equation of every pass) and the memo without
twins (each equation's choices kept for itself alone): the plan kept, its per-device program,
notes, costs and gather-or-reduce records must be the same, on the zoo, the training steps,
the keras-hub models and random programs (tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.choice.choose_split import choose
from gspmd_viz.core.partition import partitioner, twins
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.zoo import examples, training

SLOW = HealthCheck.too_slow


def _unremembered(self, eqn, splits):
    return choose(splits, self)[:2]


REFERENCES = (  # what each reference replaces, with what
    (partitioner.Partitioner, "choice", _unremembered),
    (twins, "signature", lambda p, eqn: ("alone", eqn)),
)


def _text(spmd) -> str:
    return "\n".join([spmd.per_device_text(), *spmd.notes, str(spmd.cost), repr(spmd.choices)])


def assert_same_as_reference(prop, **kw):
    ours = _text(gv.partition(prop, **kw))
    for owner, name, reference in REFERENCES:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(owner, name, reference)
            assert _text(gv.partition(prop, **kw)) == ours, name


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize("kw", [{}, {"chip": None}, {"share_idle": False}])
def test_zoo_plans_are_those_of_the_chooser_without_memo(name, kw):
    ex = examples.get(name)
    assert_same_as_reference(gv.propagate(gv.trace(ex.fn, *ex.args)), **kw)


@pytest.mark.parametrize("specs", ["DP_SPECS", "TWO_D_SPECS"])
def test_training_step_plans_are_those_of_the_chooser_without_memo(specs):
    step = training.make_step(gv.Mesh({"x": 2, "y": 4}), getattr(training, specs))
    params, opt_state, batches = training.init()
    prop = gv.propagate(gv.trace(step, params, opt_state, batches(0)))
    assert_same_as_reference(prop)


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_plans_are_those_of_the_chooser_without_memo(name):
    f, args = build(name)
    assert_same_as_reference(gv.propagate(gv.trace(f, *args)))


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_plans_are_those_of_the_chooser_without_memo(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)))


def test_the_greedy_pass_takes_most_choices_from_the_spread_pass(monkeypatch):
    """Not vacuous: after the pass that lets idle axes share work, the greedy pass asks the
    chooser again only where sharing won or the layouts it read differ."""
    ex = examples.get("transformer_block")
    prop, chip = gv.propagate(gv.trace(ex.fn, *ex.args)), chip_cost("tpu-v3")
    calls = []
    real = partitioner.choose
    monkeypatch.setattr(partitioner, "choose", lambda *a: calls.append(1) or real(*a))
    memo = partitioner.PassMemo()
    partitioner.Partitioner(prop, chip, spread=True, memo=memo).run()
    asked_by_spread = len(calls)
    partitioner.Partitioner(prop, chip, memo=memo).run()
    asked_by_greedy = len(calls) - asked_by_spread
    assert asked_by_spread > 10
    assert asked_by_greedy < asked_by_spread / 2


def test_a_layer_takes_most_choices_from_the_layer_before(monkeypatch):
    """Not vacuous: in a 2-layer keras-hub llama, the pass that chooses every equation asks
    the chooser again for fewer than half of them (twins.py)."""
    f, args = build("llama")
    prop, chip = gv.propagate(gv.trace(f, *args)), chip_cost("tpu-v3")
    calls = []
    real = partitioner.choose
    monkeypatch.setattr(partitioner, "choose", lambda *a: calls.append(1) or real(*a))
    partitioner.Partitioner(prop, chip, spread=True).run()
    assert len(calls) < len(prop.program.equations) / 2
