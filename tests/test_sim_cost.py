"""The link-level simulator against closed-form alpha-beta models and lower bounds."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz.sim as sim

TOPOLOGIES = [
    sim.torus((4, 4)),
    sim.torus((4, 4), wrap=False),
    sim.torus((2, 4)),
    sim.torus((3, 5), wrap=(True, False)),
    sim.torus((6, 8), wrap=(False, True)),
    sim.torus((8,)),
    sim.torus((5,), wrap=False),
    sim.torus((3, 3)),
    sim.torus((4, 2, 3)),
    sim.torus((4, 4, 4), wrap=(True, False, True)),
]
# payloads divisible by every chunk count used above (2 * halves * n_chips)
SIZES = [2**6 * 2520 * 64, 2**20 * 2520 * 64]


def _cases(topo):
    for kind in sim.KINDS:
        for name in sim.algorithms(kind):
            try:
                sim.schedule(topo, kind, name)
            except ValueError:
                continue
            yield kind, name


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=lambda t: t.describe())
@pytest.mark.parametrize("nbytes", SIZES)
def test_simulator_equals_closed_form(topo, nbytes):
    for kind, name in _cases(topo):
        for chip in ("tpu-v3", "tpu-v5e"):
            tl = sim.simulate(topo, kind, nbytes, algorithm=name, chip=chip)
            cf = sim.closed_form(topo, kind, nbytes, algorithm=name, chip=chip)
            assert tl.time_s == pytest.approx(cf, rel=0.01), (kind, name)
            assert sum(p.time_s for p in tl.phases) == pytest.approx(tl.time_s)
            assert sum(s.time_s for s in tl.steps) == pytest.approx(tl.time_s)


@given(
    st.integers(2, 6),
    st.integers(2, 6),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["ring", "bidirectional-ring", "torus-2d", "torus-2d-halves", "naive"]),
    st.integers(1, 64),
)
def test_closed_form_property(a, b, w0, w1, name, mult):
    topo = sim.torus((a, b), wrap=(w0, w1))
    nbytes = 4 * a * b * mult * 1000
    tl = sim.simulate(topo, "all-reduce", nbytes, algorithm=name)
    assert tl.time_s == pytest.approx(sim.closed_form(topo, "all-reduce", nbytes, name), rel=0.01)
    # a lower bound holds for every algorithm
    assert tl.lower_bound_s <= tl.time_s * (1 + 1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (8, 8), (4, 8), (32, 32)])
def test_phase_one_payload_is_phase_zero_over_column_size(shape):
    topo = sim.torus(shape)
    nbytes = 2**20 * 3
    for name in ("torus-2d", "torus-2d-halves"):
        tl = sim.simulate(topo, "all-reduce", nbytes, algorithm=name)
        p0, p1, p2 = tl.phases
        assert p0.payload_bytes == nbytes == p2.payload_bytes
        if name == "torus-2d":
            assert p1.payload_bytes == p0.payload_bytes / shape[0]  # column size
        else:  # half the payload goes columns-first, half rows-first
            assert p1.payload_bytes == nbytes / 2 / shape[0] + nbytes / 2 / shape[1]


def test_halves_use_twice_the_links_of_the_phased_algorithm():
    """Plain phases keep 2 of a chip's 4 links busy; the halves keep all 4 busy."""
    pod = sim.preset("tpu-v3-pod")
    nbytes = 2**30
    plain = sim.simulate(pod, "all-reduce", nbytes, algorithm="torus-2d")
    halves = sim.simulate(pod, "all-reduce", nbytes, algorithm="torus-2d-halves")
    step = plain.steps[0]
    assert len(step.links) == 2 * pod.n_chips  # +/- links of dim 0 only
    assert len(halves.steps[0].links) == 4 * pod.n_chips
    assert plain.time_s / halves.time_s == pytest.approx(2.0, rel=0.05)
    # bandwidth bound: each chip receives 2 (N-1)/N of the payload over 4 links
    bound = 2 * (1023 / 1024) * nbytes / (4 * sim.chip("tpu-v3").ici_link_bandwidth_Bps)
    assert halves.lower_bound_s == pytest.approx(bound)
    assert halves.time_s / bound < 1.1


def test_all_to_all_is_bisection_limited():
    topo = sim.torus((8, 8))
    nbytes = 2**24
    tl = sim.simulate(topo, "all-to-all", nbytes)
    beta = sim.chip("tpu-v3").ici_link_bandwidth_Bps
    # half the chips send half their buffer across a cut of 2 * 8 links per direction
    bisection = (32 * 32 * nbytes / 64) / (16 * beta)
    injection = (63 / 64) * nbytes / (4 * beta)
    assert tl.lower_bound_s == pytest.approx(max(bisection, injection))
    assert bisection > 2 * injection
    assert bisection <= tl.time_s


