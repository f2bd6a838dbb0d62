"""What tests of propagation's shortcuts share: the record two propagations must agree on,
propagation with some of algorithm.Propagator's shortcuts swapped for their slow ways, and
the fixed programs users write (the zoo and the keras-hub models) as pytest parameters."""

import pytest
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.propagation import algorithm
from gspmd_viz.zoo import examples

# a class-level data descriptor wins over __init__'s assignment: every visit sees no record
FORGETFUL = property(lambda self: {}, lambda self, value: None)


def record(prop) -> tuple:
    """Everything propagation decides: its steps, conflicts, settled splits and shardings."""
    return (prop.steps, prop.conflicts, prop.settled, tuple(prop.shardings.items()))


def propagated_with(prog, slow: dict):
    """gv.propagate(prog) with each Propagator attribute named in `slow` replaced."""
    with pytest.MonkeyPatch.context() as m:
        for name, way in slow.items():
            m.setattr(algorithm.Propagator, name, way, raising=False)
        return gv.propagate(prog)


def _zoo(name):
    ex = examples.get(name)
    return gv.trace(ex.fn, *ex.args)


def _model(name):
    f, args = build(name)
    return gv.trace(f, *args)


# [program maker] the zoo's examples and the keras-hub decoders, traced when a test asks
PROGRAMS = [pytest.param(lambda n=n: _zoo(n), id=n) for n in sorted(examples.ZOO)] + [
    pytest.param(lambda n=n: _model(n), id=n) for n in MODELS
]
