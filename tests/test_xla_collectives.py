"""Reading collectives out of XLA's partitioned HLO: all three replica_groups syntaxes, the
mesh axes each group runs over, and operand bytes from the printed result shapes."""

import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.xla.compiled import collectives, parse_line, replica_groups

MESH = gv.Mesh({"x": 2, "y": 4})


def S(*spec):
    return gv.Sharding(MESH, spec)


def matmul(a, b):
    return jnp.tanh(a @ b)


A, B = jnp.ones((16, 32)), jnp.ones((32, 64))


@pytest.mark.parametrize(
    "text, groups",
    [
        ("replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("replica_groups=[2,4]<=[8], to_apply", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("replica_groups=[2,4]<=[4,2]T(1,0), to_apply", [[0, 2, 4, 6], [1, 3, 5, 7]]),
        (
            "replica_groups=mesh['axis_0'=1,'axis_1'=4,'axis_2'=2], "
            "device_ids=([2,4]T(1,0)) {'axis_1'}, use_global_device_ids=true",
            [[0, 1, 2, 3], [4, 5, 6, 7]],
        ),
        (
            "replica_groups=mesh['a'=2,'b'=4] {'a'}, dimensions={0}",
            [[0, 4], [1, 5], [2, 6], [3, 7]],
        ),
    ],
)
def test_three_replica_group_syntaxes(text, groups):
    assert replica_groups(text) == groups


def test_parse_line_reads_kind_axes_and_operand_shape():
    line = (
        "%all-gather = f32[16,32]{1,0} all-gather(%param), channel_id=1, "
        "replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, use_global_device_ids=true, "
        'metadata={op_name="jit(f)/dot_general"}'
    )
    (c,) = parse_line(line, MESH)
    assert (c.kind, c.axes, c.shape, c.group_size, c.source) == (
        "all-gather",
        ("x",),  # groups {0,4}, {1,5}, ...: devices that differ only in x
        (8, 32),  # the operand: the result split over the group along dimensions={0}
        2,
        "jit(f)/dot_general",
    )


@pytest.mark.parametrize(
    "pairs, axes",
    [
        ("{0,1},{1,0},{4,5},{5,4}", ("y",)),  # devices x*4+y: only y changes
        ("{0,0},{2,1},{4,2},{6,3},{1,4},{3,5},{5,6},{7,7}", ("x", "y")),  # 4 -> 2 moves x and y
    ],
)
def test_a_permute_names_the_axes_its_pairs_move_along(pairs, axes):
    line = f"%cp = f32[4,16]{{1,0}} collective-permute(%p), source_target_pairs={{{pairs}}}"
    (c,) = parse_line(line, MESH)
    assert (c.kind, c.axes, c.wire_bytes) == ("collective-permute", axes, 4 * 16 * 4)


def test_groups_that_match_no_mesh_axes_name_none():
    line = "%ar = f32[8]{0} all-reduce(%p), replica_groups=[4,2]<=[8], to_apply=%add"
    (c,) = parse_line(line, MESH)
    assert c.axes == () and c.group_size == 2


def test_contracting_sharded_matmul_is_one_all_reduce_over_y():
    (c,) = collectives(
        matmul,
        A,
        B,
        mesh=MESH,
        in_shardings=[S(None, "y"), S("y", None)],
        out_shardings=S(None, None),
    )
    assert (c.kind, c.axes, c.shape) == ("all-reduce", ("y",), (16, 64))
    assert c.wire_bytes == 2 * 3 / 4 * 16 * 64 * 4


def test_gathering_an_output_is_one_all_gather_per_axis():
    cs = collectives(
        matmul,
        A,
        B,
        mesh=MESH,
        in_shardings=[S("x", None), S(None, "y")],
        out_shardings=S(None, None),
    )
    assert sorted((c.kind, c.axes) for c in cs) == [("all-gather", ("x",)), ("all-gather", ("y",))]
    # everyone ends with all of f32[16, 64]: (n-1)/n of it arrives, whatever the order
    assert sum(c.wire_bytes for c in cs) == 16 * 64 * 4 * (1 - 1 / 8)


def test_annotations_inside_f_count():
    def f(a, b):
        a = gv.mesh_split(a, MESH, ("x", None))
        return gv.mesh_split(a @ b, MESH, (None, None))

    cs = collectives(f, A, B, mesh=MESH)
    assert [c.kind for c in cs] == ["all-gather"] and cs[0].axes == ("x",)
    assert np.dtype(cs[0].dtype) == np.float32
    assert cs[0].source.startswith("jit(f)/")  # XLA's op_name names the user's function


def test_uneven_boundary_pins_are_compared_not_refused():
    """jax.jit refuses boundary shardings that split an array unevenly (XLA pads only inside a
    program), so the oracle pins those inside: f32[6] over 8 devices."""
    mesh8 = gv.Mesh({"x": 8})

    def double(a):
        return a * 2

    # replicated in, split out: each device keeps its own slice, nothing moves
    assert (
        collectives(double, jnp.ones(6), mesh=mesh8, in_shardings=[None], out_shardings=[("x",)])
        == []
    )
    # split in, replicated out: one all-gather of the padded 1-element shards
    (c,) = collectives(
        double, jnp.ones(6), mesh=mesh8, in_shardings=[("x",)], out_shardings=[(None,)]
    )
    assert (c.kind, c.axes, c.shape, c.group_size) == ("all-gather", ("x",), (1,), 8)


def test_all_reduce_only_dynamic_sliced_counts_as_the_reduce_scatter_it_is():
    """XLA:CPU spells [16, 32/y] @ [32/y, 64] -> [16/y, 64] as an all-reduce of the [16, 64]
    partial sums, then a dynamic-slice keeping 4 of the 16 rows: a reduce-scatter."""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a, b):
        a, b = gv.mesh_split(a, mesh, (None, "y")), gv.mesh_split(b, mesh, ("y", None))
        return gv.mesh_split(a @ b, mesh, ("y", None))

    (c,) = gv.xla.collectives(f, jnp.ones((16, 32)), jnp.ones((32, 64)), mesh=mesh)
    assert (c.kind, c.axes, c.shape, c.dims) == ("reduce-scatter", ("y",), (16, 64), (0,))
    assert c.wire_bytes == 3 / 4 * 16 * 64 * 4  # (n-1)/n of the operand, not 2(n-1)/n


def test_all_reduce_used_whole_stays_an_all_reduce():
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a, b):
        a, b = gv.mesh_split(a, mesh, (None, "y")), gv.mesh_split(b, mesh, ("y", None))
        return gv.mesh_split(a @ b, mesh, (None, None))

    (c,) = gv.xla.collectives(f, jnp.ones((16, 32)), jnp.ones((32, 64)), mesh=mesh)
    assert c.kind == "all-reduce" and c.wire_bytes == 2 * 3 / 4 * 16 * 64 * 4
