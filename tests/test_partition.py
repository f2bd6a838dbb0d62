"""gv.partition on the zoo: every program runs partitioned and equals the unpartitioned
program, and moves no more bytes than XLA's own partitioner given the same shardings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.zoo import examples


def assert_unpartitioned(spmd, *args, exact=False):
    """The partitioned run equals the program with its annotations dropped, on one device."""
    assert_same(spmd(*args), spmd.program.unpartitioned(*args), exact)


def _partition(ex):
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    return prop, gv.partition(prop)


def assert_same(got, want, exact=False):
    """Equal, or within float32 rounding of another summation order: an element that ends near
    zero after summing terms as large as the output's largest carries their rounding error, so
    the absolute tolerance grows with the output's scale (a transformer_scan draw: -0.1005859
    against -0.1006103 where the outputs reach 16; float64 says -0.1005974, both as close)."""
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.shape(a) == np.shape(b)
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            values = np.asarray(b, float)
            scale = max(1.0, float(np.max(np.abs(values[np.isfinite(values)]), initial=0.0)))
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * scale)


@pytest.fixture(scope="module", params=sorted(examples.ZOO))
def zoo(request):
    ex = examples.get(request.param)
    prop, spmd = _partition(ex)
    return ex, prop, spmd


def test_zoo_runs_partitioned_and_equals_the_unpartitioned_program(zoo):
    ex, _, spmd = zoo
    assert_unpartitioned(spmd, *ex.args)


def test_zoo_moves_no_more_bytes_than_xla(zoo):
    ex, prop, spmd = zoo
    theirs = gv.xla.collectives(
        ex.fn, *ex.args, mesh=ex.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    ours = spmd.wire_bytes
    assert ours <= sum(c.wire_bytes for c in theirs), (spmd.collectives, theirs)


MESH = gv.Mesh({"x": 2, "y": 4})


def mlp(x, w1, w2):
    x = gv.mesh_split(x, MESH, ("x", None))
    h = jax.nn.relu(x @ gv.mesh_split(w1, MESH, (None, "y")))
    return h @ gv.mesh_split(w2, MESH, ("y", None))


ARGS = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))


def test_per_device_text_shows_local_shapes_and_collectives():
    spmd = gv.partition(gv.propagate(gv.trace(mlp, *ARGS)))
    text = spmd.per_device_text()
    assert "{ lambda a:f32[8,32] b:f32[32,16] c:f32[16,32]. let" in text
    assert "{sum over y} = dot_general" in text
    line = next(ln for ln in text.splitlines() if "all-reduce(y)" in ln)
    assert "f32[16@x, 32]{sum over y} -> f32[16@x, 32]" in line and "1.5 KiB" in line
    (c,) = spmd.collectives
    assert (c.kind, c.axes, c.shape, c.wire_bytes) == ("all-reduce", ("y",), (8, 32), 1536)
    assert c.source == "i -> out"


def test_contracting_split_feeding_a_split_consumer_is_a_reduce_scatter():
    def f(x, w):
        x = gv.mesh_split(x, MESH, (None, "y"))
        return gv.mesh_split(x @ gv.mesh_split(w, MESH, ("y", None)), MESH, ("y", None))

    spmd = gv.partition(gv.propagate(gv.trace(f, jnp.ones((16, 32)), jnp.ones((32, 8)))))
    # the 2 devices along x, idle in the matmul, share its columns and gather them after:
    # reduce-scatter [16, 4] over y (192 B), all-gather [4, 4] over x (64 B), not 384 B alone
    kinds = [(c.kind, c.axes, c.wire_bytes) for c in spmd.collectives]
    assert kinds == [("reduce-scatter", ("y",), 3 / 4 * 16 * 4 * 4), ("all-gather", ("x",), 64)]
    x, w = jnp.arange(16 * 32.0).reshape(16, 32), jnp.ones((32, 8))
    assert_unpartitioned(spmd, x, w)


def test_uneven_dims_are_padded_masked_and_exact():
    mesh = gv.Mesh({"x": 3, "y": 2})

    def f(x, w):
        x = gv.mesh_split(x, mesh, ("x", "y"))  # 7 rows over 3, 5 columns over 2
        return (x @ w).max(axis=0), x.sum(axis=1)

    x = jnp.arange(35, dtype=jnp.int32).reshape(7, 5) - 17
    w = jnp.arange(15, dtype=jnp.int32).reshape(5, 3)
    spmd = gv.partition(gv.propagate(gv.trace(f, x, w)))
    assert_unpartitioned(spmd, x, w, exact=True)


def test_partitioning_is_symbolic_on_4096_devices():
    ex = examples.get("transformer_block", mesh={"x": 64, "y": 64}, symbolic=True)
    prop, spmd = _partition(ex)
    assert spmd.collectives and spmd.mesh.size == 4096
    assert "f32[1,16,32]" in spmd.per_device_text()  # 8 batch rows over 64 devices: padded
    with pytest.raises(RuntimeError, match=r"needs 4096 devices.*gv.use_cpu_devices\(4096\)"):
        spmd(*ex.args)


def test_bad_input_is_explained():
    with pytest.raises(TypeError, match="result of gv.propagate"):
        gv.partition(gv.trace(mlp, *ARGS))
    with pytest.raises(ValueError, match="unknown mesh axis 'z'"):
        gv.Sharding(MESH, ("z",))


def test_a_primitive_without_a_rule_runs_replicated_and_says_so():
    def f(x):
        x = gv.mesh_split(x, MESH, ("x", None))
        return gv.mesh_split(jnp.i0(x) * 2, MESH, ("x", None))  # `bessel_i0e` has no rule

    x = jnp.arange(64.0).reshape(8, 8)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    assert any("'bessel_i0e'" in note and "replicated" in note for note in spmd.notes)
    assert [c.kind for c in spmd.collectives] == ["all-gather"]
    assert_unpartitioned(spmd, x)


def _ms(v, spec):
    return gv.mesh_split(v, MESH, spec)


SPLIT = ("x", "y")
PRIMITIVES = {
    "concatenate": lambda x: _ms(jnp.concatenate([_ms(x, SPLIT), x * 2], axis=1), ("x", None)),
    "pad": lambda x: jnp.pad(_ms(x, SPLIT), ((1, 2), (0, 3))),
    "strided slice": lambda x: _ms(x, SPLIT)[1:7, 2:10:2],
    "dynamic_slice": lambda x: jax.lax.dynamic_slice(_ms(x, SPLIT), (2, 1), (4, 12)),
    "iota on a split dim": lambda x: _ms(x, SPLIT) + jnp.arange(12.0) + jnp.arange(8.0)[:, None],
    "cumsum": lambda x: jnp.cumsum(_ms(x, SPLIT), axis=1),
    "argmax": lambda x: jnp.argmax(_ms(x, SPLIT), axis=1),
    "sort": lambda x: jnp.sort(-_ms(x, SPLIT), axis=0),
    "softmax": lambda x: jax.nn.softmax(_ms(x, SPLIT), axis=1),
    "reshape": lambda x: _ms(x, SPLIT).reshape(8, 3, 4).sum(1),
    "top_k": lambda x: jax.lax.top_k(_ms(x, SPLIT), 3)[0],
    "conv, split spatial": lambda x: jax.lax.conv_general_dilated(
        _ms(x.reshape(2, 4, 12, 1), ("x", "y")),
        jnp.ones((3, 3, 1, 2)),
        (1, 1),
        "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    ),
    "max pool": lambda x: jax.lax.reduce_window(
        _ms(x, SPLIT), -jnp.inf, jax.lax.max, (2, 2), (2, 2), "VALID"
    ),
    "uneven mean": lambda x: _ms(x[:7, :10], SPLIT).mean(),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitives_under_split_dims(name):
    f = PRIMITIVES[name]
    x = jnp.arange(8 * 12, dtype=jnp.float32).reshape(8, 12) / 7
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    assert_unpartitioned(spmd, x)


@pytest.mark.parametrize(
    "img_spec, ker_spec",
    [
        ((None, "x", None, None), (None, None, None, "y")),  # H on x, output features on y
        ((None, None, "x", None), (None, "x", "y", None)),  # W on x, kernel W on x, C on y
    ],
)
def test_exact_where_xla_cpu_miscompiles_a_split_conv(img_spec, ker_spec):
    """jax 0.10.2 / XLA:CPU gets these wrong (max errors ~79 and ~6 on such inputs: jax.jit of
    the annotated conv is not a safe oracle); ours matches the unsplit conv."""
    rng = np.random.default_rng(0)
    img = jnp.asarray(rng.standard_normal((8, 16, 16, 4)), jnp.float32)
    ker = jnp.asarray(rng.standard_normal((3, 3, 4, 8)), jnp.float32)

    def conv(a, k):
        return jax.lax.conv_general_dilated(
            a, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    def f(a, k):
        return conv(_ms(a, img_spec), _ms(k, ker_spec))

    spmd = gv.partition(gv.propagate(gv.trace(f, img, ker)))
    assert_same(spmd(img, ker), jax.jit(conv)(img, ker))


def test_windows_that_tile_a_split_dim_need_no_halo():
    """2x2 max pooling with stride 2 on rows split 4 ways: every shard pools its own rows."""

    def f(x):
        x = _ms(x, ("y", None))
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2), (2, 2), "VALID")

    x = jnp.arange(16 * 12, dtype=jnp.float32).reshape(16, 12) % 7
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    assert spmd.collectives == []
    assert "f32[2,6] = reduce_window_max" in spmd.per_device_text()
    assert_unpartitioned(spmd, x)


def test_running_with_other_shapes_says_to_partition_again():
    spmd = gv.partition(gv.propagate(gv.trace(mlp, *ARGS)))
    with pytest.raises(ValueError, match=r"argument a has shape \(8, 32\).*f32\[16, 32\]"):
        spmd(jnp.ones((8, 32)), *ARGS[1:])


def test_a_reduction_split_over_a_size_one_axis_leaves_nothing_to_combine():
    mesh = gv.Mesh({"x": 4, "one": 1})

    def f(x):
        x = gv.mesh_split(x, mesh, ("x", "one"))
        return x.max(axis=1), x.sum(axis=1)

    x = jnp.arange(32.0).reshape(8, 4)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    assert spmd.collectives == [] and "{sum over" not in spmd.per_device_text()
    assert_unpartitioned(spmd, x)


def test_partial_maxima_are_marked_until_combined():
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(x):
        return gv.mesh_split(x, mesh, ("x", None)).max(axis=0)

    x = jnp.arange(32.0).reshape(8, 4)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    lines = spmd.per_device_text().splitlines()
    local = next(ln for ln in lines if "= reduce_max" in ln)
    combine = next(ln for ln in lines if "all-reduce-max(x)" in ln)
    assert local.startswith("  ") and "{max over x} = reduce_max" in local  # its local type
    assert "f32[4]{max over x} -> f32[4]" in combine
    np.testing.assert_array_equal(spmd(x), x.max(axis=0))
