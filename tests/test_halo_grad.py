"""jax.grad of a spatially split conv, through gv.partition: w.r.t. its input the backward conv
(base dilation when the forward one is strided) exchanges halos too; w.r.t. its kernel each
shard convolves its own rows and one all-reduce sums the kernel-sized partial results.

Oracles: the unpartitioned program for values; XLA's partitioner (same input and output
shardings) for bytes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

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

    prog = gv.trace(f, x, w)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    np.testing.assert_allclose(
        np.asarray(spmd(x, w)), np.asarray(prog.unpartitioned(x, w)), rtol=1e-4, atol=1e-4
    )
    theirs = gv.xla.collectives(
        f, x, w, mesh=mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
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
    output gradient, and one all-reduce of the kernel-sized result sums them, as XLA does. (On
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

    grad = jax.grad(loss)
    prog = gv.trace(grad, w, x)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    np.testing.assert_allclose(
        np.asarray(spmd(w, x)), np.asarray(prog.unpartitioned(w, x)), rtol=1e-4, atol=1e-4
    )
    theirs = gv.xla.collectives(
        grad, w, x, mesh=mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)
    assert {c.kind for c in spmd.collectives} == {"collective-permute", "all-reduce"}
    (summed,) = [c for c in spmd.collectives if c.kind == "all-reduce"]
    assert summed.shape == w.shape  # the kernel gradient itself, once
