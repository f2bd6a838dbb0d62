"""records.frozen_params (the params part of an equation's kind, Program.kinds) tests the
commonest types first (plain tuples and dicts, dtypes) and checks a tuple's entries in one
C call. The reference is the general case alone (records.frozen at every level): every param
of the keras-hub models' and random programs' equations, and drawn nested params, must freeze
to an equal key of the same type (so kinds number the same classes)."""

import jax.numpy as jnp
import numpy as np
import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.program import records
from gspmd_viz.core.program.records import frozen_params


def frozen_by_reference(params) -> object:
    """The general case alone, at every level."""
    return records.frozen(params, frozen_by_reference)


def _same(got, want) -> bool:
    """Equal, and of the same type at every level (1 == 1.0 == True as keys would merge)."""
    if type(got) is not type(want):
        return False
    if type(got) is tuple:
        return len(got) == len(want) and all(map(_same, got, want))
    return got == want


def assert_frozen_as_by_reference(prog) -> None:
    for eqn in prog.equations:
        assert _same(frozen_params(eqn.params), frozen_by_reference(eqn.params)), eqn
        for x in eqn.inputs:
            if isinstance(x, records.Literal):
                assert _same(frozen_params(x.value), frozen_by_reference(x.value)), eqn


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_params_freeze_as_by_reference(name):
    f, args = build(name)
    assert_frozen_as_by_reference(gv.trace(f, *args))


@settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs())
def test_random_program_params_freeze_as_by_reference(p):
    assert_frozen_as_by_reference(gv.trace(p.fn, *p.args))


_LEAVES = st.sampled_from(
    [
        0,
        1,
        -1,
        1.0,
        -0.0,
        0.0,
        True,
        False,
        None,
        "x",
        np.int64(1),
        np.float32(1.0),
        np.dtype("float32"),
        np.dtype(jnp.bfloat16),
        np.arange(3),
        frozenset({1}),
        [1, 2],
    ]
)
_PARAMS = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_PARAMS)
def test_drawn_params_freeze_as_by_reference(params):
    assert _same(frozen_params(params), frozen_by_reference(params))
