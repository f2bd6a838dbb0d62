"""Logarithmic (small-message) collectives: correct data, simulator equals closed form, auto.

Oracles: the symbolic execution (every chip ends with every contribution exactly once), the
direct all-to-all's delivery (chip j holds chip i's chunk j at chunk i), the closed forms of
logarithmic.py (they count routes, the simulator routes every transfer), and the textbook
counts (recursive doubling on a line of n wrapped chips: n - 1 hops, n - 1 routes per link).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz.sim as sim
from gspmd_viz.sim import execute

LOGARITHMIC = ("recursive-doubling", "rabenseifner", "swing", "swing-halving", "pull-halving")
TOPOLOGIES = [
    sim.torus((2,)),
    sim.torus((8,)),
    sim.torus((32,)),
    sim.torus((4, 4)),
    sim.torus((8, 16)),
    sim.torus((4, 8), wrap=False),
    sim.torus((2, 4, 8)),
    sim.torus((1, 4)),
    sim.preset("tpu-v5e-8x16"),
]


def _ids(topo):
    return "x".join(map(str, topo.shape)) + "-" + "".join("tf"[not w] for w in topo.wrap)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_ids)
def test_every_chip_gets_every_contribution_once(topo):
    ran = []
    for name in LOGARITHMIC:
        if name not in sim.applicable(topo):
            continue
        assert execute.contributions(sim.schedule(topo, "all-reduce", name)).all(), name
        ran.append(name)
    assert {"recursive-doubling", "rabenseifner"} <= set(ran)


@pytest.mark.parametrize("topo", [t for t in TOPOLOGIES if all(t.wrap) or max(t.shape) <= 2],
                         ids=_ids)  # fmt: skip
def test_bruck_delivers_like_the_direct_all_to_all(topo):
    sched = sim.schedule(topo, "all-to-all", "bruck")
    n = topo.n_chips
    start = np.arange(n * n).reshape(n, n)  # token i * n + j: chip i's data for chip j
    assert (execute.run(sched, start, combine="add") == start.T).all()


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_ids)
@pytest.mark.parametrize("chip", ["tpu-v3", "tpu-v6e"])
def test_simulator_equals_closed_form(topo, chip):
    for kind in ("all-reduce", "all-to-all"):
        for name in sim.applicable(topo, kind):
            if name not in (*LOGARITHMIC, "bruck"):
                continue
            nbytes = sim.schedule(topo, kind, name).n_chunks * 3 * 2**12
            tl = sim.simulate(topo, kind, nbytes, algorithm=name, chip=chip)
            cf = sim.closed_form(topo, kind, nbytes, algorithm=name, chip=chip)
            assert tl.time_s == pytest.approx(cf, rel=1e-9), (kind, name)
            assert tl.lower_bound_s <= tl.time_s


@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_no_schedule_beats_the_latency_bound(shape, wrap):
    """Diameter x alpha: every chip needs data from every other chip, so no algorithm of any
    kind finishes sooner (payload of one byte per chunk, so bytes barely count)."""
    topo = sim.torus(tuple(shape), tuple(wrap[: len(shape)]))
    bound = sim.latency_bound(topo)
    for kind in sim.KINDS:
        for name in sim.applicable(topo, kind):
            nbytes = sim.schedule(topo, kind, name).n_chunks
            assert sim.simulate(topo, kind, nbytes, algorithm=name).time_s >= bound, (kind, name)


@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_textbook_counts_on_one_ring(n):
    """Recursive doubling: distances 1, 2, ..., n/2 sum to n - 1 hops, each a full buffer on
    as many routes per link; Swing's distances on a ring are 1, 1, 3, 5, 11 (fewer hops)."""
    ring, s = sim.torus((n,)), 2**20
    beta, alpha = sim.chip("tpu-v3").ici_link_bandwidth_Bps, sim.chip("tpu-v3").hop_latency_s
    tl = sim.simulate(ring, "all-reduce", s, algorithm="recursive-doubling")
    assert tl.time_s == pytest.approx((n - 1) * (s / beta + alpha))
    hops = sum(step.max_hops for step in sim.simulate(ring, "all-reduce", s, "swing").steps)
    expected = [1, 1, 3, 5, 11][: n.bit_length() - 1]
    assert hops == sum(min(d % n, n - d % n) for d in expected) < n - 1


