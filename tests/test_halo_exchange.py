"""The per-device halo exchange, run for real under jax.shard_map on 8 CPU devices.

Oracles: the unpartitioned op (conv_general_dilated, reduce_window max and sum) on the whole
input; the global input itself for each device's window-ready buffer; the program's own jaxpr
for the collective-permutes (and so the bytes) it issues. The uneven shards' padding holds NaN
on the way in, so any element the exchange fails to mask shows up in the result."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jax import lax
from jax.sharding import PartitionSpec

import gspmd_viz as gv
from gspmd_viz.core.halo.exchange import SpatialSplit, bytes_sent_per_device, exchange_halo
from gspmd_viz.strategies.spatial import spatial_program

RNG = np.random.default_rng(0)


def _array(*shape):
    return jnp.asarray(RNG.normal(size=shape), jnp.float32)


def conv(strides, padding, lhs_dilation=None, rhs_dilation=None):
    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation)

    return f


def pool(kind, window, strides, padding, base=None, dilation=None):
    init, op = {"max": (-jnp.inf, lax.max), "sum": (0.0, lax.add)}[kind]
    ones = (1, 1)

    def f(x):
        pads = padding if isinstance(padding, str) else ((0, 0), (0, 0), *padding)
        return lax.reduce_window(
            x,
            init,
            op,
            (*ones, *window),
            (*ones, *strides),
            pads,
            None if base is None else (*ones, *base),
            None if dilation is None else (*ones, *dilation),
        )

    return f


def ppermutes_in(jaxpr) -> list[tuple[tuple, tuple]]:
    """(operand shape, perm) of every ppermute in a jaxpr, nested jaxprs included."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "ppermute":
            found.append((tuple(eqn.invars[0].aval.shape), tuple(map(tuple, eqn.params["perm"]))))
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            found += ppermutes_in(sub)
    return found


def check_against_unpartitioned(fn, args, mesh_axes, axes):
    mesh = gv.Mesh(mesh_axes)
    prog = spatial_program(fn, *args, mesh=mesh, axes=axes)
    expected = fn(*args)
    # f32 sums in another order: errors scale with the output's magnitude (a deep net's
    # outputs reach ~200, where cancellation leaves small entries off by ~1e-4)
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(prog(), expected, rtol=1e-5, atol=1e-6 * scale)
    issued = ppermutes_in(jax.make_jaxpr(prog.program)(*prog.inputs).jaxpr)
    recorded = [(p.shape, p.transfer.pairs) for p in prog.permutes]
    assert issued == recorded
    return prog


CONV_CASES = [
    # (input NCHW, kernel OIHW, conv, mesh, {input dim: axis})
    ((1, 2, 16, 5), (3, 2, 3, 1), conv((1, 1), "SAME"), {"x": 8}, {2: "x"}),
    ((2, 2, 13, 6), (3, 2, 5, 3), conv((2, 1), "VALID"), {"x": 4, "y": 2}, {2: "x", 3: "y"}),
    ((1, 1, 10, 3), (1, 1, 1, 1), conv((2, 1), "VALID"), {"x": 4}, {2: "x"}),  # negative
    ((1, 2, 16, 4), (2, 2, 9, 1), conv((1, 1), ((4, 4), (0, 0))), {"x": 8}, {2: "x"}),  # wide
    (
        (1, 2, 11, 9),
        (2, 2, 3, 3),
        conv((1, 2), ((3, 0), (1, 2)), None, (2, 3)),
        {"x": 2, "y": 4},
        {2: "x", 3: "y"},
    ),
    (
        (1, 1, 9, 7),
        (2, 1, 3, 2),
        conv((2, 1), ((2, 1), (1, 1)), (2, 3)),
        {"x": 4, "y": 2},
        {2: "x", 3: "y"},
    ),  # base dilation: the gradient of a strided conv w.r.t. its input
    ((4, 3, 7, 7), (2, 3, 3, 3), conv((1, 1), "SAME"), {"b": 2, "x": 4}, {0: "b", 2: "x"}),
    (
        (1, 1, 20, 4),
        (1, 1, 4, 2),
        conv((3, 1), ((-1, 2), (0, 0)), None, (2, 1)),
        {"x": 8},
        {2: "x"},
    ),
]


