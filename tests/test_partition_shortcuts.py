"""Shortcuts in the partitioner's own bookkeeping (partitioner.Partitioner) keep every plan as
it was. A version of a value held in the very Sharding object a consumer asks for (the splits
keep one object per layout: EquationSplit.sharding) costs nothing and is read as it is,
without asking the planner (Partitioner.per_trip, fetch). The reference asks the planner for
every version (the slow way, kept here): the plan kept, its per-device program, notes, costs
and gather-or-reduce records must be the same on the zoo (with its chip and sharing options),
the training steps, the keras-hub models and random programs (tests/fuzz_programs.py)."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build
from test_pass_memo import assert_same_as_reference

import gspmd_viz as gv
from gspmd_viz.core.partition import control_flow, partitioner, remake_scalars
from gspmd_viz.core.spmd.instructions import Reshard
from gspmd_viz.zoo import examples, training

SLOW = HealthCheck.too_slow


def _per_trip_planned(self, v, version, target):
    """Partitioner.per_trip asking the planner for every version."""
    cost = partitioner.cached_plan(version[0], target, v.shape, v.dtype).wire_bytes
    loop = cost and not self.every_trip and self.trips > 1
    return cost / self.trips if loop and control_flow.runs_once(self, version[1]) else cost


def _fetch_planned(self, v, target, consumer):
    """Partitioner.fetch asking the planner for every fetch."""
    versions = self.versions[v]
    if len(versions) > 1:
        versions = [min(versions, key=lambda version: self.per_trip(v, version, target))]
    src, name = versions[0]
    plan = partitioner.cached_plan(src, target, v.shape, v.dtype)
    if not plan.steps:
        return name
    if plan.wire_bytes and (how := remake_scalars.remade_split(self, v, target)):
        return remake_scalars.remake(self, v, target, how)
    dst = self.fresh(v.name)
    self.instructions.append(Reshard(v, name, dst, plan, consumer))
    self.versions[v].append((target, dst))
    return dst


REFERENCES = (
    (partitioner.Partitioner, "per_trip", _per_trip_planned),
    (partitioner.Partitioner, "fetch", _fetch_planned),
)


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize("kw", [{}, {"chip": None}, {"share_idle": False}])
def test_zoo_plans_are_those_that_ask_the_planner_every_time(name, kw):
    ex = examples.get(name)
    assert_same_as_reference(gv.propagate(gv.trace(ex.fn, *ex.args)), REFERENCES, **kw)


@pytest.mark.parametrize("specs", ["DP_SPECS", "TWO_D_SPECS"])
def test_training_step_plans_are_those_that_ask_the_planner_every_time(specs):
    step = training.make_step(gv.Mesh({"x": 2, "y": 4}), getattr(training, specs))
    params, opt_state, batches = training.init()
    prop = gv.propagate(gv.trace(step, params, opt_state, batches(0)))
    assert_same_as_reference(prop, REFERENCES)


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_plans_are_those_that_ask_the_planner_every_time(name):
    f, args = build(name)
    assert_same_as_reference(gv.propagate(gv.trace(f, *args)), REFERENCES)


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_plans_are_those_that_ask_the_planner_every_time(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)), REFERENCES)


def test_most_asks_are_for_the_layout_object_held(monkeypatch):
    """Not vacuous: in llama_kh, most of the reference's asks to the planner are for a version
    held in the Sharding object asked for, and the shortcut asks the planner for exactly the
    others."""
    f, args = build("llama_kh")
    prop = gv.propagate(gv.trace(f, *args))
    asks = []
    real = partitioner.cached_plan

    def counted(src, dst, shape, dtype):
        asks.append(src is dst)
        return real(src, dst, shape, dtype)

    monkeypatch.setattr(partitioner, "cached_plan", counted)
    gv.partition(prop)
    shortcut, asks[:] = list(asks), []
    for owner, name, reference in REFERENCES:
        monkeypatch.setattr(owner, name, reference)
    gv.partition(prop)
    assert sum(asks) > len(asks) / 2
    assert not any(shortcut)
    assert len(shortcut) == len(asks) - sum(asks)
