"""Sharding layout: per-device slices, bytes, replicas, notations; compared with jax."""

import math

import jax
import numpy as np
import pytest
from hypothesis import given
from jax.sharding import PartitionSpec as P
from strategies import sharded_shapes

import gspmd_viz as gv


def _replica_coords(sharding: gv.Sharding, device: int) -> tuple:
    coords = sharding.mesh.coords(device)
    return tuple(coords[a] for a in sharding.replicated_axes)


@given(sharded_shapes(max_devices=64))
def test_shards_cover_the_array_exactly_once_per_replica(case):
    sharding, shape = case
    per_replica: dict[tuple, np.ndarray] = {}
    for device, slices in sharding.device_slices(shape).items():
        counts = per_replica.setdefault(_replica_coords(sharding, device), np.zeros(shape, int))
        counts[slices] += 1
    replicas = sharding.mesh.size // math.prod(sharding.tiles(len(shape)))
    assert len(per_replica) == replicas
    for counts in per_replica.values():
        assert (counts == 1).all()


def _padded(shape, tiles):
    return tuple(-(-n // t) * t for n, t in zip(shape, tiles, strict=True))


def _clip(slices, shape):
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(slices, shape, strict=True))


@given(sharded_shapes(max_devices=8))
def test_device_slices_agree_with_jax(case):
    sharding, shape = case
    named = sharding.to_named_sharding()
    # jax insists on even division, so ask it about the padded shape and clip to ours.
    padded = _padded(shape, sharding.tiles(len(shape)))
    theirs = named.devices_indices_map(padded)
    ours = sharding.device_slices(shape)
    for device, slices in theirs.items():
        clipped = tuple(
            slice(min(s.start or 0, n), min(s.stop if s.stop is not None else p, n))
            for s, n, p in zip(slices, shape, padded, strict=True)
        )
        assert _clip(ours[device.id], shape) == _clip(clipped, shape), device.id
    assert sharding.shard_shape(shape) == named.shard_shape(padded)


@given(sharded_shapes(max_devices=8))
def test_replica_groups_are_the_devices_jax_gives_the_same_block(case):
    sharding, shape = case
    padded = _padded(shape, sharding.tiles(len(shape)))
    groups: dict[tuple, list[int]] = {}
    for device, slices in sharding.to_named_sharding().devices_indices_map(padded).items():
        key = tuple((s.start, s.stop) for s in slices)
        groups.setdefault(key, []).append(device.id)
    assert sorted(sorted(g) for g in groups.values()) == sharding.replica_groups()


@given(sharded_shapes(max_devices=64))
def test_bytes_count_real_data_and_padded_allocation(case):
    sharding, shape = case
    per_device = sharding.device_bytes(shape, np.float32)
    replicas = len(sharding.replica_groups()[0])
    assert sum(per_device.values()) == 4 * math.prod(shape) * replicas
    assert sharding.shard_bytes(shape, np.float32) == 4 * math.prod(sharding.shard_shape(shape))
    assert max(per_device.values()) <= sharding.shard_bytes(shape, np.float32)


def test_uneven_shards_pad_on_the_right():
    s = gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x", None))
    assert s.shard_shape((7, 6)) == (4, 6)
    assert s.device_slices((7, 6))[0] == (slice(0, 4), slice(0, 6))
    assert s.device_slices((7, 6))[7] == (slice(4, 7), slice(0, 6))
    s = gv.Sharding(gv.Mesh({"x": 4}), ("x",))
    assert [sl[0] for sl in s.device_slices((5,)).values()] == [
        slice(0, 2), slice(2, 4), slice(4, 5), slice(5, 5)
    ]  # fmt: skip
    assert s.device_bytes((5,), np.int8) == {0: 2, 1: 2, 2: 1, 3: 0}


def test_several_axes_on_one_dim_are_major_first():
    mesh = gv.Mesh({"x": 2, "y": 2})
    yx = gv.Sharding(mesh, (("y", "x"),))
    # device 1 is (x=0, y=1): y is major, so it holds block 2 of 4.
    assert yx.device_slices((8,))[1] == (slice(4, 6),)
    assert gv.Sharding(mesh, (("x", "y"),)).device_slices((8,))[1] == (slice(2, 4),)


def test_describe_is_compact():
    mesh = gv.Mesh({"x": 2, "y": 2, "z": 2})
    assert gv.Sharding(mesh, ("x", ("y", "z"))).describe((8, 4), np.float32) == "f32[8@x, 4@(y,z)]"
    assert gv.Sharding(mesh, (None,)).describe((3, 5), "bfloat16") == "bf16[3, 5]"
    pending = gv.Sharding(mesh, ("x",), unreduced={"z", "y"})
    assert pending.describe((8,), np.int32) == "s32[8@x]{sum over y,z}"
    assert repr(pending) == "Sharding(Mesh(x=2, y=2, z=2), ('x',), unreduced=['y', 'z'])"


@given(sharded_shapes(max_devices=8))
def test_partition_spec_and_named_sharding_round_trip(case):
    sharding, _ = case
    assert gv.Sharding.from_partition_spec(sharding.mesh, sharding.to_partition_spec()) == sharding
    assert gv.Sharding.from_named_sharding(sharding.to_named_sharding()) == sharding


def test_unreduced_axes_reach_jax():
    s = gv.Sharding(gv.Mesh({"x": 4, "y": 2}), ("x",), unreduced={"y"})
    named = s.to_named_sharding()
    assert named.spec == P("x", unreduced={"y"})
    assert gv.Sharding.from_named_sharding(named) == s
    assert s.replicated_axes == () and not s.is_replicated


def test_trailing_replicated_dims_do_not_change_identity():
    mesh = gv.Mesh({"x": 2})
    assert gv.Sharding(mesh, ("x", None)) == gv.Sharding(mesh, ["x"])
    assert gv.Sharding(mesh, (None, "x")) != gv.Sharding(mesh, ("x",))
    assert hash(gv.Sharding(mesh, ())) == hash(gv.Sharding(mesh, (None, None)))


@pytest.mark.parametrize(
    ("spec", "shape", "error", "words"),
    [
        (("q",), (4,), ValueError, "unknown mesh axis 'q'"),
        (("x", "x"), (4, 4), ValueError, "used twice"),
        ((("x", "y"), "y"), (4, 4), ValueError, "used twice"),
        (("x", None, None), (4, 4), ValueError, "has rank 2"),
        ("x", (4,), TypeError, "one entry per tensor dim"),
        ((3,), (4,), TypeError, "must be None, a mesh axis name"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, shape, error, words):
    mesh = gv.Mesh({"x": 2, "y": 2})
    with pytest.raises(error, match=words):
        gv.Sharding(mesh, spec).shard_shape(shape)


def test_bad_sharding_arguments():
    with pytest.raises(TypeError, match="needs a gv.Mesh"):
        gv.Sharding({"x": 2}, ("x",))
    with pytest.raises(ValueError, match="used twice"):
        gv.Sharding(gv.Mesh({"x": 2}), ("x",), unreduced={"x"})


def test_mesh_split_is_a_real_constraint_under_jit():
    mesh = gv.Mesh({"x": 4, "y": 2})
    f = jax.jit(lambda a: gv.mesh_split(a, mesh, (None, "x")) * 2)
    out = f(np.ones((6, 8), np.float32))
    assert gv.Sharding.from_named_sharding(out.sharding) == gv.Sharding(mesh, (None, "x"))
    with pytest.raises(ValueError, match="has rank 1"):
        gv.mesh_split(np.ones(3), mesh, ("x", "y"))
