"""Random annotations on a small matmul block, propagated by us and by XLA: same shardings."""

import jax
import jax.numpy as jnp
from hypothesis import given, settings
from hypothesis import strategies as st

import gspmd_viz as gv

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
