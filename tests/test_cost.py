"""Acceptance of the time-based partitioner against XLA's own, per device, on the zoo and on
random annotations: FLOPs <= 1.05x and memory <= 1.10x XLA's (each compiled program's own cost
and memory analysis), wire bytes <= 1.0x (XLA's reduce-scatter counted fairly), results equal
the unpartitioned program. A program over a bound fails with its measured ratios."""

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz import examples
from gspmd_viz.core.cost import OVER_HBM_S, peak_bytes
from gspmd_viz.core.partition import chip_cost

BOUNDS = {"flops": 1.05, "memory": 1.10, "wire_bytes": 1.0}


def check_against_xla(ex):
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    spmd = gv.partition(prop)
    for a, b in zip(
        jax.tree.leaves(spmd(*ex.args)),
        jax.tree.leaves(spmd.program.unpartitioned(*ex.args)),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    side = gv.xla.compare_cost(ex.fn, ex.args, spmd)
    over = [k for k, bound in BOUNDS.items() if side.ratio(k) > bound]
    assert not over, f"{ex.name} {ex.specs}: over {over}: ours/XLA {side.text()}"


@pytest.mark.parametrize("name", sorted(examples.ZOO))
def test_zoo_within_xla_flops_memory_and_bytes(name):
    check_against_xla(examples.get(name))


@st.composite
def annotated(draw):
    name = draw(st.sampled_from(sorted(examples.ZOO)))
    base = examples.get(name)
    specs = {}
    for ann, rank in base.ranks.items():
        dims = [[] for _ in range(rank)]
        for axis in draw(st.permutations(base.mesh.axis_names)):
            where = draw(st.integers(-1, rank - 1))
            if where >= 0:
                dims[where].append(axis)
        specs[ann] = draw(st.none() | st.just(tuple(tuple(d) or None for d in dims)))
    return base.with_specs(**specs)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(annotated())
def test_random_annotations_within_xla_flops_memory_and_bytes(ex):
    check_against_xla(ex)


def test_the_record_states_flops_bytes_time_and_memory():
    ex = examples.get("mlp")  # x [16/x, 32] @ w1 [32, 64/y] -> relu -> @ w2 [64/y, 32]
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))
    cost = spmd.cost
    # closed form: per device 2*8*32*16 + 8*16 (relu) + 2*8*16*32 FLOPs
    assert cost.flops == 2 * 8 * 32 * 16 + 8 * 16 + 2 * 8 * 16 * 32
    assert cost.wire_bytes == spmd.wire_bytes
    chip = gv.sim.chip("tpu-v3")
    comm = sum(
        gv.sim.collective_time(c.kind, c.payload_bytes, c.group_size, chip)
        for c in spmd.collectives
    )
    assert cost.comm_s == pytest.approx(comm)
    assert cost.compute_s >= cost.flops / chip.peak_bf16_flops
    assert cost.peak_bytes >= sum(
        spmd.prop.sharding(v).shard_bytes(v.shape, v.dtype) for v in spmd.program.inputs
    )
    assert "FLOPs" in str(cost) and "tpu-v3" in str(cost)


def test_peak_memory_counts_buffers_until_their_last_use():
    # no instructions: only the inputs; outputs live to the end
    assert peak_bytes({"a": 10, "b": 6}, [], ["a"]) == 16


def test_unknown_chip_is_explained():
    ex = examples.get("mlp")
    with pytest.raises(ValueError, match="known chips"):
        gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)), chip="tpu-v9")


def test_buffers_beyond_hbm_cost_a_penalty_and_the_excess_streamed():
    chip = chip_cost(gv.sim.Chip("tiny", 1e12, 4096, 1e9, 1e10, 1e-6))
    assert chip.memory_penalty(4096) == 0
    assert chip.memory_penalty(4096 + 10**9) == pytest.approx(OVER_HBM_S + 1.0)
