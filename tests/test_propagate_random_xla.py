"""Random annotations on a small matmul block, propagated by us and by XLA: same shardings."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.zoo import examples

MESH = gv.Mesh({"x": 2, "y": 4})
ENTRIES = [None, "x", "y", ("x", "y"), ("y", "x")]


@st.composite
def spec2(draw):
    """A rank-2 spec on MESH with every axis used at most once (or None: no annotation)."""
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    a = draw(st.sampled_from(ENTRIES))
    used = set(() if a is None else (a,) if isinstance(a, str) else a)
    b = draw(
        st.sampled_from(
            [e for e in ENTRIES if e is None or not (set((e,) if isinstance(e, str) else e) & used)]
        )
    )
    return (a, b)


def block(specs):
    def ann(v, spec):
        return v if spec is None else gv.mesh_split(v, MESH, spec)

    def f(x, w1, w2):
        h = jnp.tanh(ann(x, specs[0]) @ ann(w1, specs[1]))  # [B, H]
        return ann(h, specs[2]) @ ann(w2, specs[3])  # [B, D]

    return f


@settings(max_examples=25)
@given(st.tuples(spec2(), spec2(), spec2(), spec2()))
def test_random_matmul_annotations_agree_with_xla(specs):
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((16, 32), (32, 64), (64, 32))]
    prog = gv.trace(block(specs), *args)
    if not prog.annotations:
        return
    table = gv.xla.compare(gv.propagate(prog))
    assert table.agreement == 1.0, table.text(only_differences=True)


# A moe draw whose one-hot chain is made by `mul`s that broadcast size-1 dims (PARTED, and
# test_cost.WHOLE_PLAN_FOUND: within XLA's FLOPs once propagated as Shardy does)
BROADCASTING_MOE = {
    "x": ("x", None, None),
    "combine": None,
    "dispatched": (None, None, "x", "y"),
    "wi": (None, None, "y"),
    "wo": (None, ("y", "x"), None),
    "out": (("y", "x"), None, None),
}

# Seeded zoo draws where our propagation parted from XLA's (Shardy's) on many values, and why:
# - moe, out [G/y, S/x]: the combine einsum's contracting E took y from the experts' output
#   before out's G could; Shardy holds contracting (reduction) factors back until the pass
#   factors have propagated (its op priority 2), so G/y reaches the gating network (65 values);
# - moe, combine [.., E/y, C/x]: one factor's claim on an axis blocked another factor in every
#   tensor, where Shardy settles conflicts per tensor (55 values);
# - the transformer block: visiting order, as Shardy's rewrite driver visits (23 values);
# - moe, combine left out, out [G/(y,x)]: the router's x reached the one-hot chain that makes
#   combine through `mul`s that broadcast size-1 dims, as if they were elementwise. StableHLO
#   broadcasts such an operand first, and a broadcast gives axes forward last, so out's G/y and
#   the experts' C/x reach combine first (14 values; with them every plan of ours is within
#   XLA's FLOPs, memory and bytes, where the one kept did 1.07x its FLOPs).
PARTED = [
    (
        "moe",
        {
            "x": None,
            "combine": None,
            "dispatched": (None, None, None, "y"),
            "wi": (None, None, "x"),
            "wo": ("y", None, "x"),
            "out": ("y", "x", None),
        },
    ),
    (
        "moe",
        {
            "x": None,
            "combine": (None, None, "y", "x"),
            "dispatched": ("y", "x", None, None),
            "wi": (None, "x", "y"),
            "wo": (None, ("x", "y"), None),
            "out": None,
        },
    ),
    ("moe", BROADCASTING_MOE),
    (
        "transformer_block",
        {
            "x": (None, "x", "y"),
            "wq": (None, "x", "y"),
            "wk": (("x", "y"), None, None),
            "wv": None,
            "wo": ("x", None, "y"),
            "qkv": ("y", "x", None, None),
            "wi": (None, "x"),
            "h": ("y", None, None),
            "wout": None,
            "attn_out": ("y", None, "x"),
            "ffn_in": None,
            "out": None,
        },
    ),
]


@pytest.mark.parametrize("name, specs", PARTED)
def test_zoo_draws_that_parted_from_xla_agree(name, specs):
    ex = examples.get(name, specs=specs)
    table = gv.xla.compare(gv.propagate(gv.trace(ex.fn, *ex.args)))
    assert table.agreement == 1.0, table.text(only_differences=True)


@pytest.mark.parametrize("w2_cols", [16, 32])  # h [16, 64] against w2 [64, 16] (a tie), [64, 32]
def test_two_factors_wanting_one_axis_from_tensors_of_one_size_go_by_operand_order(w2_cols):
    """relu(x @ w1) @ w2 with the tokens of x and the model dim of w2 both on x: the factor from
    the bigger tensor takes x, and on a tie the earlier operand's (h's tokens), as in Shardy."""

    def f(x, w1, w2):
        x, w1 = gv.mesh_split(x, MESH, ("x", None)), gv.mesh_split(w1, MESH, ("x", "y"))
        return jax.nn.relu(x @ w1) @ gv.mesh_split(w2, MESH, ("y", "x"))

    shapes = ((16, 32), (32, 64), (64, w2_cols))
    prog = gv.trace(f, *(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
    out = prog.outputs[0]
    ours, xla = gv.propagate(prog).sharding(out), gv.xla.propagate_program(prog).sharding(out)
    assert ours == xla and ours.spec == ((("x",), ()) if w2_cols == 16 else ((), ("x",)))
