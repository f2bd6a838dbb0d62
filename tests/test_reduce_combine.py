"""argmax / argmin over a split dim (issue 10 item 12): local winners, (value, index) pairs
gathered and picked; equal to the unannotated function (ties to the lowest index, NaN first,
uneven and size-1 splits, every dtype) and no more bytes than XLA's partitioner."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import meshes, specs

import gspmd_viz as gv
from gspmd_viz.xla import compiled as xla_collectives

XY = gv.Mesh({"x": 4, "y": 2})


def run_both(f, *args):
    """(partitioned result, unannotated result on one device, the SPMD program)."""
    spmd = gv.partition(gv.propagate(gv.trace(f, *args)))
    return spmd(*args), spmd.program.unpartitioned(*args), spmd


def assert_same(got, want):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def xla_bytes(f, *args, mesh):
    return sum(c.wire_bytes for c in xla_collectives.collectives(f, *args, mesh=mesh))


def tricky(shape, dtype, seed=0):
    """Few distinct values (ties across shards), and for floats NaNs, ±inf and ±0."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(np.float32)
    if jnp.issubdtype(dtype, jnp.floating):
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
        where = rng.random(shape) < 0.15
        x[where] = rng.choice(special, where.sum())
        x[0] = np.nan  # a row (column) of NaNs only
        x[-1] = -np.inf
    if dtype == jnp.bool_:
        return jnp.asarray(x > 0)
    return jnp.asarray(x, dtype)


def arg_reduction(mesh, spec, axis, reduce=jnp.argmax):
    def f(x):
        return reduce(gv.mesh_split(x, mesh, spec), axis=axis)

    return f


@pytest.mark.parametrize("reduce", [jnp.argmax, jnp.argmin])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.bool_])
@pytest.mark.parametrize(
    "mesh, spec, axis",
    [
        (XY, (None, "x"), 1),  # the probe
        (XY, ("x", "y"), 0),
        (XY, (None, ("x", "y")), 1),  # one dim over two axes
        (gv.Mesh({"x": 8}), (None, "x"), 1),  # 5 columns on 8: blocks of padding only
        (gv.Mesh({"x": 4, "z": 1}), (None, ("z", "x")), 1),  # a size-1 axis in the split
        (gv.Mesh({"z": 1, "x": 2}), ("z", "x"), 1),
    ],
)
def test_argmax_and_argmin_over_a_split_dim_equal_the_unannotated_function(
    mesh, spec, axis, dtype, reduce
):
    x = tricky((6, 5) if mesh.size == 8 and len(mesh.shape) == 1 else (6, 16), dtype)
    f = arg_reduction(mesh, spec, axis, reduce)
    got, want, spmd = run_both(f, x)
    assert_same(got, want)
    assert spmd.wire_bytes <= xla_bytes(f, x, mesh=mesh)


def test_the_probe_moves_the_pairs_not_the_operand():
    """f32[16, 32] split on its columns over x=4: XLA gathers (value, index) pairs, 384 B."""
    x = tricky((16, 32), jnp.float32)

    def f(x):
        return jnp.argmax(gv.mesh_split(x, XY, (None, "x")), axis=1)

    got, want, spmd = run_both(f, x)
    assert_same(got, want)
    assert spmd.wire_bytes == xla_bytes(f, x, mesh=XY) < x.size * 4 * 3 / 4  # not the operand
    assert "{argmax over x}" in spmd.per_device_text()


def test_a_flattened_argmax_and_keepdims_over_a_split_dim():
    x = tricky((8, 6), jnp.float32, seed=3)

    def f(x):
        x = gv.mesh_split(x, XY, ("x", "y"))
        return jnp.argmax(x), jnp.argmin(x, axis=0, keepdims=True), jnp.nanargmax(x, axis=0)

    got, want, _ = run_both(f, x)
    assert_same(got, want)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_arg_reductions_are_exact_and_move_no_more_than_xla(data):
    mesh = data.draw(meshes())
    rows, cols = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))
    spec, axis = data.draw(specs(mesh, 2)), data.draw(st.integers(0, 1))
    dtype = data.draw(st.sampled_from([jnp.float32, jnp.int32, jnp.bool_]))
    x = tricky((rows, cols), dtype, seed=data.draw(st.integers(0, 99)))
    f = arg_reduction(mesh, spec, axis, data.draw(st.sampled_from([jnp.argmax, jnp.argmin])))
    got, want, spmd = run_both(f, x)
    assert_same(got, want)
    assert spmd.wire_bytes <= xla_bytes(f, x, mesh=mesh) + 64


@pytest.mark.parametrize("reduce", [jnp.max, jnp.min, jnp.nanmax, jnp.nanmin])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("spec, axis", [(("x", None), 0), (("x", "y"), 1), ((("x", "y"), None), 0)])
def test_max_and_min_over_a_split_dim_keep_a_nan_in_one_shard(spec, axis, dtype, reduce):
    """XLA:CPU's all-reduce max drops a NaN; jnp.max returns it. 7 rows on 4 (or 8) shards:
    a NaN in one shard only, ±inf and ±0 elsewhere, padding in the last shard."""
    x = np.array(tricky((7, 6), jnp.float32, seed=5))
    x[0], x[3, 2], x[6, 4] = 1.0, np.nan, np.nan  # row 0 no longer all NaN

    def f(x):
        return reduce(gv.mesh_split(x, XY, spec), axis=axis)

    got, want, spmd = run_both(f, jnp.asarray(x, dtype))
    assert got.dtype == want.dtype  # compared as f32: numpy sees bf16 NaNs as unequal
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    if reduce in (jnp.max, jnp.min):
        assert np.isnan(np.asarray(want, np.float32)).any()
        assert [c.kind for c in spmd.collectives] == ["all-reduce"]  # one, not a gather
