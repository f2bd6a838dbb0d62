"""Chains of annotations on one value (issue 10): the partitioned run equals the unannotated
function and moves no more bytes than XLA's partitioner with the same boundary shardings."""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import meshes, specs

import gspmd_viz as gv
from gspmd_viz.xla import compiled as xla_collectives


def chain(mesh, *annotations):
    def f(x):
        for spec in annotations:
            x = gv.mesh_split(x, mesh, spec)
        return x

    return f


def ours_and_xla(mesh, x, annotations):
    f = chain(mesh, *annotations)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    np.testing.assert_array_equal(np.asarray(spmd(x)), np.asarray(x))
    pins = dict(in_shardings=[annotations[0]], out_shardings=[annotations[-1]])
    theirs = xla_collectives.collectives(f, x, mesh=mesh, **pins)
    return spmd.wire_bytes, sum(c.wire_bytes for c in theirs)


def test_rows_columns_rows_moves_no_more_than_xla_even_when_uneven():
    """x on dim 0 -> dim 1 -> dim 0 of f32[6, 8] on Mesh(x=4): XLA runs two all-to-alls
    (96 B); we gathered the whole array (192 B) because the middle annotation's conflicting
    sides settled on replicated."""
    mesh = gv.Mesh({"x": 4})
    for rows in (8, 6, 5):
        x = jnp.arange(rows * 8.0, dtype=jnp.float32).reshape(rows, 8)
        ours, xla = ours_and_xla(mesh, x, [("x", None), (None, "x"), ("x", None)])
        assert ours <= xla, (rows, ours, xla)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_annotation_chains_move_no_more_than_xla(data):
    mesh = data.draw(meshes())
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=2, max_size=2)))
    annotations = data.draw(st.lists(specs(mesh, 2), min_size=2, max_size=4))
    x = jnp.asarray(np.arange(np.prod(shape)).reshape(shape), jnp.float32)
    ours, xla = ours_and_xla(mesh, x, annotations)
    assert ours <= 1.25 * xla + 64, (ours, xla)  # the generator's bound (issue 10)
