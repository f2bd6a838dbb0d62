"""The resharding planner: plans run for real in shard_map and put exactly dst's data on every
device (integers, uneven dims, pending sums included); bytes match the closed forms."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.core.reshard.permute_rounds import moving, permute_rounds
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.spmd.reshard_kernels import apply_plan
from gspmd_viz.core.spmd.run import device_buffers, pad_global, pending_axes

MESHES = [{"x": 8}, {"x": 2, "y": 4}, {"x": 4, "y": 2}, {"x": 2, "y": 2, "z": 2}, {"x": 3, "y": 2}]
MESHES += [{"x": 4, "y": 1, "z": 2}]  # a size-1 axis splits nothing and sums nothing
GARBAGE = -(10**6)  # what padding holds on the way in: a plan must never let it leak


@st.composite
def sharding_pairs(draw):
    mesh = gv.Mesh(draw(st.sampled_from(MESHES)))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))

    def spec(allow_pending: bool):
        dims = [[] for _ in range(ndim)]
        pending = []
        for axis in draw(st.permutations(mesh.axis_names)):
            where = draw(st.integers(-2 if allow_pending else -1, ndim - 1))
            (pending if where == -2 else dims[where] if where >= 0 else []).append(axis)
        return tuple(tuple(d) for d in dims), pending

    src_spec, src_pending = spec(True)
    dst_spec, _ = spec(False)
    dst_pending = [a for a in src_pending if draw(st.booleans())]
    dst_spec = tuple(tuple(a for a in axes if a not in dst_pending) for axes in dst_spec)
    return (
        gv.Sharding(mesh, src_spec, src_pending),
        gv.Sharding(mesh, dst_spec, dst_pending),
        shape,
    )


def global_input(x, src: gv.Sharding, rng):
    """x padded with garbage; with pending sums, random integer parts that sum to x."""
    padded = np.asarray(pad_global(x, src))
    valid = tuple(slice(0, n) for n in x.shape)
    mask = np.zeros(padded.shape, bool)
    mask[valid] = True
    padded = np.where(mask, padded, GARBAGE)
    groups = int(np.prod([src.mesh.axis_size(a) for a in pending_axes(src)], dtype=int))
    if not src.unreduced:
        return padded
    parts = rng.integers(-50, 50, size=(groups, *padded.shape))
    parts[-1] = padded - parts[:-1].sum(0)
    return parts


def expected_ok(buffers, dst: gv.Sharding, x):
    """Every device's valid region equals its slice of x (summed over pending axes)."""
    slices = dst.device_slices(x.shape)
    mesh = dst.mesh
    kept = [a for a in mesh.axis_names if a not in dst.unreduced]
    for device, sl in slices.items():
        coords = mesh.coords(device)
        group = [d for d in range(mesh.size) if all(mesh.coords(d)[a] == coords[a] for a in kept)]
        valid = tuple(slice(0, s.stop - s.start) for s in sl)
        got = sum(buffers[d][valid] for d in group)
        np.testing.assert_array_equal(got, x[sl], err_msg=f"device {device}")


def run(src, dst, x, rng):
    plan = reshard_plan(src, dst, x.shape, x.dtype)
    buffers = device_buffers(
        lambda local: apply_plan(plan, local), src.mesh, [src], dst, global_input(x, src, rng)
    )
    expected_ok(buffers, dst, x)
    return plan


@given(sharding_pairs())
def test_plans_move_exactly_the_right_data(case):
    src, dst, shape = case
    rng = np.random.default_rng(0)
    x = rng.integers(-100, 100, size=shape).astype(np.int32)
    plan = run(src, dst, x, rng)
    for step in plan.steps:  # a permute is charged exactly the rounds its kernel runs
        if step.kind == "collective-permute" or (step.kind == "slice" and not step.dims):
            rounds = moving(permute_rounds(step.before, step.after, shape))
            charged = step.collective.operand_bytes if step.collective else 0
            piece = x.dtype.itemsize * np.prod(step.after.shard_shape(shape))
            assert charged == len(rounds) * piece, (step, rounds)


MESH = gv.Mesh({"x": 2, "y": 4})


def S(*spec, unreduced=()):
    return gv.Sharding(MESH, spec, unreduced)


