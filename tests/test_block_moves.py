"""`jnp.roll` along a split dim is one rotation (whole pieces of shards move by at most two
collective-permutes, one shard's bytes per device at most) and `jnp.flip` one reversal (block b
to block N − 1 − b, one collective-permute): never a gather.

Oracles: jnp.roll itself (the unpartitioned program) for values; the closed form of the pieces;
XLA's partitioner (gv.xla.collectives, same input and output shardings) for bytes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import partitioned_and_xla

import gspmd_viz as gv
from gspmd_viz.core.halo.block_moves import pieces, rotation_of

MESHES = [{"x": 2}, {"x": 4}, {"x": 8}, {"x": 4, "y": 2}, {"x": 2, "y": 1, "z": 4}]


def _roll_program(shape, dim, shift, mesh, spec):
    def f(x):
        x = gv.mesh_split(x, mesh, spec)
        return gv.mesh_split(jnp.roll(x, shift, axis=dim), mesh, spec)

    x = jnp.asarray(np.random.default_rng(0).normal(size=shape), jnp.float32)
    return f, x


@st.composite
def rolls(draw):
    axes = draw(st.sampled_from(MESHES))
    mesh = gv.Mesh(axes)
    names = list(axes)
    split = tuple(draw(st.permutations(names))[: draw(st.integers(1, len(names)))])
    shards = int(np.prod([axes[a] for a in split]))
    per_shard = draw(st.integers(1, 3))
    n = shards * per_shard + draw(st.sampled_from([0, 0, 0, 1, shards - 1]))  # uneven too
    rows = draw(st.sampled_from([1, 3]))
    dim = draw(st.integers(0, 1))
    shape = (n, rows) if dim == 0 else (rows, n)
    spec = [None, None]
    spec[dim] = split if len(split) > 1 else split[0]
    shift = draw(st.integers(-2 * n, 2 * n))
    return shape, dim, shift, mesh, tuple(spec)


@settings(max_examples=25, deadline=None)
@given(rolls())
def test_a_roll_along_a_split_dim_is_exact_and_moves_no_more_than_xla(case):
    shape, dim, shift, mesh, spec = case
    f, x = _roll_program(shape, dim, shift, mesh, spec)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    n, shards = shape[dim], gv.Sharding(mesh, spec).dim_shards(dim)
    ours = [str(c) for c in spmd.collectives]
    if n % shards == 0:  # one rotation: permutes of at most one shard per device
        assert {c.kind for c in spmd.collectives} <= {"collective-permute"}, ours
        assert spmd.wire_bytes <= x.nbytes / shards
        assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs), (ours, theirs)
    else:  # two rotations of the padded slots: permutes of at most two shards per device
        assert {c.kind for c in spmd.collectives} <= {"collective-permute"}, ours
        local = np.prod(gv.Sharding(mesh, spec).shard_shape(shape)) * x.dtype.itemsize
        assert spmd.wire_bytes <= 2 * local
        assert spmd.wire_bytes <= 1.25 * sum(c.wire_bytes for c in theirs) + 64, (ours, theirs)


@pytest.mark.parametrize("n, shards", [(8, 4), (12, 3), (16, 8), (6, 6)])
def test_pieces_tile_every_shard_and_land_where_roll_puts_them(n, shards):
    """Closed form: output position p of shard i reads input (i·s + p − k) mod n."""
    s = n // shards
    for shift in range(-n, 2 * n):
        out = np.full((shards, s), -1)
        for piece in pieces(n, shards, shift):
            for j in range(shards):
                dst = (j + piece.distance) % shards
                width = piece.hi - piece.lo
                out[dst, piece.at : piece.at + width] = np.arange(
                    j * s + piece.lo, j * s + piece.hi
                )
        np.testing.assert_array_equal(out.reshape(-1), np.roll(np.arange(n), shift))


def test_a_roll_by_one_stage_is_one_permute_of_a_whole_shard():
    """The shift of a GSPMD pipeline: state [S, rows, D] split on its stage dim."""
    mesh = gv.Mesh({"stage": 4})
    f, x = _roll_program((4, 2, 8), 0, 1, mesh, ("stage", None, None))
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    (c,) = spmd.collectives
    assert (c.kind, c.shape, c.source) == ("collective-permute", (1, 2, 8), "eqn 3 concatenate")
    assert spmd.wire_bytes == x.nbytes / 4 == sum(t.wire_bytes for t in theirs)
    assert "rotate(stage)" in spmd.per_device_text()


def test_only_a_concatenation_of_two_slices_of_one_value_is_a_rotation():
    mesh = gv.Mesh({"x": 4})

    def not_rolls(x, y):
        x = gv.mesh_split(x, mesh, ("x",))
        a = jnp.concatenate([x[6:], x[:6]])  # a roll by 2
        b = jnp.concatenate([x[6:], y[:6]])  # two values
        c = jnp.concatenate([x[5:], x[:6]])  # overlapping pieces
        d = jnp.concatenate([x[6:], x[:6:2]])  # strided
        return a, b, c, d

    x, y = jnp.arange(8.0), jnp.arange(8.0) + 10
    prog = gv.trace(not_rolls, x, y)
    found = [rotation_of(prog, e) for e in prog.equations if e.primitive == "concatenate"]
    assert [r is not None for r in found] == [True, False, False, False]
    assert (found[0].shift, found[0].dim) == (2, 0)
    spmd = gv.partition(gv.propagate(prog))
    for got, want in zip(spmd(x, y), not_rolls(x, y), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_slice_of_the_roll_used_elsewhere_still_runs():
    mesh = gv.Mesh({"x": 4})

    def f(x):
        x = gv.mesh_split(x, mesh, ("x", None))
        head, tail = x[6:], x[:6]
        return jnp.concatenate([head, tail]), tail * 2

    x = jnp.arange(16.0).reshape(8, 2)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    rolled, doubled = spmd(x)
    np.testing.assert_array_equal(np.asarray(rolled), np.roll(np.asarray(x), 2, axis=0))
    np.testing.assert_array_equal(np.asarray(doubled), np.asarray(x[:6] * 2))


def test_a_roll_inside_a_scan_is_a_permute_per_trip():
    mesh = gv.Mesh({"stage": 4})

    def f(s):
        s = gv.mesh_split(s, mesh, ("stage", None))

        def body(c, _):
            c = gv.mesh_split(jnp.roll(jnp.tanh(c), 1, axis=0), mesh, ("stage", None))
            return c, None

        return jax.lax.scan(body, s, None, length=5)[0]

    x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 8)), jnp.float32)
    prog = gv.trace(f, x)
    spmd = gv.partition(gv.propagate(prog))
    np.testing.assert_allclose(np.asarray(spmd(x)), np.asarray(prog.unpartitioned(x)), rtol=1e-6)
    assert {c.kind for c in spmd.collectives} == {"collective-permute"}
    assert spmd.wire_bytes == 5 * x.nbytes / 4


@st.composite
def flips(draw):
    axes = draw(st.sampled_from(MESHES))
    mesh, names = gv.Mesh(axes), list(axes)
    order = draw(st.permutations(names))
    k = draw(st.integers(0, len(names)))
    spec = (tuple(order[:k]) or None, tuple(order[k:]) or None)  # both dims may be split
    shape = tuple(
        gv.Sharding(mesh, spec).dim_shards(d) * draw(st.integers(1, 2))
        + draw(st.sampled_from([0, 0, 1]))
        for d in range(2)
    )
    dims = draw(st.sampled_from([(0,), (1,), (0, 1)]))
    return shape, dims, mesh, spec


@settings(max_examples=25, deadline=None)
@given(flips())
def test_a_flip_along_split_dims_is_exact_and_moves_no_more_than_xla(case):
    shape, dims, mesh, spec = case

    def f(x):
        x = gv.mesh_split(x, mesh, spec)
        return gv.mesh_split(jax.lax.rev(x, dims), mesh, spec)

    x = jnp.asarray(np.random.default_rng(2).normal(size=shape), jnp.float32)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    sharding = gv.Sharding(mesh, spec)
    if all(shape[d] % sharding.dim_shards(d) == 0 for d in dims):  # one block move
        assert {c.kind for c in spmd.collectives} <= {"collective-permute"}
        assert spmd.wire_bytes <= np.prod(sharding.shard_shape(shape)) * x.dtype.itemsize
        assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)
    else:  # padding reversed to the front is rotated back: permutes, never a gather
        assert {c.kind for c in spmd.collectives} <= {"collective-permute"}
        assert spmd.wire_bytes <= 1.25 * sum(c.wire_bytes for c in theirs) + 64


def test_a_flip_of_two_split_dims_is_one_permute_of_one_shard():
    mesh = gv.Mesh({"x": 4, "y": 2})

    def f(x):
        x = gv.mesh_split(x, mesh, ("x", "y"))
        return gv.mesh_split(jnp.flip(x), mesh, ("x", "y"))

    x = jnp.asarray(np.random.default_rng(3).normal(size=(16, 32)), jnp.float32)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    (c,) = spmd.collectives
    assert (c.kind, c.shape, c.group_size) == ("collective-permute", (4, 16), 8)
    assert spmd.wire_bytes == x.nbytes / 8 == sum(t.wire_bytes for t in theirs)
    assert "reverse(x,y)" in spmd.per_device_text()


def test_a_rolled_or_flipped_constant_is_whole_everywhere_and_exact():
    mesh = gv.Mesh({"x": 4})

    def f(x):
        x = gv.mesh_split(x, mesh, ("x",))
        const = np.arange(8.0, dtype=np.float32)  # captured: a literal, not a traced value
        c = jnp.roll(const, 3) + jnp.flip(const)
        return gv.mesh_split(x * c, mesh, ("x",))

    x = jnp.asarray(np.random.default_rng(4).normal(size=8), jnp.float32)
    spmd, _ = partitioned_and_xla(f, x, mesh=mesh)
    assert "rotate" not in spmd.per_device_text() and "reverse" not in spmd.per_device_text()


@pytest.mark.parametrize("flips", [(1,), (1, 0)])
def test_a_flip_of_an_unevenly_split_dim_moves_what_xla_moves(flips):
    """int32[7,3] with its 3 columns on Mesh(z=8, w=1) (5 devices hold padding only): the
    flip gathered the whole array (147 B); XLA reverses the blocks and shifts the padding back
    with two permutes of one shard (56 B). Found by the random programs (issue 10)."""
    mesh = gv.Mesh({"z": 8, "w": 1})

    def f(h):
        h = jax.lax.rev(gv.mesh_split(h, mesh, (None, "z")), flips)
        return h + h.max(1, keepdims=True)

    x = jnp.asarray(np.arange(21).reshape(7, 3) % 7 - 3, jnp.int32)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_a_roll_of_an_unevenly_split_dim_moves_blocks_not_slices():
    """f32[6,3] with its 6 rows on Mesh(z=5, x=1) (2 per device, 4 slots of padding), rolled
    by 1: the slices and concatenation moved 84 B; XLA 12 B; two rotations of the padded
    slots move 36 B. Found by the random programs (issue 10)."""
    mesh = gv.Mesh({"z": 5, "x": 1})

    def f(h):
        return jnp.roll(gv.mesh_split(h, mesh, ("z",)), 1, 0)

    x = jnp.asarray(np.random.default_rng(4).normal(size=(6, 3)), jnp.float32)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    assert "rotate(z)" in spmd.per_device_text()
    assert spmd.wire_bytes <= 1.25 * sum(c.wire_bytes for c in theirs) + 64