def test_latency_and_bandwidth_regimes():
    topo = sim.preset("tpu-v3-pod")
    alpha = sim.chip("tpu-v3").hop_latency_s
    small = sim.simulate(topo, "all-reduce", 4096, algorithm="torus-2d")
    # tiny payload: time ~ number of steps x one hop of latency
    assert small.time_s == pytest.approx(len(small.steps) * alpha, rel=0.01)
    big = sim.closed_form(topo, "all-reduce", 2**32, "torus-2d")
    assert big / sim.closed_form(topo, "all-reduce", 2**31, "torus-2d") == pytest.approx(
        2, rel=0.01
    )


@pytest.mark.parametrize("n", [3, 4, 8, 16])
@pytest.mark.parametrize("kind", ["all-reduce", "reduce-scatter", "all-gather", "all-to-all"])
def test_collective_time_matches_a_simulated_ring(n, kind):
    ring = sim.torus((n,))
    nbytes = 2 * n * 2**16
    name = "direct" if kind == "all-to-all" else "bidirectional-ring"
    tl = sim.simulate(ring, kind, nbytes, algorithm=name)
    assert sim.collective_time(kind, nbytes, n) == pytest.approx(tl.time_s, rel=0.01)


def test_collective_time_edges_and_errors():
    assert sim.collective_time("all-reduce", 2**20, 1) == 0.0
    beta = sim.chip("tpu-v4").ici_link_bandwidth_Bps
    alpha = sim.chip("tpu-v4").hop_latency_s
    assert sim.collective_time("collective-permute", 1e6, 8, chip="tpu-v4") == pytest.approx(
        1e6 / beta + alpha
    )
    with pytest.raises(ValueError, match="unknown collective"):
        sim.collective_time("all-shuffle", 10, 4)
    with pytest.raises(ValueError, match="group_size"):
        sim.collective_time("all-reduce", 10, 0)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "1MB"])
def test_bad_payloads(bad):
    with pytest.raises(ValueError, match="payload"):
        sim.simulate(sim.torus((4, 4)), "all-reduce", bad, algorithm="torus-2d")


def test_indivisible_payload_says_so_or_pads():
    topo = sim.torus((3, 3))
    with pytest.raises(ValueError, match="does not split into the 18 equal chunks"):
        sim.simulate(topo, "all-reduce", 1000, algorithm="torus-2d")
    padded = sim.simulate(topo, "all-reduce", 1000, algorithm="torus-2d", pad=True)
    assert padded.chunk_bytes == math.ceil(1000 / 18)


def test_text_before_pictures():
    tl = sim.simulate(sim.torus((4, 4)), "all-reduce", 2**20, algorithm="torus-2d")
    text = tl.summary()
    assert "phase 1: all-reduce along dim 1" in text and "lower bound" in text
    assert repr(tl).startswith("Timeline(all-reduce torus-2d, 4x4")
    assert "busiest link" in repr(tl.steps[0])
    first = tl.steps[0].transfers[0]
    assert first.bytes == tl.chunk_bytes * first.count


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.integers(1, 9),
)
def test_every_kind_matches_closed_form_and_respects_the_bound(shape, wrap, mult):
    topo = sim.torus(tuple(shape), tuple(wrap[: len(shape)]))
    for kind, name in _cases(topo):
        k = sim.schedule(topo, kind, name).n_chunks
        nbytes = k * mult * 512
        tl = sim.simulate(topo, kind, nbytes, algorithm=name, chip="tpu-v5p")
        cf = sim.closed_form(topo, kind, nbytes, algorithm=name, chip="tpu-v5p")
        assert tl.time_s == pytest.approx(cf, rel=0.01, abs=1e-15), (kind, name)
        assert tl.lower_bound_s <= tl.time_s * (1 + 1e-12), (kind, name)


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_one_chip_moves_nothing_and_says_so(shape):
    """A single chip: no steps, zero time, and the summary does not divide by the zero bound."""
    tl = sim.simulate(sim.torus(shape), "all-reduce", 1024)
    assert tl.time_s == 0 == tl.lower_bound_s == sim.closed_form(sim.torus(shape), "all-reduce")
    assert not tl.steps and "nothing to move" in tl.summary()