@pytest.mark.parametrize(
    "src, dst, kinds, wire",
    [
        # all-gather over y: (n-1) * S_in = 3 * (8*4*4 B)
        (S(None, "y"), S(None, None), ["all-gather"], 3 * 8 * 4 * 4),
        # replicated -> tiled is a free local slice
        (S(None, None), S("x", "y"), ["slice", "slice"], 0),
        # the sharded dim moves: all-to-all, (n-1)/n * S
        (S("x", None), S(None, "x"), ["all-to-all"], 1 / 2 * 4 * 16 * 4),
        # pending sums resolved where the consumer wants them split: reduce-scatter
        (S(None, None, unreduced="y"), S("y", None), ["reduce-scatter"], 3 / 4 * 8 * 16 * 4),
        # pending sums to replicated: all-reduce, 2 (n-1)/n * S
        (S(None, None, unreduced="x"), S(None, None), ["all-reduce"], 2 * 1 / 2 * 8 * 16 * 4),
        # same tiling, other devices: one permute moving the whole shard
        (S(("x", "y"), None), S(("y", "x"), None), ["collective-permute"], 1 * 16 * 4),
        # every new shard lies inside an old one: its holder slices it out and sends it
        (S("x", None), S("y", None), ["collective-permute"], 2 * 16 * 4),
        # reorder the dim's axes so the one dst keeps is major, then gather only the minor one:
        # permute S + all-gather (2-1) * S, where gathering y first would cost (4-1) * S + more
        (S(None, ("x", "y")), S(None, "y"), ["collective-permute", "all-gather"], 2 * 8 * 2 * 4),
        (
            S(None, "x", unreduced="y"),
            S(None, "y"),
            ["all-reduce", "collective-permute"],
            2 * 3 / 4 * 8 * 8 * 4 + 8 * 4 * 4,
        ),
    ],
)
def test_closed_form_bytes(src, dst, kinds, wire):
    plan = reshard_plan(src, dst, (8, 16), np.float32)
    assert [s.kind for s in plan.steps] == kinds
    assert plan.wire_bytes == pytest.approx(wire)
    x = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    run(src, dst, x, np.random.default_rng(1))


@pytest.mark.parametrize(
    "src, dst, shape, wire",
    [
        # 7 rows: y blocks of 2 hold the (x, y) blocks of 1 they split into: one row sent (XLA
        # sends the same collective-permute; we gathered y, 3 * 2 rows)
        (S("y", None), S(("x", "y"), None), (7, 9), 1 * 9 * 4),
        (S("x", None), S("y", None), (7, 3), 2 * 3 * 4),  # blocks of 4 hold the blocks of 2
        # a whole dim of 3 split 2 ways needs padding to 4: no permute straight there
        (S(None, "y"), S("x", "y"), (3, 8), 0),
    ],
)
def test_uneven_blocks_that_nest_are_sent_by_their_holder(src, dst, shape, wire):
    plan = reshard_plan(src, dst, shape, np.float32)
    assert plan.wire_bytes == pytest.approx(wire)
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    run(src, dst, x, np.random.default_rng(2))


def test_a_whole_uneven_dim_is_not_permuted_into_blocks_past_its_end():
    """f32[3, 8@z] -> [3@z, 8@y] on 2x2x2: a permute straight there would slice rows 2..3 of
    a 3-row buffer (jax clamps the start: row 1 twice)."""
    mesh = gv.Mesh({"x": 2, "y": 2, "z": 2})
    src, dst = gv.Sharding(mesh, (None, "z")), gv.Sharding(mesh, ("z", "y"))
    run(src, dst, np.arange(24, dtype=np.int32).reshape(3, 8), np.random.default_rng(3))


def test_an_axis_is_swapped_for_an_equal_free_one_before_gathering():
    """f32[6, 8@(z,y)] -> [6, 8@x] on 2x2x2: permute z's role to x (48 B), gather y (48 B),
    as XLA (96 B); gathering z and y costs 144 B."""
    mesh = gv.Mesh({"x": 2, "y": 2, "z": 2})
    src, dst = gv.Sharding(mesh, (None, ("z", "y"))), gv.Sharding(mesh, (None, "x"))
    plan = run(src, dst, np.arange(48, dtype=np.int32).reshape(6, 8), np.random.default_rng(4))
    assert [s.kind for s in plan.steps] == ["collective-permute", "all-gather"]
    assert plan.wire_bytes == 96


