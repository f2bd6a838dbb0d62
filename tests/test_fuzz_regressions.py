"""Programs the random generator (tests/fuzz_programs.py) found moving more bytes than XLA's
partitioner, each exact against the unannotated function on one device and now within XLA's
wire bytes (issue 10)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fuzz_programs import _triple
from oracles import partitioned_and_xla

import gspmd_viz as gv


def counting(shape, dtype):
    return jnp.asarray((np.arange(np.prod(shape)) % 7 - 3).reshape(shape)).astype(dtype)


def xla_bytes(theirs) -> float:
    return sum(c.wire_bytes for c in theirs)


@pytest.mark.parametrize("spec, axis", [(("w", None), 0), ((None, "w"), 1)])
def test_a_concatenation_gathered_next_gathers_its_operand_once(spec, axis):
    """int32[4,7] on Mesh(w=3), concatenated along its split dim, then reshaped (which needs
    it whole): shifting the halves into a split result and gathering that moved 252 B; XLA
    gathers the operand once (112 B) and concatenates locally."""
    mesh = gv.Mesh({"w": 3})

    def f(h):
        h = jnp.concatenate([gv.mesh_split(h, mesh, spec)] * 2, axis)
        return h.reshape(h.shape[::-1])

    spmd, theirs = partitioned_and_xla(f, counting((4, 7), jnp.int32), mesh=mesh)
    assert [c.kind for c in spmd.collectives] == ["all-gather"]
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("start", [-2, 0, 3, 11])
def test_a_concatenation_read_at_a_dynamic_offset_gathers_its_operand_once(start):
    """int32[8,5] on Mesh(y=7, x=1): concatenate([h, h]) then a dynamic_slice (which needs
    dim 0 whole). Reading h twice counted its gather twice, a tie with shifting both halves
    and gathering the result (480 B); XLA moves 240 B."""
    mesh = gv.Mesh({"y": 7, "x": 1})

    def f(h, i, idx):
        h = jnp.concatenate([gv.mesh_split(h, mesh, (("y", "x"),))] * 2, 0)
        h = jnp.flip(jax.lax.dynamic_slice(h, (i, 0), (6, 5)), 0)
        return h.at[idx].get(mode="clip")

    args = counting((8, 5), jnp.int32), jnp.int32(start), jnp.asarray([3, -9, -4], jnp.int32)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("at", [0, 3])
@pytest.mark.parametrize("spec", [("x", None), (None, "x")])
def test_an_update_that_overwrites_everything_never_reads_its_operand(spec, at):
    """f32[8,5] split over x=2, custom_vjp, reshaped to [5,8], then dynamic_update_slice of a
    [5,8] update: the result is the update, so nothing needs gathering (128 B before; XLA 0)."""
    mesh = gv.Mesh({"x": 2})

    def f(h, u):
        h = _triple(gv.mesh_split(h, mesh, spec)).reshape(5, 8)
        return jax.lax.dynamic_update_slice(h, u, (at, 0))

    args = counting((8, 5), jnp.float32), jnp.ones((5, 8), jnp.float32)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes == xla_bytes(theirs) == 0


def test_a_segment_sum_overwritten_by_an_update_moves_nothing():
    """f32[3,7] on Mesh(x=4): segment_sum, a vmapped annotation, then an update of every row
    (196 B before; XLA 0)."""
    mesh = gv.Mesh({"x": 4})

    def f(h, ids, u):
        h = jax.ops.segment_sum(gv.mesh_split(h, mesh, (None, "x")), ids, 3)
        h = jax.vmap(lambda r: gv.mesh_split(r, mesh, ("x",)) * 2)(h)
        return jax.lax.dynamic_update_slice(h, u, (0, 0))

    args = counting((3, 7), jnp.float32), jnp.asarray([2, 0, 2]), jnp.ones((3, 7))
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes == xla_bytes(theirs) == 0


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bool_, jnp.float32])
@pytest.mark.parametrize("compare", [jnp.equal, jnp.less])
def test_an_integer_compared_with_its_own_annotation_is_a_constant(compare, dtype):
    """int32[4,6] on Mesh(x=6, y=1), reshaped, then vmap(row -> mesh_split(row) == row):
    always True for ints and bools: a constant, so nothing upstream is computed (80 B before;
    XLA folds it for ints, 0 B, and moves 140 B for bools). A float may be NaN, so its
    comparison stays (and both move bytes)."""
    mesh = gv.Mesh({"x": 6, "y": 1})

    def f(h):
        h = gv.mesh_split(h, mesh, (None, "x")).reshape(6, 4)
        same = jax.vmap(lambda r: compare(gv.mesh_split(r, mesh, ("x",)), r))(h)
        return _triple(same.astype(jnp.int32))

    x = counting((4, 6), dtype)
    if dtype == jnp.float32:
        x = x.at[1, 2].set(jnp.nan)
    spmd, theirs = partitioned_and_xla(f, x, mesh=mesh)
    if dtype == jnp.float32:
        assert spmd.wire_bytes <= 1.25 * xla_bytes(theirs) + 64
    else:
        assert spmd.wire_bytes == 0
        assert dtype == jnp.bool_ or xla_bytes(theirs) == 0


@pytest.mark.parametrize("start", [-2, 3, 10])
def test_a_pending_sum_of_bools_reduce_scattered_runs(start):
    """bool[64,7] on Mesh(y=7, x=1, z=1): a lookup in rows split 7 ways leaves a pending sum of
    bools, which a later split on the columns reduce-scatters; jax's psum_scatter refuses
    bools (a TypeError at run time before). (Found on bool[8,7], whose table is now moved to
    the columns by an all-to-all of the same 12 B that holds less; 64 rows keep the lookup.)"""
    mesh = gv.Mesh({"y": 7, "x": 1, "z": 1})

    def f(h, idx, i):
        h = gv.mesh_split(h, mesh, (("z", "y"), None))
        h = jax.lax.dynamic_slice(h.at[idx].get(mode="promise_in_bounds"), (i, 0), (2, 7))
        return gv.mesh_split(h, mesh, (None, "y"))

    args = counting((64, 7), jnp.bool_), jnp.asarray([-9, 6], jnp.int32), jnp.int32(start)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert "reduce-scatter" in {c.kind for c in spmd.collectives}


def test_a_flip_of_a_whole_value_is_local_even_when_its_result_is_split():
    """int32[5,8] whole on Mesh(w=2), flipped along the columns that a dot then contracts over
    w: the flip moved blocks into the split result (80 B) where reversing the whole value and
    slicing is free (140 B in all before; XLA 60 B)."""
    mesh = gv.Mesh({"w": 2})

    def f(h, w):
        return jnp.flip(gv.mesh_split(h, mesh, ()), 1) @ gv.mesh_split(w, mesh, ("w", None))

    args = counting((5, 8), jnp.int32), counting((8, 3), jnp.int32)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert "collective-permute" not in {c.kind for c in spmd.collectives}
    assert spmd.wire_bytes <= xla_bytes(theirs)


def test_a_concatenation_of_a_value_with_itself_gathers_it_once():
    """f32[8,7] rows split over y=2, transposed, concatenate([h, h], 1) kept split: each
    operand's halo exchange moved a whole shard (224 B); XLA gathers h once (112 B)."""
    mesh = gv.Mesh({"z": 3, "y": 2, "x": 1})

    def f(h):
        h = gv.mesh_split(h, mesh, (("y", "x"), None)).T
        return _triple(jnp.concatenate([h, h], 1))

    spmd, theirs = partitioned_and_xla(f, counting((8, 7), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("n, shards, start, stride", [(8, 8, 1, 2), (8, 8, 0, 2), (16, 8, 1, 3)])
def test_a_strided_slice_sends_each_kept_row_straight_to_its_shard(n, shards, start, stride):
    """f32[8,8] split 8 ways, h[1::2]: row 2j+1 goes to shard j from distances 1, 2, 3 and 4;
    a halo round per distance moved 4 permutes (128 B) where one permute with pairs at every
    distance carries them all, as XLA does (32 B)."""
    mesh = gv.Mesh({"x": shards})

    def f(h):
        return gv.mesh_split(h, mesh, ("x", None))[start::stride]

    spmd, theirs = partitioned_and_xla(f, counting((n, 8), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


def test_merged_halo_rounds_run_backwards_in_a_gradient():
    """The gradient of a strided slice on a split dim returns what the merged rounds carried."""
    mesh = gv.Mesh({"x": 8})

    def f(h):
        return jax.grad(lambda v: (gv.mesh_split(v, mesh, ("x", None))[1::2] ** 2).sum())(h)

    spmd, theirs = partitioned_and_xla(f, counting((8, 8), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= 1.25 * xla_bytes(theirs) + 64


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("mesh", [gv.Mesh({"x": 8}), gv.Mesh({"w": 3}), gv.Mesh({"x": 2, "y": 4})])
def test_a_segment_sum_of_split_rows_sums_locally(mesh, k):
    """int32[4,9] rows split 8 ways, segment_sum into 2: gathering the rows moved 252 B; each
    device summing its own rows into a zero table and all-reducing that moves 126 B (XLA: a
    little more, it all-reduces the segment ids' bounds too)."""
    axes = tuple(mesh.axis_names)

    def f(h, ids):
        return jax.ops.segment_sum(gv.mesh_split(h, mesh, (axes, None)), ids, k)

    args = counting((4, 9), jnp.int32), jnp.asarray([0, 1, 1, 3], jnp.int32) % (k + 1)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert "all-gather" not in {c.kind for c in spmd.collectives}
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("mode", ["drop", "clip", None])
@pytest.mark.parametrize(
    "updates, operand",
    [
        (("x", None), None),
        (("x", None), ("y", None)),
        (("y", "x"), (None, "x")),
        ((("x", "y"), None), None),
    ],
)
def test_an_add_at_rows_with_split_updates_counts_the_operand_once(updates, operand, mode):
    """h.at[i].add(u) with u's rows split: each device adds its own rows to the operand kept on
    one device (zeros on the others), a pending sum; exact under every mode, out-of-range and
    repeated rows included, even with the operand's rows split too, and within XLA's bytes."""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(h, i, u):
        h = h if operand is None else gv.mesh_split(h, mesh, operand)
        return h.at[i].add(gv.mesh_split(u, mesh, updates), mode=mode)

    idx = jnp.asarray([0, -3, 2, 5, 2], jnp.int32)
    args = counting((4, 6), jnp.float32), idx, counting((5, 6), jnp.float32) + 1
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize(
    "pads, keep", [((1, 2), slice(1, 5)), ((2, 0), slice(1, 5)), ((0, 3), slice(0, 9))]
)
@pytest.mark.parametrize(
    "spec_in, spec_out", [(("x", None), (None, "x")), ((None, "x"), ("x", None))]
)
def test_a_slice_of_a_pad_slices_first_then_pads(pads, keep, spec_in, spec_out):
    """f32[8,4] on Mesh(x=8): pad rows by (1, 2), keep rows 1:5, re-split the other dim: the
    padded value was resharded (224 B with columns split first); XLA rewrites a slice of a pad
    as a pad of a slice (88 B), and so do we (28 B)."""
    mesh = gv.Mesh({"x": 8})

    def f(h):
        h = jnp.pad(gv.mesh_split(h, mesh, spec_in), [pads, (0, 0)])[keep]
        return gv.mesh_split(h, mesh, spec_out)

    spmd, theirs = partitioned_and_xla(f, counting((8, 4), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


def test_a_slice_in_a_loop_of_a_pad_outside_it_stays_exact():
    """The pad before a scan is no producer inside its body: the slice there reads the loop's
    own copy (a rewrite across the boundary would read an outside value inside the loop)."""
    mesh = gv.Mesh({"x": 4})

    def f(h):
        p = jnp.pad(gv.mesh_split(h, mesh, ("x", None)), [(1, 2), (0, 0)])

        def body(c, _):
            return c + p[1:5], None

        return jax.lax.scan(body, jnp.zeros((4, 3)), None, length=2)[0]

    spmd, theirs = partitioned_and_xla(f, counting((8, 3), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= 1.25 * xla_bytes(theirs) + 64


@pytest.mark.parametrize("spec_out", [(None, "x"), ("x", None)])
def test_a_flip_re_split_on_another_dim_is_handed_rows_as_they_are(spec_out):
    """f32[8,4] rows split over x=4, padded to 9 rows, flipped, then annotated columns split:
    propagation leaves the flip unsplit (its operand and result disagree), so the pad gathered
    its operand for it (96 B); XLA pads locally and moves rows to columns once (24 B). The pad
    now reads the flip's likely split from its result."""
    mesh = gv.Mesh({"x": 4})

    def f(h):
        h = jnp.flip(jnp.pad(gv.mesh_split(h, mesh, ("x", None)), ((1, 0), (0, 0))), 0)
        return gv.mesh_split(h, mesh, spec_out)

    spmd, theirs = partitioned_and_xla(f, counting((8, 4), jnp.float32), mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("at, k", [(0, 1), (1, 3)])
@pytest.mark.parametrize("spec", [("z", None), ("z", "y")])
def test_an_update_before_a_segment_sum_moves_rows_to_columns(spec, at, k):
    """f32[8,8] rows split over z=6 (uneven; y size 1), compared with a column-split copy of
    itself, 7 rows updated at a static offset, then segment_sum: the update cannot split rows,
    so it gathered them for a segment_sum that asked for whole rows (320 B). XLA moves rows to
    columns (all-to-all) and gathers the [k, 8] sum (120 B at k=1). Now the update's rows move
    to columns (split.rehomed) and the segment_sum, its only reader, is costed as taking
    columns as they come (core/partition/lookahead.py)."""
    mesh = gv.Mesh({"z": 6, "w": 1, "y": 1})

    def f(h, u, ids):
        h = gv.mesh_split(h, mesh, spec)
        h = jax.vmap(lambda r: gv.mesh_split(r, mesh, ("z",)) == r)(h).astype(h.dtype)
        h = jax.lax.dynamic_update_slice(h, u, (at, 0))
        return jax.ops.segment_sum(h, ids, k)

    ids = jnp.asarray([(i * 3) % (k + 2) - 1 for i in range(8)], jnp.int32)
    args = counting((8, 8), jnp.float32), jnp.ones((7, 8), jnp.float32), ids
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("start", [-3, -1, 0, 2, 3, 5, 8])
def test_a_clamped_dynamic_slice_before_a_reshard_reads_the_clamped_rows(start):
    """int32[2,6] on Mesh(z=4, w=2, y=1), transposed, 4 rows read at a dynamic start, then
    re-split by rows: XLA:CPU folded the local dynamic_slice into the reshard's and clamped
    the start with the wrong bound (rows 4:6 where 2:4 was right: 2.0 off), for every start
    outside 0..2. The local op now clamps its starts itself (local_kernels.local_indices)."""
    mesh = gv.Mesh({"z": 4, "w": 2, "y": 1})

    def f(h, i):
        h = gv.mesh_split(h, mesh, ("z", ("y", "w"))).T
        return gv.mesh_split(jax.lax.dynamic_slice(h, (i, 0), (4, 2)), mesh, ("w", None))

    args = counting((2, 6), jnp.int32), jnp.int32(start)
    partitioned_and_xla(f, *args, mesh=mesh)  # exact against the unpartitioned program


def test_an_annotated_constant_is_made_again_where_it_is_needed():
    """jnp.where(mask, h, zero) with the mask and an annotated zeros split by columns and h by
    rows: the select ran on both splits and gathered its f32 result (192 B); XLA gathers the
    pred mask (48 B) and makes the zeros where they are read. So do we now
    (core/partition/remake_scalars.py): no collective moves a value made from scalars."""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(h, g):
        keep = gv.mesh_split(g, mesh, (None, "y")) > 0
        zero = gv.mesh_split(jnp.zeros((8, 16), h.dtype), mesh, (None, "y"))
        out = jnp.where(keep, gv.mesh_split(h, mesh, ("x", None)), zero)
        return gv.mesh_split(out, mesh, ("x", None))

    x = counting((8, 16), jnp.float32)
    spmd, theirs = partitioned_and_xla(f, x, x.T.reshape(8, 16), mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)
    assert [c.kind for c in spmd.collectives] == ["all-gather"]  # the mask's


@pytest.mark.parametrize("start", [0, 5])
def test_an_update_that_must_gather_its_rows_is_not_moved_to_columns_and_back(start):
    """int32[8,5] rows split over z=4, one row updated at a dynamic start: the update cannot
    split rows, so it gathers them (120 B, as XLA). Moving the split to the 5 columns instead
    (no work twice, said the ranking) and gathering those padded columns after sent 240 B: an
    op that only moves data and must gather anyway does no work twice done whole."""
    mesh = gv.Mesh({"z": 4, "w": 1, "y": 1})

    def f(h, u, i):
        h = gv.mesh_split(h, mesh, (("z", "y"), "w"))
        return jax.lax.dynamic_update_slice(h, u, (i, 0))

    args = counting((8, 5), jnp.int32), jnp.ones((1, 5), jnp.int32), jnp.int32(start)
    spmd, theirs = partitioned_and_xla(f, *args, mesh=mesh)
    assert spmd.wire_bytes <= xla_bytes(theirs)


@pytest.mark.parametrize("start", [-2, 5, 10])
def test_the_one_device_oracle_reads_the_clamped_rows(start):
    """f32[8,6] on Mesh(y=5, z=1): 4 rows at a dynamic start, then row -3 of those (a gather,
    mode fill): jax.jit of the unannotated program folds the gather into the dynamic_slice
    with XLA:CPU's wrong clamp, so the oracle itself was 18.0 off (benchmarks/fuzz.py called
    our right answer wrong). prog.unpartitioned clamps starts as the primitive does."""
    mesh = gv.Mesh({"y": 5, "z": 1})

    def f(h, i, idx):
        h = jax.lax.dynamic_slice(gv.mesh_split(h, mesh, ("z", "y")), (i, 0), (4, 6))
        return _triple(h.at[idx].get(mode="fill"))

    x = counting((8, 6), jnp.float32)
    args = x, jnp.int32(start), jnp.asarray([-3], jnp.int32)
    first = min(max(start + 8 if start < 0 else start, 0), 4)  # wrapped, then clamped
    expected = 3 * np.asarray(x)[first : first + 4][[1]]
    np.testing.assert_array_equal(gv.trace(f, *args).unpartitioned(*args), expected)
    partitioned_and_xla(f, *args, mesh=mesh)  # ours equals it


def test_a_comparison_gathered_for_the_output_moves_as_bool_before_it_widens():
    """f32[5,8] on Mesh(y=3): transposed, compared with itself under vmap, converted back to
    the input dtype and returned whole. The convert ran split and its 4-byte result was
    gathered (120 B); every reader asks for it whole, so gathering the bool before converting
    does no work twice that the gather would not and sends 30 B, as XLA does."""
    mesh = gv.Mesh({"y": 3})

    def f(x):
        h = gv.mesh_split(x, mesh, (None, "y")).T
        h = jax.vmap(lambda r: gv.mesh_split(r, mesh, ()) == r)(h).astype(h.dtype)
        return gv.mesh_split(h, mesh, (None,))

    spmd, theirs = partitioned_and_xla(f, counting((5, 8), jnp.float32), mesh=mesh)
    assert [c.dtype for c in spmd.collectives] == [np.dtype(bool)]
    assert spmd.wire_bytes == xla_bytes(theirs) == 30
