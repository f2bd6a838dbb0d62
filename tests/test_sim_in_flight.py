"""A payload in pieces (sim.in_flight): latency in flight overlaps other pieces' bytes.

Oracles: lockstep's own sum (one piece), the pipeline formula worked out by hand for identical
steps, the closed form's busiest-link clock (exact when one link is the busiest of every step),
and the bounds no schedule beats (diameter x alpha, the bandwidth lower bound).
"""

import pytest
import test_sim_logarithmic  # its topologies, and how it names them
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz.sim as sim
from gspmd_viz.sim import in_flight

TOPOLOGIES = [*test_sim_logarithmic.TOPOLOGIES, sim.torus((32, 32))]
STEPPED = [a.name for a in sim.ALGORITHMS.values() if a.costs is not None]


def _cases(topo):
    for kind in ("all-reduce", "all-to-all"):
        for name in sim.applicable(topo, kind):
            if name in STEPPED and sim.ALGORITHMS[name].transfers(topo.n_chips) <= 10**6:
                yield kind, name


def _busiest_every_step(tl) -> bool:
    """Whether one link is among the busiest of every step (piece 0's records: all alike)."""
    common = None
    for r in tl.steps:
        if r.piece == 0:
            top = set(r.links[r.link_bytes >= r.max_link_bytes].tolist())
            common = top if common is None else common & top
    return bool(common)


@pytest.mark.parametrize("topo", TOPOLOGIES[:4], ids=test_sim_logarithmic._ids)
def test_one_piece_is_lockstep(topo):
    """Each step its busiest link's bytes / beta plus its longest route x alpha, one after
    another: the records tile the time exactly."""
    for kind, name in _cases(topo):
        tl = sim.simulate(topo, kind, 3 * 2**20, name, pad=True, pieces=1)
        beta, alpha = tl.chip.ici_link_bandwidth_Bps, tl.chip.hop_latency_s
        t = 0.0
        for r in tl.steps:
            assert r.piece == 0 and r.start_s == t
            assert r.time_s == r.max_link_bytes / beta + r.max_hops * alpha
            t += r.time_s
        assert tl.time_s == t and sum(p.time_s for p in tl.phases) == pytest.approx(t)


@given(
    st.integers(1, 12),
    st.integers(1, 8),
    st.floats(1e-7, 1e-4),
    st.floats(0.0, 1e-4),
)
def test_identical_steps_follow_the_pipeline_formula(n_steps, pieces, step_bytes_s, hop_s):
    """S steps of b seconds of bytes (whole payload) and h of hops, in k pieces of b/k each.
    If h >= (k-1) b/k, a piece's next step is ready by the time the link has sent every piece's
    current one: the last piece ends at S h + (S + k - 1) b/k. Otherwise the link never idles:
    it sends S k pieces of b/k back to back, and the last arrives h later: S b + h."""
    costs = [(step_bytes_s, hop_s)] * n_steps
    piece = step_bytes_s / pieces
    if hop_s >= (pieces - 1) * piece:
        want = n_steps * hop_s + (n_steps + pieces - 1) * piece
    else:
        want = n_steps * step_bytes_s + hop_s
    assert in_flight.closed_form(costs, pieces) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=test_sim_logarithmic._ids)
def test_simulator_equals_closed_form_where_one_link_is_busiest_in_every_step(topo):
    """The closed form keeps one clock for the busiest link: exact when one link is busiest in
    every step; otherwise steps of different links overlap and the simulator ends sooner."""
    exact = 0
    for kind, name in _cases(topo):
        for pieces in (2, 3, 4):
            nbytes = sim.schedule(topo, kind, name).n_chunks * pieces * 3 * 2**12
            tl = sim.simulate(topo, kind, nbytes, name, pieces=pieces)
            cf = sim.closed_form(topo, kind, nbytes, name, pieces=pieces)
            lockstep = sim.closed_form(topo, kind, nbytes, name)
            assert tl.time_s <= cf * (1 + 1e-9) and cf <= lockstep * (1 + 1e-9), (kind, name)
            if _busiest_every_step(tl):
                assert tl.time_s == pytest.approx(cf, rel=1e-9), (kind, name, pieces)
                exact += 1
            assert len(tl.steps) == pieces * len(tl.schedule.steps)
            assert sorted(r.piece for r in tl.steps) == sorted(list(range(pieces)) * len(
                tl.schedule.steps))  # fmt: skip
    if topo.ndim == 2 and topo.shape[0] == topo.shape[1] and all(topo.wrap):
        assert exact  # the square tori's Swing family loads every link alike


