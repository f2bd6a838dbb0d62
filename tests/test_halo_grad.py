"""jax.grad of a spatially split conv, through gv.partition: w.r.t. its input the backward conv
(base dilation when the forward one is strided) exchanges halos too; w.r.t. its kernel each
shard convolves its own rows and one all-reduce sums the kernel-sized partial results; the
gradient of max / min pooling (select_and_scatter_add) sends the operand's halo out and the
scattered values landing in it back.

Oracles: the unpartitioned program for values; XLA's partitioner (same input and output
shardings) for bytes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from jax import lax
from oracles import partitioned_and_xla

import gspmd_viz as gv

RNG = np.random.default_rng(4)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("mesh_axes", [{"r": 4}, {"r": 2, "c": 4}])
def test_input_gradient_of_a_split_conv_exchanges_halos_like_xla(mesh_axes, stride):
    mesh = gv.Mesh(mesh_axes)
    spec = (None, None, *mesh.axis_names, None)[:4]
    x = jnp.asarray(RNG.normal(size=(2, 3, 16, 18)), jnp.float32)
    w = jnp.asarray(RNG.normal(size=(4, 3, 3, 3)), jnp.float32)

    def loss(x, w):
        x = gv.mesh_split(x, mesh, spec)
        y = jnp.tanh(lax.conv_general_dilated(x, w, (stride, stride), "SAME"))
        return jnp.sum(y * y)

    def f(x, w):
        return gv.mesh_split(jax.grad(loss)(x, w), mesh, spec)

    spmd, theirs = partitioned_and_xla(f, x, w, mesh=mesh, tol=1e-4)
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)
    convs = [c for c in spmd.collectives if "conv_general_dilated" in c.source]
    assert len({c.source for c in convs}) == 2  # the forward conv and its input gradient
    assert {c.kind for c in spmd.collectives} == {"collective-permute"}


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("mesh_axes, split", [({"r": 4}, (2,)), ({"r": 2, "c": 4}, (2, 3)),
                                              ({"r": 2, "c": 4}, (2,))])  # fmt: skip
def test_kernel_gradient_of_a_split_conv_sums_partial_convs_over_shards(mesh_axes, split, stride):
    """The kernel gradient's window is the output gradient (as wide as the image) and its
    output the kernel's size: each shard convolves its rows (plus a halo) with its rows of the
    output gradient, and one all-reduce of the kernel-sized result sums them, as XLA does; a
    mesh axis no dim is split over shares the output features and gathers them after. (On
    Mesh(r=2, c=4) with only r used, jax.jit of this program returns a kernel gradient off by
    the unused axis's size on jax 0.10.2's CPU backend; ours equals the program on one device.)"""
    mesh = gv.Mesh(mesh_axes)
    spec = [None] * 4
    for d, axis in zip(split, mesh.axis_names, strict=False):
        spec[d] = axis
    x = jnp.asarray(RNG.normal(size=(2, 3, 16, 12)), jnp.float32)
    w = jnp.asarray(RNG.normal(size=(4, 3, 3, 3)), jnp.float32)

    def loss(w, x):
        x = gv.mesh_split(x, mesh, tuple(spec))
        return jnp.sum(jnp.tanh(lax.conv_general_dilated(x, w, (stride, stride), "SAME")))

    spmd, theirs = partitioned_and_xla(jax.grad(loss), w, x, mesh=mesh, tol=1e-4)
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)
    (summed,) = [c for c in spmd.collectives if c.kind == "all-reduce"]
    idle = tuple(a for a in mesh.axis_names if a not in spec)
    shared = [c for c in spmd.collectives if c.kind == "all-gather"]
    assert {c.kind for c in spmd.collectives} - {"all-gather"} == {
        "collective-permute",
        "all-reduce",
    }
    assert [c.axes for c in shared] == ([idle] if idle else [])
    n = math.prod(mesh.shape[a] for a in idle)
    assert summed.shape == (w.shape[0] // n, *w.shape[1:])  # the kernel gradient, once


@st.composite
def pooling_grads(draw):
    mesh_axes = draw(st.sampled_from([{"x": 2}, {"x": 4}, {"x": 8}, {"x": 2, "y": 4}]))
    two_d = len(mesh_axes) == 2
    window = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    size = (draw(st.integers(4, 13)), draw(st.integers(4, 17)))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    select = draw(st.sampled_from(["max", "min"]))
    return mesh_axes, two_d, window, stride, size, padding, select


def _pooling_grad(case):
    """(ours, XLA's) collectives for the gradient of a drawn pooling, ours exact against one
    device (ties included: small ints repeat)."""
    mesh_axes, two_d, window, stride, size, padding, select = case
    mesh = gv.Mesh(mesh_axes)
    spec = ("x", "y") if two_d else (None, "x")
    init, op = (-jnp.inf, lax.max) if select == "max" else (jnp.inf, lax.min)
    x = jnp.asarray(RNG.integers(0, 4, size=size), jnp.float32)  # small ints: many ties

    def loss(x):
        x = gv.mesh_split(x, mesh, spec)
        y = lax.reduce_window(x, init, op, window, stride, padding)
        return jnp.sum(jnp.sin(y) * jnp.arange(y.size, dtype=y.dtype).reshape(y.shape))

    def grad(x):
        return gv.mesh_split(jax.grad(loss)(x), mesh, spec)

    try:
        prog = gv.trace(grad, x)
        jax.eval_shape(lambda x: lax.reduce_window(x, init, op, window, stride, padding), x)
    except (ValueError, TypeError):
        assume(False)  # jax refuses the window (wider than the padded input)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    np.testing.assert_allclose(spmd(x), prog.unpartitioned(x), rtol=1e-5, atol=1e-5)
    assert not any("no factor rule" in note for note in spmd.notes)
    theirs = gv.xla.collectives(grad, x, mesh=mesh, in_shardings=prop.inputs,
                                out_shardings=prop.outputs)  # fmt: skip
    return spmd.collectives, theirs


def _scatter_bytes(collectives) -> float:
    """The scatter's own exchanges (the forward pooling's are test_halo_xla's business)."""
    return sum(c.wire_bytes for c in collectives if "select_and_scatter" in c.source)


@settings(max_examples=20, deadline=None)
@given(pooling_grads())
@example(({"x": 8}, False, (1, 3), (1, 3), (4, 10), "VALID", "max"))  # 3 windows on 8 shards
def test_a_pooling_gradient_sends_its_halo_back_and_matches_one_device(case):
    """select_and_scatter_add (the gradient of max / min pooling): the operand's halo goes out,
    each shard scatters its own windows, and what landed in the halo goes back and is added to
    the shard that owns it. Exact against one device. Bytes: within 2x + 64 B of XLA's for the
    scatter, which sometimes sends each shard the windows over its own elements instead and no
    return (random draws, ours against XLA's: x=4, window (2, 2), stride (3, 1) on [4, 17]:
    48 B against 44 B; one window over all 4 shards of y: 48 B against 10 B)."""
    ours, theirs = _pooling_grad(case)
    mine, xla = _scatter_bytes(ours), _scatter_bytes(theirs)
    assert mine <= 2 * xla + 64, ([str(c) for c in ours], [str(c) for c in theirs])


def test_a_pooling_gradient_whose_windows_tile_a_dim_reuses_the_forward_halo():
    """Windows 3 wide at stride 3 tile the 6 rows: no halo on x for the pooling or for its
    gradient, and the y halo the forward pooling exchanged is reused: 24 B for the scatter
    against XLA's 32 B (it was 48 B: the scatter judged whole windows by the source's size)."""
    case = ({"x": 2, "y": 4}, True, (3, 1), (3, 2), (6, 11), "VALID", "max")
    ours, theirs = _pooling_grad(case)
    assert _scatter_bytes(ours) <= _scatter_bytes(theirs), [str(c) for c in ours]
    assert not any(c.kind == "collective-permute" and c.axes == ("x",) for c in ours)


def test_a_max_pool_gradient_returns_its_halo_with_permutes():
    mesh = gv.Mesh({"x": 4})

    def loss(x):
        x = gv.mesh_split(x, mesh, (None, "x"))
        return jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 3), (1, 2), "SAME") ** 2)

    x = jnp.asarray(RNG.normal(size=(2, 9)), jnp.float32)
    prog = gv.trace(jax.grad(loss), x)
    spmd = gv.partition(gv.propagate(prog))
    np.testing.assert_allclose(spmd(x), prog.unpartitioned(x), rtol=1e-6)
    text = spmd.per_device_text()
    assert "halo-return(x)" in text and "select_and_scatter_add" in text
    assert {c.kind for c in spmd.collectives} == {"collective-permute"}