def test_a_dim_moved_to_fewer_devices_of_another_axis_gathers_only_the_old_axis():
    """f32[64@y, 32] -> [64@x, 32] on 2x4 (a table the lookup holds over y, read by a matmul
    over x): we gathered y (3 x 2 KiB) and sliced. Over (x, y), each device's 8 rows lie
    inside one y block: its holder sends them (1 KiB), then y is gathered (3 x 1 KiB). XLA
    sends the same 4 KiB (a collective-permute, then an all-gather over pairs)."""
    src, dst = S("y", None), S("x", None)
    x = np.arange(64 * 32, dtype=np.int32).reshape(64, 32)
    plan = run(src, dst, x, np.random.default_rng(9))
    assert [s.kind for s in plan.steps] == ["collective-permute", "all-gather"]
    assert plan.wire_bytes == 4 * (8 * 32 + 3 * 8 * 32)
    theirs = gv.xla.collectives(
        lambda h: h, x, mesh=MESH, in_shardings=(src,), out_shardings=(dst,)
    )
    assert plan.wire_bytes <= sum(c.wire_bytes for c in theirs)


@pytest.mark.parametrize("shape", [(6, 5), (8, 8)])
def test_axes_moved_to_another_dim_in_another_order_are_not_gathered(shape):
    """f32[6, 5@(y,x)] -> [6@(x,y), 5] on Mesh(x=4, y=2, w=1) (found by benchmarks/fuzz.py):
    the all-to-all only moved axes in the order the destination names them, so this gathered
    the columns (168 B). XLA moves them all-to-all and puts the blocks in order with one
    collective-permute (28 + 20 = 48 B); so do we."""
    mesh = gv.Mesh({"x": 4, "y": 2, "w": 1})
    src, dst = gv.Sharding(mesh, ("w", ("y", "x"))), gv.Sharding(mesh, (("x", "y"), None))
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    plan = run(src, dst, x, np.random.default_rng(5))
    assert "all-gather" not in [s.kind for s in plan.steps]
    theirs = gv.xla.collectives(
        lambda h: h, x, mesh=mesh, in_shardings=(src,), out_shardings=(dst,)
    )
    assert plan.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_uneven_blocks_that_do_not_nest_are_sent_by_their_holder_in_rounds():
    """f32[4@(y,x), 16, 32] -> [4@y, 16@x, 32] (moe's expert weights, found by
    benchmarks/annotations.py): 4 experts over 8 devices leave one on each of the first four
    shards (y = 0, 1) and padding on the rest, which does not nest into 4 over y. We gathered
    all eight blocks (7 x 2 KiB). Each dst block lies inside one holder's block, but both
    halves of expert e go to the two x devices of y = e: the holder sends one half a round,
    2 rounds of [1, 8, 32] (2 KiB), under XLA's bytes for the same move."""
    src, dst = S(("y", "x"), None, None), S("y", "x", None)
    x = np.arange(4 * 16 * 32, dtype=np.int32).reshape(4, 16, 32)
    plan = run(src, dst, x, np.random.default_rng(7))
    assert [s.kind for s in plan.steps] == ["collective-permute"]
    assert plan.collectives[0].shape == (2, 1, 8, 32) and plan.wire_bytes == 2 * 8 * 32 * 4
    theirs = gv.xla.collectives(
        lambda h: h, x, mesh=MESH, in_shardings=(src,), out_shardings=(dst,)
    )
    assert plan.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_a_dim_split_over_more_devices_than_elements_is_moved_off_its_padding_first():
    """f32[4, 4, 4@(x,y), 32] -> [4, 4, 4, 32@x] (a moe draw's spread plan): 4 elements over
    8 devices leave the devices at x = 1 only padding. Gathering (x, y) brings all eight
    blocks (7 x 2 KiB). Over y, with the last dim over x, each device's new block lies inside
    one holder's: one permute (the holders at x = 0 send each x device its half, 1 KiB), then
    y is gathered (3 x 1 KiB)."""
    src, dst = S(None, None, ("x", "y"), None), S(None, None, None, "x")
    x = np.arange(4 * 4 * 4 * 32, dtype=np.int32).reshape(4, 4, 4, 32)
    plan = run(src, dst, x, np.random.default_rng(8))
    assert [s.kind for s in plan.steps] == ["collective-permute", "all-gather"]
    assert plan.wire_bytes == 4 * (4 * 4 * 16 + 3 * 4 * 4 * 16)
    theirs = gv.xla.collectives(
        lambda h: h, x, mesh=MESH, in_shardings=(src,), out_shardings=(dst,)
    )
    assert plan.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_a_dim_that_is_mostly_padding_is_gathered_by_summing_zero_padded_blocks():
    """f32[8, 2@x] on x=8: six of the eight blocks are padding. A gather sends 7 blocks of
    8 x 1 (224 B); summing the blocks placed in zeros of the gathered size moves 2 * 7/8 of
    8 x 2 (112 B), as XLA (found by the program generator)."""
    mesh = gv.Mesh({"x": 8})
    src, dst = gv.Sharding(mesh, (None, "x")), gv.Sharding(mesh, (None, None))
    plan = run(src, dst, np.arange(16, dtype=np.int32).reshape(8, 2), np.random.default_rng(5))
    assert [s.kind for s in plan.steps] == ["all-reduce"]
    assert plan.wire_bytes == 2 * 7 / 8 * 8 * 2 * 4


