"""xla_cost reads FLOPs and memory off both compiled programs: checked against closed forms."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec

import gspmd_viz as gv
from gspmd_viz.core.cost.plan_cost import ALL_REDUCE_FLOPS, NAN_KEEPING_FLOPS
from gspmd_viz.core.partition.partitioner import Partitioner
from gspmd_viz.core.spmd import local_kernels
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.xla import cost as xla_cost

MESH = gv.Mesh({"x": 2, "y": 4})
M, K, N = 16, 32, 64


def _matmul(a_spec, b_spec):
    def f(a, b):
        return gv.mesh_split(a, MESH, a_spec) @ gv.mesh_split(b, MESH, b_spec)

    return f


def _side(f):
    args = jnp.ones((M, K)), jnp.ones((K, N))
    return xla_cost.compare(f, args, gv.partition(gv.propagate(gv.trace(f, *args))))


@pytest.mark.parametrize(
    "a_spec, b_spec, rows, cols",
    [(("x", None), (None, None), M // 2, N), (("x", None), (None, "y"), M // 2, N // 4)],
)
def test_no_communication_matmul_matches_closed_form_on_both_sides(a_spec, b_spec, rows, cols):
    side = _side(_matmul(a_spec, b_spec))
    b_cols = N if b_spec == (None, None) else N // 4
    # local [rows, K] @ [K, cols]: 2 * rows * K * cols FLOPs; A, B and C shards in f32
    memory = 4 * (rows * K + K * b_cols + rows * cols)
    for measured in (side.ours, side.xla):
        assert measured.flops == 2 * rows * K * cols
        assert measured.memory == memory
        assert measured.wire_bytes == 0


def test_wire_bytes_are_each_sides_own():
    f = _matmul((None, "y"), ("y", None))  # contracting dim split: XLA all-reduces [16, 64]
    args = jnp.ones((M, K)), jnp.ones((K, N))
    prop = gv.propagate(gv.trace(f, *args))
    shared = Partitioner(prop, chip_cost("tpu-v3"), spread=True).run()
    side = xla_cost.compare(f, args, shared)
    ring = 2 * 3 / 4 * M * N * 4
    # the 2 devices along x share the columns: all-reduce [16, 32], all-gather them
    shared_bytes = 2 * 3 / 4 * M * (N // 2) * 4 + 1 / 2 * M * N * 4
    assert (side.ours.wire_bytes, side.xla.wire_bytes) == (shared_bytes, ring)
    assert "FLOPs" in side.text() and "5.0 KiB / 6.0 KiB" in side.text()


def test_sharing_that_holds_more_than_the_bound_allows_is_not_kept():
    # sharing would send 5 KiB, not 6, for half the FLOPs, but gathering the columns back holds
    # the [16, 64] result twice (12.5 KiB compiled against XLA's 10.5): XLA's plan is kept
    side = _side(_matmul((None, "y"), ("y", None)))
    assert side.ours == side.xla


def test_ratios_are_ours_over_xlas_and_one_when_both_are_zero():
    side = xla_cost.Side(xla_cost.Measured(300.0, 40, 0.0), xla_cost.Measured(200.0, 40, 0.0))
    assert (side.ratio("flops"), side.ratio("memory"), side.ratio("wire_bytes")) == (1.5, 1, 1)
    more = xla_cost.Side(xla_cost.Measured(1.0, 1, 8.0), xla_cost.Measured(1.0, 1, 0.0))
    assert more.ratio("wire_bytes") == float("inf")


@pytest.mark.parametrize(
    "op",
    [
        lambda x: jnp.argmax(x, -1),
        lambda x: jnp.argmin(x, 1),
        lambda x: jnp.cumsum(x, 1),
        lambda x: jax.lax.cummax(x, 2),
        lambda x: (x > 0).astype(jnp.float32),
    ],
)
def test_our_flop_count_is_xlas_on_one_device(op):
    # XLA counts an argmax 9 FLOPs a reduction step, a cumsum N - 1 adds a result and a convert
    # one FLOP an element: counting one a point underrated a mixture of experts' gating
    x = jnp.ones((4, 8, 16))
    spmd = gv.partition(gv.propagate(gv.trace(op, x), mesh=MESH))  # nothing split
    assert spmd.cost.flops == xla_cost.analysis(jax.jit(op).lower(x))[0]


@pytest.mark.parametrize(
    "combine, per_element", [("sum", ALL_REDUCE_FLOPS), ("max", NAN_KEEPING_FLOPS)]
)
def test_an_all_reduce_counts_the_flops_xla_counts(combine, per_element):
    # XLA counts an all-reduce's sum one FLOP an element; our float max keeps a NaN by making
    # integer keys before its pmax and undoing them after, which XLA counts too
    mesh = MESH.to_jax()
    x = jnp.ones((8, 16, 32))  # [4, 16, 32] a device
    local = jax.shard_map(
        lambda a: local_kernels.all_reduce(a, combine, ("y",)),
        mesh=mesh,
        in_specs=PartitionSpec("x"),
        out_specs=PartitionSpec("x"),
        check_vma=False,
    )
    assert xla_cost.analysis(jax.jit(local).lower(x))[0] == per_element * 4 * 16 * 32


@pytest.mark.parametrize("blocks", [2, 4, 8])
def test_flops_count_a_fused_chain_once_however_many_slices_read_it(blocks):
    # XLA:CPU fuses a * a + a into each block's slice, and its cost analysis charges every
    # fusion for the whole chain; unfused (xla.cost.WORK), the chain counts once: 2 FLOPs an
    # element of [16, 32]. benchmarks/fusion_count.py times both: the blocks take the time of
    # computing the array once.
    def cut(a):
        whole = a * a + a
        rows = 16 // blocks
        return [whole[i * rows : (i + 1) * rows] for i in range(blocks)]

    lowered = jax.jit(cut).lower(jnp.ones((16, 32)))
    once = 2 * 16 * 32
    work, _, fused = xla_cost.analysis(lowered)
    assert (work, fused) == (once, blocks * once)
