"""The same schedules run for real on 8 CPU devices (jax.lax.ppermute in jax.shard_map).

Oracle: jax.lax.psum / jax.lax.all_to_all on the same integers, compared exactly.
"""

import jax
import numpy as np
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.sim import execute, replay

DEVICES = jax.devices()  # conftest gave the process 8 CPU devices

EIGHT = [
    sim.preset("2x4"),
    sim.torus((2, 4), wrap=False),
    sim.preset("ring-8"),
    sim.torus((8,), False),
    sim.torus((2, 2, 2)),
]


def _data(sched, seed=0, width=3):
    rng = np.random.default_rng(seed)
    return rng.integers(-(2**20), 2**20, (8, sched.n_chunks, width)).astype(np.int32)


@pytest.mark.parametrize("topo", EIGHT, ids=lambda t: t.describe())
def test_all_reduce_equals_psum_exactly(topo):
    for name in sim.algorithms("all-reduce"):
        try:
            sched = sim.schedule(topo, "all-reduce", name)
        except ValueError:
            continue
        x = _data(sched)
        assert np.array_equal(
            replay.run_on_devices(sched, x, DEVICES), replay.psum_on_devices(x, DEVICES)
        ), name


def test_reduce_scatter_and_all_gather_match_psum():
    topo = sim.preset("2x4")
    for name in ("bidirectional-ring", "torus-2d-halves"):
        rs = sim.schedule(topo, "reduce-scatter", name)
        x = _data(rs, seed=1)
        owners = execute.reduce_scatter_owners(rs)  # symbolic: who ends with which chunk
        got = replay.run_on_devices(rs, x, DEVICES)
        total = replay.psum_on_devices(x, DEVICES)
        chunks = np.arange(rs.n_chunks)
        assert np.array_equal(got[owners, chunks], total[owners, chunks])
        # all-gather: start with only the owned chunks; the result is their sum = psum of start
        ag = sim.schedule(topo, "all-gather", name)
        start = np.zeros_like(x)
        start[owners, chunks] = x[owners, chunks]
        assert np.array_equal(
            replay.run_on_devices(ag, start, DEVICES), replay.psum_on_devices(start, DEVICES)
        )


@pytest.mark.parametrize("name", ["direct", "bruck"])
def test_all_to_all_matches_jax(name):
    sched = sim.schedule(sim.preset("2x4"), "all-to-all", name)
    x = _data(sched, seed=2)
    assert np.array_equal(
        replay.run_on_devices(sched, x, DEVICES), replay.all_to_all_on_devices(x, DEVICES)
    )


def test_a_broken_schedule_is_caught():
    sched = sim.schedule(sim.preset("2x4"), "all-reduce", "torus-2d")
    del sched.steps[-1]  # forget the last all-gather step
    x = _data(sched, seed=3)
    assert not np.array_equal(
        replay.run_on_devices(sched, x, DEVICES), replay.psum_on_devices(x, DEVICES)
    )


def test_rounds_are_permutations():
    sched = sim.schedule(sim.preset("2x4"), "all-reduce", "naive")
    for step in sched.steps:
        groups = replay.rounds(step)
        assert sorted(np.concatenate(groups)) == list(range(len(step)))
        for g in groups:
            assert len(set(step.src[g])) == len(g) == len(set(step.dst[g]))


def test_too_few_devices_say_what_to_do():
    sched = sim.schedule(sim.preset("2x4"), "all-reduce", "torus-2d")
    with pytest.raises(ValueError, match=r"gv.use_cpu_devices\(8\)"):
        replay.run_on_devices(sched, _data(sched), DEVICES[:4])
