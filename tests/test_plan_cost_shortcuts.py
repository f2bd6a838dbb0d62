"""Plan costing reads each local op's result bytes off the op (Compute.result_bytes: set where
the partitioner makes the op, which then serves the equation's twins in every pass). The
reference works them out from the op's own result shardings and results: every local op of
every plan costed must carry those bytes, and every plan's cost (peak memory above all) must
be the one costing gets working them out, on the zoo, the keras-hub models and random
programs (tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.cost import plan_cost
from gspmd_viz.core.partition import whole_plan
from gspmd_viz.core.spmd.instructions import Compute
from gspmd_viz.core.spmd.loops_branches import inner_instructions
from gspmd_viz.zoo import examples


def _worked_out(ins: Compute) -> tuple[int, ...]:
    """The reference: each result's local shard bytes from the op's own shardings."""
    outs = zip(ins.shardings, ins.eqn.outputs, strict=True)
    return tuple(s.shard_bytes(v.shape, v.dtype) for s, v in outs)


def _local_ops(instructions):
    for ins in instructions:
        if isinstance(ins, Compute):
            yield ins
        else:
            yield from _local_ops(inner_instructions(ins))


def _costed_plans(prop) -> list:
    """(plan, chip) of every plan gv.partition costs."""
    costed = []
    with pytest.MonkeyPatch.context() as mp:
        real = whole_plan.with_cost
        noted = lambda spmd, chip: costed.append((spmd, chip)) or real(spmd, chip)  # noqa: E731
        mp.setattr(whole_plan, "with_cost", noted)
        gv.partition(prop)
    return costed


def assert_same_as_reference(prop) -> int:
    """Every costed plan's local ops keep the reference's bytes, and its cost is the one worked
    out without them; returns how many ops kept bytes (the shortcut taken)."""
    costed, kept = _costed_plans(prop), 0
    for spmd, chip in costed:
        for ins in _local_ops(spmd.instructions):
            if ins.result_bytes is not None:
                assert ins.result_bytes == _worked_out(ins), ins.text()
                kept += 1
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(plan_cost, "result_bytes", _worked_out)
            assert plan_cost.plan_cost(spmd, chip) == spmd.cost
    return kept


@pytest.mark.parametrize("name", examples.ZOO)
def test_zoo_plan_costs_are_those_worked_out_afresh(name):
    ex = examples.get(name)
    assert assert_same_as_reference(gv.propagate(gv.trace(ex.fn, *ex.args))) > 0


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_plan_costs_are_those_worked_out_afresh(name):
    f, args = build(name)
    assert assert_same_as_reference(gv.propagate(gv.trace(f, *args))) > 0


@settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs())
def test_random_plan_costs_are_those_worked_out_afresh(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)))
