"""pull-halving: Swing-halving whose long steps may be one-way shifts (pull_halving.py).

Oracles: the symbolic execution (every chip ends with every chip's data exactly once), numbers
summed against numpy's sum, the simulator (it routes every transfer) against the closed form,
and the hop counts the construction is built for: a dim of n >= 32 spends n/2 hops on its long
steps (a ring of 32: 16, its diameter, where Swing's long steps spend 19).
"""

import numpy as np
import pytest

import gspmd_viz.sim as sim
from gspmd_viz.sim import execute
from gspmd_viz.sim.collectives.pull_halving import pull_distances

SHAPES = [(32,), (64,), (2, 32), (32, 4), (4, 4, 32), (32, 32)]


def _ids(shape):
    return "x".join(map(str, shape))


@pytest.mark.parametrize("shape", SHAPES, ids=_ids)
def test_every_chip_gets_every_contribution_once(shape):
    sched = sim.schedule(sim.torus(shape), "all-reduce", "pull-halving")
    final = execute.contributions(sched)
    assert final.all()  # the or-combine raised already if any contribution came twice


def test_numbers_add_up():
    topo = sim.torus((2, 32))
    sched = sim.schedule(topo, "all-reduce", "pull-halving")
    data = np.random.default_rng(0).integers(-1000, 1000, (topo.n_chips, sched.n_chunks))
    out = execute.run(sched, data, combine="add")
    assert (out == data.sum(axis=0)).all()


@pytest.mark.parametrize("shape", [*SHAPES, (64, 32)], ids=_ids)
def test_simulator_equals_closed_form(shape):
    topo = sim.torus(shape)
    chunks = sim.schedule(topo, "all-reduce", "pull-halving").n_chunks
    cases = [(chunks, "tpu-v3"), (chunks * 2**14, "tpu-v3"), (chunks * 2**22, "tpu-v6e")]
    for nbytes, chip in cases:
        tl = sim.simulate(topo, "all-reduce", nbytes, "pull-halving", chip=chip)
        cf = sim.closed_form(topo, "all-reduce", nbytes, "pull-halving", chip=chip)
        assert tl.time_s == pytest.approx(cf, rel=1e-9)
        assert tl.lower_bound_s <= tl.time_s


@pytest.mark.parametrize("shape", [(32,), (64, 32)], ids=_ids)
def test_transfers_move_along_one_dim_over_existing_links(shape):
    """Every transfer stays in its line and crosses links the torus has; each step's longest
    route is its distance, and a dim of n spends n/2 hops on its long steps."""
    topo = sim.torus(shape)
    sched = sim.schedule(topo, "all-reduce", "pull-halving")
    for step in sched.steps:
        moved = (topo.coords[step.src] != topo.coords[step.dst]).sum(axis=1)
        assert (moved == 1).all()
        _, links, _ = topo.route(step.src, step.dst)
        assert topo.link_exists[links].all()
    for n in shape:
        long = [min(d % n, -d % n) for d in pull_distances(n) if abs(d) > 1]
        assert sum(long) == n // 2
    if len(shape) == 2:  # the registry's estimate counts a 2-D schedule exactly
        estimate = sim.ALGORITHMS["pull-halving"].transfers(topo.n_chips)
        assert sum(len(step) for step in sched.steps) == estimate


def test_the_ring_of_32_reaches_its_diameter():
    ring = sim.torus((32,))
    hops = [r.max_hops for r in sim.simulate(ring, "all-reduce", 8, "pull-halving").steps]
    swing = [r.max_hops for r in sim.simulate(ring, "all-reduce", 2, "swing").steps]
    assert sum(hops[2:-2]) == 16 == sim.latency_bound(ring) / sim.chip("tpu-v3").hop_latency_s
    assert sum(swing) == 21 and sum(swing[2:]) == 19


def test_pull_halving_is_auto_at_one_mebibyte_on_the_pod():
    pod = sim.preset("tpu-v3-pod")
    name, pieces, why = sim.choose(pod, "all-reduce", 2**20, "tpu-v3", pieces=1)
    assert (name, pieces) == ("pull-halving", 1) and "next swing-halving" in why
    times = {n: sim.closed_form(pod, "all-reduce", 2**20, n) for n in sim.applicable(pod)}
    assert min(times, key=times.get) == "pull-halving"


@pytest.mark.parametrize(
    ("topo", "reason"),
    [
        (sim.torus((16, 16)), "every dim has fewer than 32 chips: use swing-halving"),
        (sim.torus((32, 32), wrap=False), "dim 0 has no wraparound"),
        (sim.torus((24, 32)), "dim 0 has 24 chips; logarithmic algorithms need powers of two"),
        (sim.torus((4, 8)), "every dim has fewer than 32 chips"),
    ],
)
def test_refusals_name_the_reason(topo, reason):
    with pytest.raises(ValueError, match=f"'pull-halving' cannot run on shape .*{reason}"):
        sim.schedule(topo, "all-reduce", "pull-halving")
    assert "pull-halving" not in sim.applicable(topo)
