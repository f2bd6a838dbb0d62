"""split, stack, unstack and tile keep the dims they do not touch split (families_pieces.py,
split_as_slices.py): rotary embeddings on heads split over a mesh axis move nothing, as in
XLA's partitioned program; a split along a sharded dim is a windowed slice, not a gather; a
bitcast that changes the element width keeps the other dims split.
Each program ran replicated (operands gathered) before these rules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv

MESH = gv.Mesh({"x": 2, "y": 4})
HEADS = ("x", None, "y", None)  # [batch, seq, heads, head_dim]


def _rotary_halves(q):
    """Rotary embeddings as models write them: the head dim cut in halves, rotated, joined."""
    q = gv.mesh_split(q, MESH, HEADS)
    a, b = jnp.split(q, 2, axis=-1)
    cos, sin = jnp.cos(a), jnp.sin(b)
    return gv.mesh_split(jnp.concatenate([a * cos - b * sin, b * cos + a * sin], -1), MESH, HEADS)


def _rotary_interleaved(q):
    """The interleaved variant: pairs split off, rotated, stacked and flattened back."""
    q = gv.mesh_split(q, MESH, HEADS)
    a, b = jnp.split(q, 2, axis=-1)
    rotated = jnp.stack([a * 0.5 - b * 0.25, b * 0.5 + a * 0.25], axis=-1).reshape(q.shape)
    return gv.mesh_split(rotated, MESH, HEADS)


def _unstack_rows(x):
    x = gv.mesh_split(x, MESH, (None, "x", "y"))
    first, second = jnp.unstack(x, axis=0)
    return gv.mesh_split(first * second, MESH, ("x", "y"))


def _tile_columns(x):
    x = gv.mesh_split(x, MESH, ("x", None))
    return gv.mesh_split(jnp.tile(x, (1, 3)) + 1, MESH, ("x", None))


def _split_sharded_dim(x):
    """Cut along the dim split over y (uneven pieces): each device keeps or receives its rows."""
    x = gv.mesh_split(x, MESH, ("x", "y"))
    a, b = jnp.split(x, [6], axis=1)
    return gv.mesh_split(a * 2, MESH, ("x", "y")), gv.mesh_split(b + 1, MESH, ("x", "y"))


def _partitioned_and_xla(f, x):
    """(ours, XLA's collectives); ours equals f on one device, output by output (sin and
    cos round differently on differently shaped buffers: 1e-6)."""
    prop = gv.propagate(gv.trace(f, x))
    spmd = gv.partition(prop)
    got, want = jax.tree.leaves(spmd(x)), jax.tree.leaves(spmd.program.unpartitioned(x))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
    theirs = gv.xla.collectives(
        f, x, mesh=MESH, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    return spmd, theirs


def _bitcast_halves(x):
    """f32 -> i16 pairs (a trailing dim) -> f32 again: rows and columns stay split."""
    x = gv.mesh_split(x, MESH, ("x", "y"))
    pairs = jax.lax.bitcast_convert_type(x, jnp.int16)  # [8, 8, 2]
    back = jax.lax.bitcast_convert_type(pairs, jnp.float32)
    return gv.mesh_split(jnp.tanh(back), MESH, ("x", "y"))


CASES = {
    "rotary_halves": (_rotary_halves, (4, 6, 8, 16)),
    "rotary_interleaved": (_rotary_interleaved, (4, 6, 8, 16)),
    "unstack_rows": (_unstack_rows, (2, 8, 8)),
    "tile_columns": (_tile_columns, (8, 4)),
    "split_sharded_dim": (_split_sharded_dim, (8, 16)),
    "bitcast_halves": (_bitcast_halves, (8, 8)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pieces_are_exact_and_move_at_most_xlas_bytes(name):
    f, shape = CASES[name]
    x = jnp.asarray(np.random.default_rng(3).standard_normal(shape), jnp.float32)
    spmd, theirs = _partitioned_and_xla(f, x)
    xla_bytes = sum(c.wire_bytes for c in theirs)
    assert spmd.wire_bytes <= xla_bytes, (spmd.wire_bytes, xla_bytes, spmd.collectives)
    assert not any("replicated" in n for n in spmd.notes), spmd.notes


@pytest.mark.parametrize(
    "name", ["rotary_halves", "rotary_interleaved", "unstack_rows", "bitcast_halves"]
)
def test_pieces_of_split_heads_need_no_collective_where_xla_needs_none(name):
    f, shape = CASES[name]
    x = jnp.asarray(np.random.default_rng(4).standard_normal(shape), jnp.float32)
    spmd, theirs = _partitioned_and_xla(f, x)
    assert not theirs, theirs  # the oracle: XLA's partitioned program moves nothing
    assert not spmd.collectives, spmd.collectives


def test_a_split_is_traced_as_one_slice_per_piece():
    x = jax.ShapeDtypeStruct((8, 10), jnp.float32)
    prog = gv.trace(lambda x: jnp.split(x, [3, 7], axis=1), x)
    slices = [e for e in prog.equations if e.primitive == "slice"]
    assert [e.params["start_indices"][1] for e in slices] == [0, 3, 7]
    assert [e.outputs[0].shape for e in slices] == [(8, 3), (8, 4), (8, 3)]
