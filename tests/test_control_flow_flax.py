"""Flax's nn.scan over a transformer block (flax is a test-only extra: skipped without it).
The scanned stack propagates like XLA's, runs exact, and moves no more bytes than XLA."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv

nn = pytest.importorskip("flax.linen")

MESH = gv.Mesh({"x": 2, "y": 4})
B, L, M, H, LAYERS = 8, 16, 32, 64, 4


class Block(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        h = gv.mesh_split(h, MESH, ("x", None, None))  # [B/x, L, M]
        a = nn.MultiHeadDotProductAttention(num_heads=4, use_bias=False)(nn.LayerNorm()(h))
        h = h + a
        u = nn.gelu(nn.Dense(H, use_bias=False)(nn.LayerNorm()(h)))  # [B/x, L, H]
        return h + nn.Dense(M, use_bias=False)(u), None


Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=LAYERS)


def model_and_args():
    model = Stack()
    x = jax.random.normal(jax.random.key(0), (B, L, M))
    params = model.init(jax.random.key(1), x, None)

    def run(params, x):
        # stacked weights [LAYERS, ..., out]: the output dim split over y when it divides
        params = jax.tree.map(
            lambda w: (
                gv.mesh_split(w, MESH, (None,) * (w.ndim - 1) + ("y",))
                if w.ndim >= 3 and w.shape[-1] % 4 == 0
                else w
            ),
            params,
        )
        return model.apply(params, x, None)[0]

    return run, params, x


def test_flax_nn_scan_agrees_with_xla_and_runs_exact():
    run, params, x = model_and_args()
    prog = gv.trace(run, params, x)
    assert len(prog.loops) == 1 and prog.loops[0].trips == LAYERS
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    assert prop.outputs == gv.xla.propagate_program(prog).outputs
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, x))
    theirs = gv.xla.collectives(
        run, *shapes, mesh=MESH, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)
    np.testing.assert_allclose(
        np.asarray(spmd(params, x)), np.asarray(prog.unpartitioned(params, x)), atol=3e-5, rtol=3e-5
    )
    np.testing.assert_allclose(
        np.asarray(prog.unpartitioned(params, x)),
        np.asarray(jnp.asarray(run(params, x))),
        atol=1e-5,
    )
