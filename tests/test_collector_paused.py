"""gv.propagate and gv.partition pause Python's cyclic garbage collector while they run (a
speed measure: algorithm.collector_paused) and leave it as they found it."""

import gc

import pytest

import gspmd_viz as gv
from gspmd_viz.core.partition import partitioner
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.zoo import examples


@pytest.mark.parametrize("was_on", [True, False])
def test_the_collector_is_off_while_they_run_and_as_it_was_after(monkeypatch, was_on):
    seen = []
    for owner, name in ((algorithm.Propagator, "run"), (partitioner.Partitioner, "run")):
        real = getattr(owner, name)
        monkeypatch.setattr(
            owner, name, lambda self, *a, real=real: seen.append(gc.isenabled()) or real(self, *a)
        )
    ex = examples.get("mlp")
    prog = gv.trace(ex.fn, *ex.args)
    (gc.enable if was_on else gc.disable)()
    try:
        gv.partition(gv.propagate(prog))
        assert gc.isenabled() == was_on
    finally:
        gc.enable()
    assert seen and not any(seen)