@pytest.mark.parametrize("lhs, rhs, fn, mesh, axes", CONV_CASES)
def test_conv_equals_the_unpartitioned_conv(lhs, rhs, fn, mesh, axes):
    check_against_unpartitioned(fn, (_array(*lhs), _array(*rhs)), mesh, axes)


POOL_CASES = [
    ((2, 3, 17, 6), pool("max", (3, 3), (2, 2), "SAME"), {"x": 4, "y": 2}, {2: "x", 3: "y"}),
    ((1, 2, 12, 12), pool("sum", (2, 2), (2, 2), "VALID"), {"x": 2, "y": 4}, {2: "x", 3: "y"}),
    ((1, 1, 9, 5), pool("max", (5, 1), (1, 1), ((2, 3), (0, 0)), None, (2, 1)), {"x": 8}, {2: "x"}),
    (
        (1, 1, 8, 5),
        pool("sum", (3, 2), (2, 1), ((1, 1), (0, 1)), (2, 1)),
        {"x": 4, "y": 2},
        {2: "x", 3: "y"},
    ),
    ((1, 1, 6, 6), pool("max", (7, 1), (1, 1), ((3, 3), (0, 0))), {"x": 2}, {2: "x"}),
]


@pytest.mark.parametrize("shape, fn, mesh, axes", POOL_CASES)
def test_pooling_equals_the_unpartitioned_pooling(shape, fn, mesh, axes):
    check_against_unpartitioned(fn, (_array(*shape),), mesh, axes)


@st.composite
def conv_configs(draw):
    shards = draw(st.sampled_from([2, 4, 8]))
    size = draw(st.integers(1, 3 * shards + 3))
    window = draw(st.integers(1, 5))
    pads = (draw(st.integers(-1, 4)), draw(st.integers(-1, 4)))
    params = dict(
        strides=(draw(st.integers(1, 3)),),
        padding=draw(st.sampled_from(["SAME", "VALID", (pads,)])),
        lhs_dilation=(draw(st.integers(1, 2)),),
        rhs_dilation=(draw(st.integers(1, 2)),),
    )
    return size, shards, window, params


@settings(max_examples=12)
@given(conv_configs())
def test_random_1d_convs_equal_the_unpartitioned_conv(cfg):
    size, shards, window, params = cfg
    lhs, rhs = _array(1, 2, size), _array(2, 2, window)
    fn = conv(params["strides"], params["padding"], params["lhs_dilation"], params["rhs_dilation"])
    try:
        out = jax.eval_shape(fn, lhs, rhs)
    except (ValueError, TypeError):
        out = None  # jax refuses this conv: the window is wider than the padded input
    assume(out is not None and out.size > 0)  # (an empty output has no windows to split)
    check_against_unpartitioned(fn, (lhs, rhs), {"x": shards}, {2: "x"})


def test_each_device_gets_exactly_its_window_ready_slice():
    # size 10 on 4 shards, window 1, stride 2 (XLA's own worked example): halos 0,-1,-2,-3 / 0,1,2,3
    plan = gv.halo_plan(10, 4, window=1, stride=2)
    split = SpatialSplit(0, "x", plan)
    mesh = gv.Mesh({"x": 4})
    x = jnp.concatenate([jnp.arange(10.0), jnp.full(2, jnp.nan)])  # 2 padding elements
    run = jax.shard_map(
        lambda b: exchange_halo(b, split, -1.0)[None],
        mesh=mesh.to_jax(),
        in_specs=PartitionSpec("x"),
        out_specs=PartitionSpec("x"),
        check_vma=False,
    )
    ready = np.asarray(jax.jit(run)(x))
    for i, need in enumerate(plan.needs):
        # every element a real window reads is there, padding reads the pad value; shard 3
        # has no real window and shard 2 only one, so the rest of theirs is never read
        for got, k in zip(ready[i], need, strict=False):
            if k in plan.reads[i]:
                assert got == k, (i, k, got)
            elif not 0 <= k < 10:
                assert got == -1.0, (i, k, got)
    assert [list(r) for r in plan.reads] == [[0, 1, 2], [4, 5, 6], [8], []]


