"""Our halo exchange against XLA's partitioner for the same annotations: never more bytes.

XLA compiles the same convolution / pooling with the input pinned to the same spatial split
(gv.mesh_split before and after the op); its collectives are read from the partitioned HLO.
Bytes are per-device operand bytes summed over collectives (a collective-permute's wire bytes).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jax import lax

import gspmd_viz as gv
from gspmd_viz.core.halo_program import spatial_program

RNG = np.random.default_rng(1)


def _xla_bytes(fn, args, mesh: gv.Mesh, spec_in, spec_out) -> tuple[float, list]:
    def pinned(x, *rest):
        x = gv.mesh_split(x, mesh, spec_in)
        return gv.mesh_split(fn(x, *rest), mesh, spec_out)

    found = gv.xla.collectives(pinned, *args, mesh=mesh)
    return sum(c.wire_bytes for c in found), found


def _ours(fn, args, mesh: gv.Mesh, axes) -> float:
    prog = spatial_program(fn, *args, mesh=mesh, axes=axes)
    np.testing.assert_allclose(prog(), fn(*args), rtol=1e-5, atol=1e-5)
    return sum(c.wire_bytes for c in prog.collectives(mesh))


def _specs(ndim: int, axes: dict[int, str]):
    return tuple(axes.get(d) for d in range(ndim))


@st.composite
def conv_cases(draw):
    two_d = draw(st.booleans())
    mesh_axes = (
        draw(st.sampled_from([{"x": 2, "y": 4}, {"x": 4, "y": 2}]))
        if two_d
        else {"x": draw(st.sampled_from([2, 4, 8]))}
    )
    sizes = [draw(st.integers(8, 24)) for _ in range(2)]
    window = draw(st.integers(1, 5))
    stride = draw(st.integers(1, 3))
    padding = draw(st.sampled_from(["SAME", "VALID", ((2, 1), (1, 0))]))
    dilation = draw(st.integers(1, 2))
    return mesh_axes, sizes, window, stride, padding, dilation, draw(st.booleans())


def _windowed_case(case):
    """(fn, args, mesh, split dims) of a drawn conv or max-pooling."""
    mesh_axes, sizes, window, stride, padding, dilation, pooling = case
    x = jnp.asarray(RNG.normal(size=(2, 3, *sizes)), jnp.float32)
    if pooling:
        dims, strides = (1, 1, window, window), (1, 1, stride, stride)
        pads = padding if isinstance(padding, str) else ((0, 0), (0, 0), *padding)

        def fn(x):
            return lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, pads, None,
                                     (1, 1, dilation, dilation))  # fmt: skip

        args = (x,)
    else:
        w = jnp.asarray(RNG.normal(size=(4, 3, window, window)), jnp.float32)

        def fn(x, w):
            return lax.conv_general_dilated(x, w, (stride, stride), padding, None,
                                            (dilation, dilation))  # fmt: skip

        args = (x, w)
    axes = {2: "x", 3: "y"} if len(mesh_axes) == 2 else {2: "x"}
    return fn, args, gv.Mesh(mesh_axes), axes


@settings(max_examples=15)
@given(conv_cases())
def test_conv_and_pooling_bytes_at_most_xlas(case):
    """The spatial program alone (halos only, activations stay split) against XLA, on the
    draws where XLA keeps halos too. The draws where XLA gathers or all-reduces are covered
    by gv.partition's property below, which holds on every draw."""
    fn, args, mesh, axes = _windowed_case(case)
    assume(jnp.asarray(fn(*args)).size > 0)
    ours = _ours(fn, args, mesh, axes)
    theirs, found = _xla_bytes(fn, args, mesh, _specs(4, axes), _specs(4, axes))
    # XLA may instead convolve each spatial shard partially and all-reduce a small output, or
    # gather a dim its halos would cover: the spatial program weighs no other plan
    assume(not found or any(c.kind != "all-reduce" for c in found))
    assume(not any(c.kind == "all-gather" for c in found))
    assert ours <= theirs + 1e-9, (ours, theirs, [str(c) for c in found])


