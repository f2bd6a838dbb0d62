"""The zoo: every example runs, traces to the same values, and swaps annotations."""

import jax
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.zoo import examples


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


def _lingvo_capacity(group_size: int, experts: int, factor: float = 2.0) -> int:
    """The loop in lingvo's Top2GatingOnLogits, step by step (default capacity 4)."""
    capacity, auto = 4, int((group_size * factor) / experts)
    if capacity < auto:
        capacity = auto
        while capacity % 4:
            capacity += 1
    return capacity


@pytest.mark.parametrize("experts", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("group_size", [1, 4, 6, 8, 13, 16, 64, 100, 1024])
def test_moe_capacity_is_gshards(group_size, experts):
    assert examples.moe_capacity(group_size, experts) == _lingvo_capacity(group_size, experts)
    assert examples.moe_capacity(group_size, experts, 1.25) == _lingvo_capacity(
        group_size, experts, 1.25
    )


@pytest.mark.parametrize("group_size", [4, 8, 12, 24])
def test_two_experts_top2_keep_every_token(group_size):
    # With E=2 every token goes to both experts: each expert receives S tokens, and the
    # capacity 2S/E = S holds them all, so every token's combine weights sum to 1.
    logits = np.random.default_rng(group_size).standard_normal((3, group_size, 2))
    combine = examples._top2_gating(logits, examples.moe_capacity(group_size, 2))
    np.testing.assert_allclose(combine.sum(axis=(-2, -1)), 1.0, rtol=1e-5)
