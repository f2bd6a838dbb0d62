"""Propagation does not work out again what it worked out already (algorithm.Propagator):
a visit that would repeat the equation's last one on the same specs is skipped (`quiet`), and
an equation of the same kind as one visited before on the same specs (layer 2 of a decoder,
layer 1's) makes the same writes (`made`) and settles on the same split (`settled_made`).
The reference is the propagation that visits every time and works everything out: the steps,
conflicts, settled splits and shardings must be the same, on the zoo, the training steps, the
keras-hub models and random programs (tests/fuzz_programs.py)."""

from types import SimpleNamespace

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from library_models import build
from propagation_reference import FORGETFUL, PROGRAMS, propagated_with, record

import gspmd_viz as gv
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.zoo import examples, training

SLOW = HealthCheck.too_slow
_NO_REUSE = {"quiet": FORGETFUL, "made": FORGETFUL, "settled_made": FORGETFUL}


def assert_same_as_reference(prog):
    assert record(gv.propagate(prog)) == record(propagated_with(prog, _NO_REUSE))


@pytest.mark.parametrize("make", PROGRAMS)
def test_propagation_is_that_of_visiting_every_time(make):
    assert_same_as_reference(make())


@pytest.mark.parametrize("specs", ["DP_SPECS", "TWO_D_SPECS"])
def test_training_step_propagation_is_that_of_visiting_every_time(specs):
    step = training.make_step(gv.Mesh({"x": 2, "y": 4}), getattr(training, specs))
    params, opt_state, batches = training.init()
    assert_same_as_reference(gv.trace(step, params, opt_state, batches(0)))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_propagation_is_that_of_visiting_every_time(p):
    assert_same_as_reference(gv.trace(p.fn, *p.args))


def test_quiet_visits_are_skipped(monkeypatch):
    """Not vacuous: on a transformer block, later priorities skip pass-through visits (the
    skipping propagation wrote back 161 times, the reference 299)."""
    ex = examples.get("transformer_block")
    prog = gv.trace(ex.fn, *ex.args)
    written = []
    real = algorithm.Propagator.write_back
    monkeypatch.setattr(
        algorithm.Propagator, "write_back", lambda *a: written.append(1) or real(*a)
    )
    gv.propagate(prog)
    with_skips = len(written)
    monkeypatch.setattr(algorithm.Propagator, "quiet", FORGETFUL, raising=False)
    gv.propagate(prog)
    assert with_skips < (len(written) - with_skips) * 0.6


def test_a_layer_makes_the_writes_of_the_layer_before(monkeypatch):
    """Not vacuous: in a 2-layer keras-hub llama, fewer than half of the visits that
    write are worked out (229 of 598)."""
    f, args = build("llama")
    prog = gv.trace(f, *args)
    calls = {"write_back": 0, "worked_out": 0}
    for name in calls:
        real = getattr(algorithm.Propagator, name)

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)

        monkeypatch.setattr(algorithm.Propagator, name, counted)
    gv.propagate(prog)
    assert calls["worked_out"] < calls["write_back"] / 2


def _merged_by_reference(cands) -> tuple:
    """Propagator.merge as it reads every candidate (the empty ones and repeats of the best
    so far too): (the axes agreed on, each conflict raised)."""
    best, expand, raised = (), True, []
    for axes in cands:
        n = next(
            (k for k, (a, b) in enumerate(zip(best, axes, strict=False)) if a != b),
            min(len(best), len(axes)),
        )
        if n < min(len(best), len(axes)):
            raised.append(("f", best, axes))
            best, expand = best[:n], False
        elif len(axes) > len(best) and expand:
            best = axes
    return best, raised


_AXES = st.lists(st.sampled_from(["x", "y", "z"]), max_size=3, unique=True).map(tuple)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(_AXES, max_size=6))
def test_merge_skipping_empty_and_repeated_candidates_is_reading_them_all(cands):
    noted = []
    fake = SimpleNamespace(raised=[], note_conflict=lambda *a: noted.append(a[1:]))
    rule = SimpleNamespace(factors=[SimpleNamespace(name="f")])
    best = algorithm.Propagator.merge(fake, None, rule, 0, cands)
    assert (best, noted) == _merged_by_reference(cands)