def test_summing_padded_blocks_keeps_pending_sums_over_other_axes_apart():
    mesh = gv.Mesh({"x": 4, "y": 2})
    src = gv.Sharding(mesh, (None, "x"), {"y"})
    for dst in (gv.Sharding(mesh, (None, None), {"y"}), gv.Sharding(mesh, (None, None))):
        plan = run(src, dst, np.arange(5, dtype=np.int32).reshape(5, 1), np.random.default_rng(6))
        assert "all-gather" not in [s.kind for s in plan.steps]


def test_size_one_axes_move_nothing():
    mesh = gv.Mesh({"x": 8, "one": 1})
    src = gv.Sharding(mesh, (None, ("one", "x")))
    for dst in (gv.Sharding(mesh, (None, "x")), gv.Sharding(mesh, (None, ("x", "one")))):
        assert reshard_plan(src, dst, (8, 16)).steps == []
    pending = gv.Sharding(mesh, (None, "x"), unreduced={"one"})  # a sum over one device is done
    assert reshard_plan(pending, gv.Sharding(mesh, (None, "x")), (8, 16)).steps == []


def test_subgroups_name_only_the_axes_involved():
    plan = reshard_plan(S("x", "y"), S("x", None), (8, 16))
    (coll,) = plan.collectives
    assert coll.kind == "all-gather" and coll.axes == ("y",) and coll.group_size == 4
    assert coll.shape == (4, 4)


def test_uneven_gather_trims_padding():
    plan = reshard_plan(S(("x", "y"), None), S(None, None), (7, 3), np.int32)
    assert plan.steps[-1].after.shard_shape((7, 3)) == (7, 3)
    x = np.arange(21, dtype=np.int32).reshape(7, 3)
    run(S(("x", "y"), None), S(None, None), x, np.random.default_rng(2))


def test_plan_prints_steps_and_bytes():
    text = str(reshard_plan(S("x", None), S(None, "x"), (8, 16)))
    assert text.splitlines()[0] == (
        "reshard f32[8@x, 16] -> f32[8, 16@x]: 128 B per device on the wire"
    )
    assert "all-to-all(x)" in text and "[4, 16] -> [8, 8]" in text


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="unknown mesh axis 'z'"):
        reshard_plan(S("x"), gv.Sharding(MESH, ("z",)), (8,))
    with pytest.raises(ValueError, match="never create them"):
        reshard_plan(S("x"), S("x", unreduced="y"), (8,))
    with pytest.raises(ValueError, match="another mesh|between meshes"):
        reshard_plan(S("x"), gv.Sharding(gv.Mesh({"x": 2}), ("x",)), (8,))
