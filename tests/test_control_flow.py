"""Calls and control flow: inlined calls keep their boundary in the record, and rematerialised
code partitions like the code it recomputes (bytes at most XLA's, results exact)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv

MESH = gv.Mesh({"x": 2, "y": 4})
RNG = np.random.default_rng(0)


def arrays(*shapes):
    return tuple(jnp.asarray(RNG.standard_normal(s) / np.sqrt(s[-1]), jnp.float32) for s in shapes)


def mlp(x, w1, w2):
    x = gv.mesh_split(x, MESH, ("x", None))  # [B/x, D]
    h = jax.nn.relu(x @ gv.mesh_split(w1, MESH, (None, "y")))  # [B/x, H/y]
    return h @ gv.mesh_split(w2, MESH, ("y", None))  # [B/x, D] {sum over y}


def gradient(body):
    def step(x, y, w1, w2):
        return jax.grad(lambda w1, w2: jnp.mean((body(x, w1, w2) - y) ** 2), (0, 1))(w1, w2)

    return step


MLP_ARGS = arrays((16, 32), (16, 32), (32, 64), (64, 32))


def partitioned(f, *args):
    prop = gv.propagate(gv.trace(f, *args))
    return prop, gv.partition(prop)


def xla_bytes(f, prop, *args) -> float:
    theirs = gv.xla.collectives(
        f, *args, mesh=prop.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    return sum(c.wire_bytes for c in theirs)


def assert_runs_exact(spmd, *args):
    got, want = spmd(*args), spmd.program.unpartitioned(*args)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


# --- inlined calls ------------------------------------------------------------------------------


def test_remat_mlp_gradient_partitions_like_the_plain_one():
    prop, spmd = partitioned(gradient(jax.checkpoint(mlp)), *MLP_ARGS)
    _, plain = partitioned(gradient(mlp), *MLP_ARGS)
    assert "remat2" in [c.primitive for c in prop.program.calls]
    assert not prop.unknown_primitives
    assert spmd.wire_bytes <= xla_bytes(gradient(jax.checkpoint(mlp)), prop, *MLP_ARGS)
    assert spmd.wire_bytes == plain.wire_bytes
    assert_runs_exact(spmd, *MLP_ARGS)


@jax.custom_vjp
def scaled_tanh(x):
    return 2 * jnp.tanh(x)


scaled_tanh.defvjp(lambda x: (2 * jnp.tanh(x), x), lambda x, g: (2 * g * (1 - jnp.tanh(x) ** 2),))


def test_calls_keep_their_boundary_in_the_record():
    @jax.jit
    def inner(x):
        return jax.checkpoint(scaled_tanh)(x) * 3

    def f(x):
        return inner(gv.mesh_split(x, MESH, ("x", "y"))) + 1

    (x,) = arrays((8, 8))
    prog = gv.trace(f, x)
    jit, remat, vjp = prog.calls
    assert (jit.primitive, jit.name, jit.parent) == ("jit", "inner", None)
    assert (remat.primitive, remat.parent, vjp.primitive, vjp.parent) == (
        "remat2",
        jit.index,
        "custom_vjp_call",
        remat.index,
    )
    tanh = next(e for e in prog.equations if e.primitive == "tanh")
    assert tanh.call == vjp.index and tanh.index in vjp.equations
    assert set(vjp.equations) <= set(remat.equations) <= set(jit.equations)
    assert jit.outputs == prog.producer[prog.outputs[0]].inputs[:1]
    assert "custom_vjp_call[scaled_tanh]" in str(vjp)
    prop, spmd = partitioned(f, x)
    assert prop.sharding(tanh.outputs[0]).spec == (("x",), ("y",))
    assert not spmd.collectives
    assert_runs_exact(spmd, x)


def test_custom_vjp_gradient_runs_its_own_backward_rule():
    def loss(x, w):
        h = gv.mesh_split(x, MESH, ("x", None)) @ gv.mesh_split(w, MESH, (None, "y"))
        return jnp.sum(scaled_tanh(h) ** 2)

    x, w = arrays((16, 32), (32, 64))
    f = jax.grad(loss, argnums=1)
    prop, spmd = partitioned(f, x, w)
    assert spmd.wire_bytes <= xla_bytes(f, prop, x, w)
    assert_runs_exact(spmd, x, w)
    np.testing.assert_allclose(spmd(x, w), f(x, w), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("policy", [None, jax.checkpoint_policies.dots_saveable])
def test_remat_policies_inline_alike(policy):
    f = gradient(jax.checkpoint(mlp, policy=policy))
    prop, spmd = partitioned(f, *MLP_ARGS)
    assert spmd.wire_bytes <= xla_bytes(f, prop, *MLP_ARGS)
    assert_runs_exact(spmd, *MLP_ARGS)
