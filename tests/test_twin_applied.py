"""A twin's local op is its twin's (Partitioner.twin_applied): equations of one twins.static
number differ only in their values' names. The reference run (a local op made for every
equation) is in test_pass_memo; here: the sharing is not vacuous, and params that compare
equal as keys but are not the same param (1, 1.0 and True; 0.0 and -0.0) give different
numbers, since a twin's params reach the local op."""

import numpy as np
import pytest
from library_models import build

import gspmd_viz as gv
from gspmd_viz.core.partition import partitioner
from gspmd_viz.core.program.records import frozen_params


def test_layer_two_takes_its_local_ops_from_layer_one(monkeypatch):
    """In a 2-layer keras-hub llama, fewer local ops are made than equations are split."""
    f, args = build("llama")
    prop = gv.propagate(gv.trace(f, *args))
    made = []
    real = partitioner.Partitioner.make_applied
    monkeypatch.setattr(
        partitioner.Partitioner,
        "make_applied",
        lambda self, q, fa: made.append(1) or real(self, q, fa),
    )
    p = partitioner.Partitioner(prop)
    p.run()
    assert len(made) < len(p.memo.applied) * 0.7


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, True),
        (1, 1.0),
        (0.0, -0.0),
        (np.float32(1), 1.0),
        ((1, 2), (1.0, 2)),
        ({"k": 1}, {"k": True}),
    ],
)
def test_params_equal_as_keys_but_not_the_same_are_told_apart(a, b):
    assert a == b  # as dict keys they would be one
    assert frozen_params(a) != frozen_params(b)
    assert frozen_params(a) == frozen_params(a)