def test_bytes_per_device_count_what_each_device_sends():
    # window 9 on shards of 2 (16 elements on 8 devices): two rounds per side of 2 rows each
    x, w = _array(1, 3, 16, 4), _array(2, 3, 9, 1)
    prog = check_against_unpartitioned(conv((1, 1), ((4, 4), (0, 0))), (x, w), {"x": 8}, {2: "x"})
    sent = bytes_sent_per_device(prog.permutes, {"x": 8})
    row = 3 * 4 * 4  # one spatial row of the local shard: 3 channels x 4 columns x 4 bytes
    # a middle device sends 2 rows to each of 4 neighbours; the ends reach only two of them
    assert sent[(3,)] == 4 * 2 * row
    assert sent[(0,)] == 2 * 2 * row
    assert [p.bytes_per_sender for p in prog.permutes] == [2 * row] * 4


def test_exchange_refuses_a_shard_of_the_wrong_size():
    split = SpatialSplit(0, "x", gv.halo_plan(10, 4, window=3))
    with pytest.raises(ValueError, match="plan expects shards of 3"):
        exchange_halo(jnp.zeros(4), split, 0.0)


def conv_net(x, w1, w2, w3):
    """conv 3x3 -> relu -> conv 3x3 stride 2 -> relu -> max pool 3x3/2 -> conv 5x5 (uneven)."""
    y = jnp.maximum(lax.conv_general_dilated(x, w1, (1, 1), "SAME"), 0.0)
    y = jnp.maximum(lax.conv_general_dilated(y, w2, (2, 2), "SAME"), 0.0)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")
    return lax.conv_general_dilated(y, w3, (1, 1), ((2, 2), (1, 3)))


def test_a_conv_net_stays_split_from_layer_to_layer():
    x = _array(2, 3, 37, 29)
    ws = (_array(6, 3, 3, 3), _array(6, 6, 3, 3), _array(4, 6, 5, 5))
    prog = check_against_unpartitioned(conv_net, (x, *ws), {"x": 2, "y": 4}, {2: "x", 3: "y"})
    sources = {c.source for c in prog.collectives}
    # equation 0 is the annotation spatial_program writes; then the net's windowed equations
    assert sources == {"eqn 1 conv_general_dilated", "eqn 3 conv_general_dilated",
                       "eqn 5 reduce_window_max", "eqn 6 conv_general_dilated"}  # fmt: skip
    kinds = {c.kind for c in prog.collectives}
    assert kinds == {"collective-permute"}


def test_ops_that_mix_tiles_are_partitioned_exactly():
    """A flip of the split rows moves whole blocks between devices: no halo can serve it, and
    the partitioner's block moves do (the hand-written driver this replaced refused it)."""

    def flips(x, w):
        return lax.rev(lax.conv_general_dilated(x, w, (1, 1), "SAME"), (2,))

    args = (_array(1, 1, 8, 8), _array(1, 1, 3, 3))
    prog = spatial_program(flips, *args, mesh=gv.Mesh({"x": 4}), axes={2: "x"})
    np.testing.assert_allclose(prog(), flips(*args), rtol=1e-5, atol=1e-6)


def test_an_axis_the_mesh_lacks_is_named():
    with pytest.raises(ValueError, match=r"axes \['z'\] are not axes of"):
        spatial_program(conv((1, 1), "SAME"), _array(1, 1, 8, 8), _array(1, 1, 3, 3),
                        mesh=gv.Mesh({"x": 4}), axes={2: "z"})  # fmt: skip
