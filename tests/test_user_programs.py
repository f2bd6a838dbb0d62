"""Ordinary programs written outside the zoo (issue 10): each runs partitioned and equals the
same program with its annotations dropped, on one device, or fails with a clear error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import meshes, specs

import gspmd_viz as gv
from gspmd_viz.core.sharding.devices import DeviceCountError
from gspmd_viz.xla import compiled as xla_collectives

X2 = gv.Mesh({"x": 2})
X8 = gv.Mesh({"x": 8})
RNG = np.random.default_rng(0)


def assert_unpartitioned(f, *args):
    """gv.partition(gv.propagate(gv.trace(f))) run on the mesh equals f unannotated."""
    spmd = gv.partition(gv.propagate(gv.trace(f, *args)))
    got, want = spmd(*args), spmd.program.unpartitioned(*args)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(
            np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=2e-5, atol=2e-5
        )
    return spmd


def rows(x, mesh=X2):
    return gv.mesh_split(x, mesh, ("x",) + (None,) * (np.ndim(x) - 1))


def normal(*shape):
    return jnp.asarray(RNG.standard_normal(shape), jnp.float32)


# --- 1. offsets on a sharded dim -------------------------------------------------------------


@pytest.mark.parametrize("start", [(1, 0), (3, 2), (6, 0)])
def test_dynamic_update_slice_into_a_split_dim_writes_once(start):
    def f(x, u):
        return jax.lax.dynamic_update_slice(rows(x), u, start)

    assert_unpartitioned(f, normal(8, 4), normal(2, 2))


def test_dynamic_slice_at_offsets_on_a_split_dim():
    def f(x):
        return jax.lax.dynamic_slice(rows(x), (3, 1), (4, 2)) * 2

    assert_unpartitioned(f, normal(8, 4))


# --- 2. captured array constants ---------------------------------------------------------------


def test_a_captured_numpy_vector_is_resharded_not_broadcast():
    assert_unpartitioned(lambda x: rows(x, X8) + np.arange(8.0, dtype=np.float32), normal(8))


def test_a_captured_mask_is_resharded_for_select():
    mask = np.tril(np.ones((8, 8), bool))
    bias = jnp.asarray(RNG.standard_normal((8, 8)), jnp.float32)

    def attention_scores(q, k):
        s = rows(q) @ k.T + bias
        return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)

    assert_unpartitioned(attention_scores, normal(8, 4), normal(8, 4))


# --- 3. gather modes on a split table ----------------------------------------------------------

TABLE = jnp.arange(64 * 4, dtype=jnp.float32).reshape(64, 4)  # rows split: lookups stay local
OUT_OF_RANGE = jnp.array([0, 3, 90, -2, 63, 64, -70, 40], jnp.int32)
LOOKUPS = {
    "take clip": lambda t, i: jnp.take(rows(t), i, axis=0, mode="clip"),
    "take fill (NaN)": lambda t, i: jnp.take(rows(t), i, axis=0),
    "get fill -1": lambda t, i: rows(t).at[i].get(mode="fill", fill_value=-1),
    "index (promise, clamps)": lambda t, i: rows(t)[i],
    "2-d index fill": lambda t, i: rows(t).at[i, i % 5].get(mode="fill", fill_value=7),
    "take_along_axis clip": lambda t, i: jnp.take_along_axis(
        rows(t), jnp.stack([i] * 4, 1), axis=0, mode="clip"
    ),
}


@pytest.mark.parametrize("name", sorted(LOOKUPS))
def test_out_of_range_lookups_in_a_split_table_follow_the_gather_mode(name):
    spmd = assert_unpartitioned(LOOKUPS[name], TABLE, OUT_OF_RANGE)
    assert "gather" in spmd.per_device_text()


def test_a_split_table_is_looked_up_where_it_lies():
    spmd = assert_unpartitioned(LOOKUPS["take clip"], TABLE, OUT_OF_RANGE)
    assert [c.kind for c in spmd.collectives] == ["all-reduce"]  # no gather of the table


# --- 4. windowed ops are judged by their windows, not by sizes alone ---------------------------


def _conv(img, ker, padding, strides=(1, 1), lhs_dilation=(1, 1)):
    return jax.lax.conv_general_dilated(
        img, ker, strides, padding, lhs_dilation, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


XY = gv.Mesh({"x": 2, "y": 2})
SPLIT_HW = (None, "x", "y", None)


@pytest.mark.parametrize(
    "padding, strides, lhs_dilation",
    [
        ([(1, -1), (0, 0)], (1, 1), (1, 1)),  # shifts rows down by one
        ([(0, 0), (-2, 2)], (1, 1), (1, 1)),  # shifts columns left by two
        ([(0, 0), (0, 0)], (2, 1), (1, 1)),  # keeps every other row
        ([(0, 0), (0, 0)], (1, 1), (2, 1)),  # spreads rows apart
    ],
)
def test_a_1x1_conv_that_moves_its_input_on_a_split_dim(padding, strides, lhs_dilation):
    def f(img, ker):
        return _conv(gv.mesh_split(img, XY, SPLIT_HW), ker, padding, strides, lhs_dilation)

    assert_unpartitioned(f, normal(2, 8, 8, 3), normal(1, 1, 3, 4))


@pytest.mark.parametrize("base_dilation, padding", [((2,), [(0, 0)]), ((1,), [(1, -1)])])
def test_a_size_1_reduce_window_that_moves_its_input_on_a_split_dim(base_dilation, padding):
    def f(x):
        x = rows(x)
        return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1,), (1,), padding, base_dilation)

    assert_unpartitioned(f, normal(8))


# --- 5. 0-d arguments --------------------------------------------------------------------------


@pytest.mark.parametrize("lr", [0.5, np.float32(0.5), jnp.float32(0.5), jnp.int32(3)])
def test_a_0d_argument_like_a_learning_rate(lr):
    assert_unpartitioned(lambda w, lr: rows(w) - lr * rows(w) ** 2, normal(8, 4), lr)


def test_a_0d_dynamic_offset():
    def f(x, u, i):
        return jax.lax.dynamic_update_slice(rows(x), u, (i, 0))

    assert_unpartitioned(f, normal(8, 4), normal(2, 4), jnp.int32(5))


# --- 6. jax.random inside the function -----------------------------------------------------------


def dropout(x, key):
    x = rows(x)
    keep = jax.random.bernoulli(key, 0.75, x.shape)
    return jnp.where(keep, x / 0.75, 0.0)


@pytest.mark.parametrize("key", [jax.random.key(3), jax.random.PRNGKey(3)], ids=["typed", "raw"])
def test_dropout_with_a_key_argument(key):
    spmd = assert_unpartitioned(dropout, normal(8, 4), key)
    assert "key<fry>" in str(spmd.program)


def test_keys_made_and_split_inside_the_function():
    def f(x, seed):
        k1, k2 = jax.random.split(jax.random.key(seed))
        noise = jax.random.normal(jax.random.fold_in(k1, 7), x.shape)
        return rows(x) + noise * jax.random.uniform(k2)

    assert_unpartitioned(f, normal(8, 4), jnp.uint32(11))


# --- 7. vmap over a function that calls mesh_split ---------------------------------------------


def test_vmap_leaves_the_mapped_dim_unconstrained():
    def per_example(row):
        return jnp.tanh(gv.mesh_split(row, XY, ("x",))) * 2

    prog = gv.trace(jax.vmap(per_example), normal(4, 8))
    (constrained,) = prog.annotations
    assert prog.open_dims[constrained] == frozenset({0})
    assert_unpartitioned(jax.vmap(per_example), normal(4, 8))


def test_an_unconstrained_dim_takes_the_sharding_propagation_brings():
    def f(x):
        x = gv.mesh_split(x, XY, ("y", None))
        return jax.vmap(lambda row: gv.mesh_split(row, XY, ("x",)) + 1)(x)

    prop = gv.propagate(gv.trace(f, normal(4, 8)))
    assert prop.outputs[0] == gv.Sharding(XY, ("y", "x"))
    assert_unpartitioned(f, normal(4, 8))


# --- 8. XLA picks a sharding our mesh cannot express ---------------------------------------------


def test_xla_shardings_our_mesh_cannot_express_are_not_comparable():
    def f(a):  # XLA splits [2, 4] as 2 x 4 sub-axes of x: no spec on Mesh(x=8) says that
        return jnp.sin(gv.mesh_split(a, X8, ("x",)).reshape(2, 4))

    theirs = gv.xla.propagate(f, normal(8), mesh=X8)
    reshaped = theirs.program.equations[-2].outputs[0]
    assert theirs.sharding(reshaped) is None
    assert theirs.not_comparable[reshaped] == "{devices=[2,4]<=[8]}"
    table = gv.xla.compare(gv.propagate(theirs.program), theirs)
    row = next(r for r in table.rows if r.value == reshaped)
    assert row.status == "not comparable" and row not in table.compared
    assert "{devices=[2,4]<=[8]}" in table.text() and "not comparable" in table.text()


# --- 9. clear errors, and equality that means the same layout ------------------------------------


def test_eager_mesh_split_on_a_mesh_larger_than_the_machine_says_how_many_devices():
    with pytest.raises(DeviceCountError, match="needs 64 devices but this process has 8"):
        gv.mesh_split(jnp.ones((64, 4)), gv.Mesh({"x": 64}), ("x", None))
    traced = gv.trace(lambda a: gv.mesh_split(a, gv.Mesh({"x": 64}), ("x",)), jnp.ones(64))
    assert traced.mesh == gv.Mesh({"x": 64})  # symbolic work still needs no devices


@pytest.mark.parametrize("shape", [(-4,), (4, -1), (2.5,)])
def test_shard_shape_refuses_sizes_that_are_not_whole_non_negative_numbers(shape):
    with pytest.raises(ValueError, match="non-negative whole numbers"):
        gv.Sharding(X2, ("x",)).shard_shape(shape)


def test_shardings_that_differ_only_in_size_1_axes_are_equal_and_hash_alike():
    mesh = gv.Mesh({"x": 2, "one": 1, "y": 2})
    pairs = [
        (("x", None), (("x", "one"), None)),
        (("x", "one"), ("x",)),
        ((None, "one"), ()),
        (("x", "y"), (("one", "x"), "y")),
    ]
    for a, b in pairs:
        sa, sb = gv.Sharding(mesh, a), gv.Sharding(mesh, b)
        assert sa == sb and hash(sa) == hash(sb) and len({sa, sb}) == 1
    assert gv.Sharding(mesh, (), unreduced={"one"}) == gv.Sharding(mesh, ())
    assert gv.Sharding(mesh, ("x",)) != gv.Sharding(mesh, ("y",))
    assert gv.Sharding(mesh, ("x", "y")) != gv.Sharding(mesh, (("x", "y"),))


# --- found by the program generator ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32, jnp.int32])
def test_padding_of_an_uneven_split_is_masked_with_the_identity_for_every_dtype(dtype):
    def f(x):  # 5 columns on 8 devices: 3 devices hold padding only
        x = gv.mesh_split(x, gv.Mesh({"y": 8}), (None, "y"))
        return x.max(1), (-x).min(1)

    x = jnp.asarray(-(np.arange(35).reshape(7, 5) % 9) - 2, dtype)  # max < 0, min > 1
    assert_unpartitioned(f, x)


@pytest.mark.parametrize("mode", ["promise_in_bounds", "clip", "fill"])
def test_a_lookup_in_a_split_bool_table_stays_bool(mode):
    """Its pending sum was all-reduced as int32 (jax sums bools as integers), so the next op
    met int32 where it expected bool and crashed."""
    x = jnp.asarray(np.arange(96).reshape(12, 8) % 3 == 0)
    idx, u = jnp.asarray([-3, 1, 14], jnp.int32), jnp.ones((1, 8), jnp.bool_)

    def f(x, idx, u, i):
        h = gv.mesh_split(x, gv.Mesh({"z": 3, "y": 1}), (("y", "z"), None))
        return jax.lax.dynamic_update_slice(h.at[idx].get(mode=mode), u, (i, 0))

    spmd = assert_unpartitioned(f, x, idx, u, jnp.int32(1))
    assert "{sum over z}" in spmd.per_device_text()  # looked up where the rows lie


# --- 12. scatters and grouped convolutions keep their passing dims split ----------------------


def test_segment_sum_keeps_the_feature_dim_split_and_writes_each_segment_once():
    x, seg = normal(16, 32), jnp.asarray(RNG.integers(-2, 10, 16), jnp.int32)  # out of range too

    def f(x, s):
        return jax.ops.segment_sum(gv.mesh_split(x, X8, (None, "x")), s, num_segments=8)

    spmd = assert_unpartitioned(f, x, seg)
    assert spmd.wire_bytes == 0  # each device sums its own feature columns


@pytest.mark.parametrize("mode", ["drop", "clip", "promise_in_bounds"])
def test_embedding_gradient_scatter_adds_into_a_table_split_on_its_features(mode):
    table, x = normal(64, 32), normal(16, 32)
    ids = jnp.asarray(RNG.integers(-8, 72, 16), jnp.int32)

    def f(t, x, i):
        t = gv.mesh_split(t, X8, (None, "x"))
        return t.at[i].add(x, mode=mode)

    assert assert_unpartitioned(f, table, x, ids).wire_bytes == 0


def test_a_vmapped_scatter_passes_its_batch_dim():
    table, x, ids = normal(4, 10, 6), normal(4, 5, 6), jnp.asarray(RNG.integers(0, 10, (4, 5)))

    def one(t, x, i):
        return t.at[i].add(x)

    def f(t, x, i):
        return jax.vmap(one)(gv.mesh_split(t, X2, ("x", None, None)), x, i)

    spmd = assert_unpartitioned(f, table, x, ids)
    assert all(c.kind != "all-gather" or c.wire_bytes < 4 * 10 * 6 * 4 for c in spmd.collectives)


@pytest.mark.parametrize("groups, per_group, multiplier", [(8, 1, 1), (8, 1, 2), (4, 2, 3)])
def test_a_grouped_conv_split_on_its_groups_runs_each_group_where_it_lies(
    groups, per_group, multiplier
):
    image = normal(2, groups * per_group, 6, 5)
    kernel = normal(groups * multiplier, per_group, 3, 3)

    def f(a, w):
        a = gv.mesh_split(a, gv.Mesh({"x": 4}), (None, "x", None, None))
        return jax.lax.conv_general_dilated(a, w, (1, 1), "SAME", feature_group_count=groups)

    spmd = assert_unpartitioned(f, image, kernel)
    assert spmd.wire_bytes == 0  # XLA moves nothing either: a group never needs another's data


def test_a_grouped_conv_whose_groups_do_not_split_evenly_stays_exact():
    for n in (3, 8):  # 6 groups of 2 features over 3 and 8 devices
        image, kernel = normal(2, 12, 6, 5), normal(6, 2, 3, 3)

        def f(a, w, n=n):
            y = jax.lax.conv_general_dilated(a, w, (1, 1), "SAME", feature_group_count=6)
            return gv.mesh_split(y, gv.Mesh({"x": n}), (None, "x", None, None))

        assert_unpartitioned(f, image, kernel)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_segment_sums_are_exact_and_move_no_more_than_xla(data):
    mesh = data.draw(meshes())
    rows, cols = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))
    segments = data.draw(st.integers(1, 6))
    ids = data.draw(st.lists(st.integers(-2, segments + 2), min_size=rows, max_size=rows))
    spec = data.draw(specs(mesh, 2))
    x, seg = normal(rows, cols), jnp.asarray(ids, jnp.int32)

    def f(x, s):
        return jax.ops.segment_sum(gv.mesh_split(x, mesh, spec), s, num_segments=segments)

    ours = assert_unpartitioned(f, x, seg).wire_bytes  # rows split: summed where they lie
    xla = sum(c.wire_bytes for c in xla_collectives.collectives(f, x, seg, mesh=mesh))
    assert ours <= xla + 64, (ours, xla)