def _partitioned(fn, args, mesh: gv.Mesh, specs) -> float:
    """Our partitioner's bytes for fn with its first input and its output split as `specs`
    (exact against the program run on one device)."""

    def split(x, *rest):
        x = gv.mesh_split(x, mesh, specs)
        return gv.mesh_split(fn(x, *rest), mesh, specs)

    prog = gv.trace(split, *args)
    spmd = gv.partition(gv.propagate(prog))
    np.testing.assert_allclose(spmd(*args), prog.unpartitioned(*args), rtol=1e-4, atol=1e-4)
    return spmd.wire_bytes


@settings(max_examples=15)
@given(conv_cases())
def test_the_partitioner_on_random_convs_and_pooling_against_xla(case):
    """gv.partition costs each plan of a split conv dim (halos around the output rows, or
    partial convs over the window taps and a sum) and takes the cheaper: never more bytes
    than XLA, whichever plan XLA takes (halos, gather, or partial sums and an all-reduce)."""
    fn, args, mesh, axes = _windowed_case(case)
    assume(jnp.asarray(fn(*args)).size > 0)
    specs = _specs(4, axes)
    ours = _partitioned(fn, args, mesh, specs)
    theirs, found = _xla_bytes(fn, args, mesh, specs, specs)
    assert ours <= theirs + 1e-9, (ours, theirs, [str(c) for c in found])


@pytest.mark.parametrize(
    "window, stride, shards, xla_kinds",
    [
        # the taps' plan (the window is over twice the output) costs 576 B + a 64 B sum; XLA
        # keeps halos: 384 B
        (5, 3, 2, {"collective-permute"}),
        # halos reach 4 shards away (XLA would gather): 2 permutes of one row, 384 B; XLA
        # permutes and all-reduces the output, 696 B
        (1, 3, 8, {"collective-permute", "all-reduce"}),
    ],
)
def test_a_conv_dim_takes_the_cheaper_of_halos_and_partial_sums(window, stride, shards, xla_kinds):
    x = jnp.asarray(RNG.normal(size=(2, 3, 8, 8)), jnp.float32)
    w = jnp.asarray(RNG.normal(size=(4, 3, window, window)), jnp.float32)

    def fn(x, w):
        return lax.conv_general_dilated(x, w, (stride, stride), "VALID")

    mesh, specs = gv.Mesh({"x": shards}), _specs(4, {2: "x"})
    ours = _partitioned(fn, (x, w), mesh, specs)
    theirs, found = _xla_bytes(fn, (x, w), mesh, specs, specs)
    assert {c.kind for c in found} == xla_kinds
    assert ours <= theirs, (ours, theirs)


def test_a_conv_whose_output_is_smaller_than_its_window_sums_partial_convs_as_xla_does():
    x = jnp.asarray(RNG.normal(size=(2, 3, 8, 8)), jnp.float32)
    w = jnp.asarray(RNG.normal(size=(4, 3, 4, 4)), jnp.float32)

    def fn(x, w):  # a dilated 4x4 window spans 7 of the 8 rows: 2 output rows
        return lax.conv_general_dilated(x, w, (1, 1), "VALID", None, (2, 2))

    mesh = gv.Mesh({"x": 2})
    halos = _ours(fn, (x, w), mesh, {2: "x"})  # the spatial program: halos around the output
    ours = _partitioned(fn, (x, w), mesh, _specs(4, {2: "x"}))
    theirs, found = _xla_bytes(fn, (x, w), mesh, _specs(4, {2: "x"}), _specs(4, {2: "x"}))
    # XLA:CPU all-reduces the partial convs and keeps its rows: the reduce-scatter it stands for
    assert {c.kind for c in found} == {"reduce-scatter"}
    assert ours <= theirs < halos  # 128 B against the halos' 1152 B


@pytest.mark.parametrize("stride", [1, 2])
def test_xla_also_moves_halos_with_collective_permutes(stride):
    mesh = gv.Mesh({"x": 2, "y": 4})
    x, w = jnp.ones((1, 3, 32, 32)), jnp.ones((4, 3, 3, 3))

    def fn(x, w):
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME")

    axes = {2: "x", 3: "y"}
    ours = _ours(fn, (x, w), mesh, axes)
    theirs, found = _xla_bytes(fn, (x, w), mesh, _specs(4, axes), _specs(4, axes))
    assert {c.kind for c in found} == {"collective-permute"}
    assert ours <= theirs
