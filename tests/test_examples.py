"""The zoo: every example runs, traces to the same values, and swaps annotations."""

import jax
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz import examples


@pytest.mark.parametrize("name", list(examples.ZOO))
def test_example_program_matches_jit(name):
    ex = examples.get(name)
    prog = gv.trace(ex.fn, *ex.args)
    want = jax.jit(ex.fn)(*ex.args)
    got = prog(*ex.args)
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    assert set(ex.ranks) == set(ex.specs)
    assert prog.mesh == gv.Mesh(examples.DEFAULT_MESH)


def test_specs_swap_and_unknown_names_fail():
    ex = examples.get("mlp", specs={"x": (None, "y"), "w2": None})
    prog = gv.trace(ex.fn, *ex.args)
    assert sorted(s.spec for s in prog.annotations.values()) == [((), ("y",)), ((), ("y",))]
    with pytest.raises(KeyError, match="no annotation named"):
        examples.get("mlp", specs={"nope": None})
    with pytest.raises(KeyError, match="no example"):
        examples.get("nope")
    assert ex.with_specs(x=("x", None)).specs["x"] == ("x", None)


def test_symbolic_examples_on_a_4096_device_mesh():
    ex = examples.get("transformer_block", mesh={"x": 64, "y": 64}, symbolic=True)
    assert isinstance(ex.args[0], jax.ShapeDtypeStruct)
    prog = gv.trace(ex.fn, *ex.args)
    assert prog.mesh.size == 4096
