"""HloSharding text and GSPMD dims_mapping: compared with XLA's printer and mesh_split."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import meshes, sharded_shapes

import gspmd_viz as gv
from gspmd_viz.core.sharding.hlo_text import parse_tile_assignment


def _layout(text: str, ndim: int, devices: int) -> np.ndarray:
    """[tiles..., replicas] with each replica group sorted; `{replicated}` -> one full group."""
    tiles = parse_tile_assignment(text)
    if tiles is None:
        tiles = np.arange(devices).reshape((1,) * ndim + (devices,))
    return np.sort(tiles, axis=-1)


@given(sharded_shapes(max_devices=8))
def test_to_hlo_agrees_with_what_xla_prints(case):
    sharding, shape = case
    ndim = len(shape)
    theirs = str(sharding.to_named_sharding()._to_xla_hlo_sharding(ndim))  # iota form
    size = sharding.mesh.size
    assert np.array_equal(_layout(sharding.to_hlo(ndim), ndim, size), _layout(theirs, ndim, size))
    # from_hlo picks size-1 axes never, so compare layouts; exact when every axis is > 1.
    back = gv.Sharding.from_hlo(sharding.mesh, theirs)
    assert np.array_equal(back.tile_assignment(ndim), sharding.tile_assignment(ndim))
    if min(sharding.mesh.sizes) > 1:
        assert back == sharding


@given(sharded_shapes(max_devices=4096, min_size=2, max_rank=3))
def test_from_hlo_inverts_to_hlo(case):
    sharding, shape = case
    assert gv.Sharding.from_hlo(sharding.mesh, sharding.to_hlo(len(shape))) == sharding


def mesh_split_oracle(mesh_sizes, dims_mapping) -> np.ndarray:
    """GSPMD mesh_split, written from its description: the tile array [tiles..., replicas]."""
    device_mesh = np.arange(math.prod(mesh_sizes)).reshape(mesh_sizes)
    used = [m for m in dims_mapping if m >= 0]
    permutation = used + [m for m in range(len(mesh_sizes)) if m not in used]
    tiles = [1 if m < 0 else mesh_sizes[m] for m in dims_mapping]
    replicas = device_mesh.size // math.prod(tiles)
    return device_mesh.transpose(permutation).reshape(*tiles, replicas)


@st.composite
def dims_mappings(draw):
    mesh = draw(meshes(max_devices=64, min_size=2))
    ndim = draw(st.integers(len(mesh.sizes), len(mesh.sizes) + 2))
    mapping = [-1] * ndim
    for m, d in enumerate(draw(st.permutations(range(ndim)))[: len(mesh.sizes)]):
        if draw(st.booleans()):
            mapping[d] = m
    return mesh, mapping


@given(dims_mappings())
def test_from_dims_mapping_is_gspmd_mesh_split(case):
    mesh, mapping = case
    sharding = gv.Sharding.from_dims_mapping(mesh, mapping)
    expected = mesh_split_oracle(mesh.sizes, mapping)
    assert np.array_equal(sharding.tile_assignment(len(mapping)), expected)
    assert sharding.dims_mapping(len(mapping)) == mapping


def test_design_examples_print_exactly():
    mesh = gv.Mesh({"a": 4, "b": 2})  # device mesh arange(8).reshape(4, 2)
    assert gv.Sharding.from_dims_mapping(mesh, [1, 0]).to_hlo(2) == "{devices=[2,4]0,2,4,6,1,3,5,7}"
    assert (
        gv.Sharding.from_dims_mapping(mesh, [1, -1]).to_hlo(2)
        == "{devices=[2,1,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}"
    )
    mesh = gv.Mesh({"x": 2, "y": 4})
    assert (
        gv.Sharding(mesh, ("x", None)).to_hlo(2)
        == "{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"
    )
    assert gv.Sharding(mesh, ()).to_hlo(3) == "{replicated}"


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("{devices=[2,4]<=[8]}", ("x", "y")),
        ("{devices=[4,2]<=[2,4]T(1,0)}", ("y", "x")),
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", ("x",)),
        ("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={replicated}}", (None, "y")),
        ("{devices=[8]<=[2,4]T(1,0)}", (("y", "x"),)),
        ('{devices=[2,4]0,1,2,3,4,5,6,7 metadata={op_name="jit(f)/x"}}', ("x", "y")),
        ("  {replicated}\n", ()),
    ],
)
def test_from_hlo_reads_iota_and_explicit_forms(text, spec):
    mesh = gv.Mesh({"x": 2, "y": 4})
    assert gv.Sharding.from_hlo(mesh, text) == gv.Sharding(mesh, spec)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("devices=[2,4]<=[8]", "cannot read HloSharding"),
        ("{devices=[2,4]0,1,2}", "lists 3 devices"),
        ("{devices=[2,4]0,1,2,3,4,5,6,6}", "each once"),
        ("{devices=[2,2]<=[4]}", "each once"),
        ("{devices=[2,4]<=[8]T(0,0)}", "not a permutation"),
        ("{devices=[2,4]<=[8] last_tile_dims={manual}}", "unsupported"),
        ("{maximal device=3}", "one device"),
        ("{devices=[2,4]0,2,1,3,4,5,6,7}", "not expressible"),
        ("{devices=[3,1,2]0,1,2,3,4,5 last_tile_dim_replicate}", "each once"),
        ("", "cannot read"),
    ],
)
def test_malformed_hlo_text_is_a_value_error(text, words):
    with pytest.raises(ValueError, match=words):
        gv.Sharding.from_hlo(gv.Mesh({"x": 2, "y": 4}), text)
    with pytest.raises(TypeError, match="must be a string"):
        gv.Sharding.from_hlo(gv.Mesh({"x": 2}), None)


def test_pending_sums_and_multi_axis_dims_have_no_gspmd_text():
    mesh = gv.Mesh({"x": 2, "y": 4})
    with pytest.raises(ValueError, match="pending partial sums"):
        gv.Sharding(mesh, ("x",), unreduced={"y"}).to_hlo(1)
    with pytest.raises(ValueError, match="names one mesh dim"):
        gv.Sharding(mesh, (("x", "y"),)).dims_mapping(1)
    with pytest.raises(ValueError, match="must be -1 or a mesh dim"):
        gv.Sharding.from_dims_mapping(mesh, [2])


def test_a_4096_device_mesh_works_without_devices():
    mesh = gv.Mesh({"x": 64, "y": 64})
    s = gv.Sharding(mesh, (None, "y", "x"))
    assert s.shard_shape((3, 1000, 64)) == (3, 16, 1)
    text = s.to_hlo(3)
    assert text.startswith("{devices=[1,64,64]0,64,128,")
    assert gv.Sharding.from_hlo(mesh, text) == s
    assert gv.Sharding.from_hlo(mesh, "{devices=[1,64,64]<=[64,64]T(1,0)}") == s
    assert s.describe((3, 1000, 64), np.float32) == "f32[3, 1000@y, 64@x]"