@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.sampled_from([2, 3, 4]),
    st.sampled_from([1, 2**10, 2**20]),
)
def test_pieces_never_beat_the_bounds(shape, wrap, pieces, unit):
    """Every chip needs data from the farthest one (diameter x alpha), and every link still
    sends all its bytes (the bandwidth lower bound): overlap cannot beat either."""
    topo = sim.torus(tuple(shape), tuple(wrap[: len(shape)]))
    for kind, name in _cases(topo):
        nbytes = sim.schedule(topo, kind, name).n_chunks * pieces * unit
        tl = sim.simulate(topo, kind, nbytes, name, pieces=pieces)
        assert tl.time_s >= max(sim.latency_bound(topo), tl.lower_bound_s) * (1 - 1e-12)


def test_one_mebibyte_on_the_pod_overlaps_hops_and_bytes():
    """pull-halving on the 32x32 pod: one piece's chain (its hops, its share of the bytes) and
    the busiest link's bytes of all pieces each bound the time from below; lockstep adds them."""
    pod, s = sim.preset("tpu-v3-pod"), 2**20
    lockstep = sim.simulate(pod, "all-reduce", s, "pull-halving")
    beta, alpha = lockstep.chip.ici_link_bandwidth_Bps, lockstep.chip.hop_latency_s
    hops = sum(r.max_hops for r in lockstep.steps) * alpha
    link = sum(r.max_link_bytes for r in lockstep.steps) / beta
    assert lockstep.time_s == pytest.approx(hops + link)
    before = lockstep.time_s
    for pieces in (2, 4, 8):
        tl = sim.simulate(pod, "all-reduce", s, "pull-halving", pieces=pieces)
        assert max(hops + link / pieces, link) <= tl.time_s < before
        before = tl.time_s
    auto = sim.simulate(pod, "all-reduce", s, "auto")
    bound = max(sim.latency_bound(pod), auto.lower_bound_s)
    assert (auto.algorithm, auto.pieces) == ("pull-halving", in_flight.PIECES[-1])
    assert auto.time_s / bound <= 1.5 < lockstep.time_s / bound  # issue 48's goal at 1 MiB
    assert "in 4 pieces" in auto.summary() and "in 4 pieces" in auto.why


def test_bad_pieces_are_refused_with_the_reason():
    ring, pod = sim.torus((8,)), sim.preset("tpu-v3-pod")
    for bad in (0, -1, 1.5, True, "2", in_flight.MAX_PIECES + 1):
        with pytest.raises(ValueError, match="pieces must be a whole number from 1 to 64"):
            sim.simulate(ring, "all-reduce", 2**10, "swing", pieces=bad)
    with pytest.raises(ValueError, match="'ring' runs in one piece; pieces=2 needs a closed form "
                       "step by step, which these have: recursive-doubling"):  # fmt: skip
        sim.simulate(ring, "all-reduce", 2**10, "ring", pieces=2)
    with pytest.raises(ValueError, match="runs in one piece"):
        sim.closed_form(pod, "all-reduce", 2**20, "torus-2d", pieces=4)
    with pytest.raises(ValueError, match="'swing in 3 pieces'.*pad=True"):
        sim.simulate(ring, "all-reduce", 2**10, "swing", pieces=3)
    padded = sim.simulate(ring, "all-reduce", 2**10, "swing", pieces=3, pad=True)
    assert padded.chunk_bytes * padded.schedule.n_chunks >= 2**10
    with pytest.raises(ValueError, match="no all-reduce algorithm runs .* in 2 pieces"):
        sim.choose(sim.torus((3, 5)), "all-reduce", 2**20, "tpu-v3", pieces=2)
