"""A choice made for one equation answers for its twin (partition/twins.py: same signature,
the values in the same places held in the same layouts). The reference is the memo without
twins (each equation's choices kept for itself alone): the plan kept, its per-device program,
notes and costs must be the same, on the zoo, the training steps, the keras-hub models and
random programs (tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.partition import partitioner, twins
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.zoo import examples, training

SLOW = HealthCheck.too_slow


def _text(spmd) -> str:
    return "\n".join([spmd.per_device_text(), *spmd.notes, str(spmd.cost), repr(spmd.choices)])


def assert_same_as_reference(prop, **kw):
    ours = _text(gv.partition(prop, **kw))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(twins, "signature", lambda p, eqn: ("alone", eqn))
        reference = _text(gv.partition(prop, **kw))
    assert ours == reference


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize("kw", [{}, {"chip": None}, {"share_idle": False}])
def test_zoo_plans_are_those_without_twins(name, kw):
    ex = examples.get(name)
    assert_same_as_reference(gv.propagate(gv.trace(ex.fn, *ex.args)), **kw)


@pytest.mark.parametrize("specs", ["DP_SPECS", "TWO_D_SPECS"])
def test_training_step_plans_are_those_without_twins(specs):
    step = training.make_step(gv.Mesh({"x": 2, "y": 4}), getattr(training, specs))
    params, opt_state, batches = training.init()
    assert_same_as_reference(gv.propagate(gv.trace(step, params, opt_state, batches(0))))


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_plans_are_those_without_twins(name):
    f, args = build(name)
    assert_same_as_reference(gv.propagate(gv.trace(f, *args)))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_plans_are_those_without_twins(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)))


def test_a_layer_takes_most_choices_from_the_layer_before(monkeypatch):
    """Not vacuous: in a 2-layer keras-hub llama, the pass that chooses every equation asks
    the chooser again for fewer than half of them."""
    f, args = build("llama")
    prop, chip = gv.propagate(gv.trace(f, *args)), chip_cost("tpu-v3")
    calls = []
    real = partitioner.choose
    monkeypatch.setattr(partitioner, "choose", lambda *a: calls.append(1) or real(*a))
    partitioner.Partitioner(prop, chip, spread=True).run()
    assert len(calls) < len(prop.program.equations) / 2