def test_swing_halving_classes_halve_and_ranges_are_contiguous():
    """The chips a chip still meets form classes that halve at every step, and the block order
    makes every class one range: each halving send is one transfer of the peer's class."""
    from gspmd_viz.sim.collectives import swing_halving as sh
    from gspmd_viz.sim.collectives.logarithmic import signed_peers

    topo = sim.torus((8, 16))
    for order, mirror in [([1, 0], False), ([0, 1], True)]:
        steps = sh.part_steps(topo, order, mirror)
        assert [rho for _, rho, _ in steps[: sh.halving_steps(steps)]] == [1, 1, -1, -1]
        labels = sh.classes(topo, [signed_peers(topo, d, rho, m) for d, rho, m in steps])
        assert [len(set(lab)) for lab in labels] == [2**k for k in range(len(steps) + 1)]
    sched = sim.schedule(topo, "all-reduce", "swing-halving")
    assert all(len(step) == 4 * topo.n_chips for step in sched.steps)  # one transfer per part


def test_small_messages_prefer_logarithmic_and_large_prefer_rings():
    pod = sim.preset("tpu-v3-pod")
    small, small_pieces, why_small = sim.choose(pod, "all-reduce", 2**15, "tpu-v3")
    large, large_pieces, why_large = sim.choose(pod, "all-reduce", 2**30, "tpu-v3")
    assert small == "pull-halving" and large == "torus-2d-halves" and large_pieces == 1
    assert "latency-bound" in why_small and "bandwidth-bound" in why_large
    for nbytes, name, pieces in [(2**15, small, small_pieces), (2**30, large, large_pieces)]:
        times = {(n, k): sim.closed_form(pod, "all-reduce", nbytes, n, pieces=k)
                 for n in sim.applicable(pod) for k in sim.in_flight.PIECES
                 if sim.ALGORITHMS[n].runs_in(k)}  # fmt: skip
        assert min(times, key=times.get) == (name, pieces)
    tl = sim.simulate(pod, "all-reduce", 2**15, algorithm="auto")
    assert (tl.algorithm, tl.pieces) == (small, small_pieces)
    assert f"auto: {sim.registry.label(small, small_pieces)}" in tl.summary()
    one = sim.choose(pod, "all-reduce", 2**15, "tpu-v3", pieces=1)
    assert one.pieces == 1 and one.algorithm == "pull-halving"


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="powers of two"):
        sim.schedule(sim.torus((3, 4)), "all-reduce", "recursive-doubling")
    with pytest.raises(ValueError, match="no wraparound"):
        sim.schedule(sim.torus((4, 8), wrap=False), "all-reduce", "swing")
    with pytest.raises(ValueError, match="powers of two"):
        sim.closed_form(sim.torus((6,)), "all-to-all", 2**20, "bruck")
    assert "swing" not in sim.applicable(sim.torus((4, 8), wrap=False))


@pytest.mark.parametrize("x", [4, 16, 32])
def test_scaling_book_formula_beside_our_ring(x):
    """max(T_min X/2, V/W_ici): its bandwidth term is our bidirectional ring's times X/(X-1);
    its latency term counts X/2 hops where our lockstep ring waits a hop in each of X-1 steps."""
    axis, spec = sim.torus((x,)), sim.chip("tpu-v5e")
    big, tiny = 2**34, 1
    book = sim.cost.scaling_book_time("all-gather", big, x, chip=spec)
    ours = sim.closed_form(axis, "all-gather", big, "bidirectional-ring", chip=spec)
    assert book / ours == pytest.approx(x / (x - 1), rel=1e-3)
    assert sim.cost.scaling_book_time("all-reduce", tiny, x, spec) == 2 * x / 2 * spec.hop_latency_s
    with pytest.raises(ValueError, match="not 'all-to-all'"):
        sim.cost.scaling_book_time("all-to-all", big, x)
