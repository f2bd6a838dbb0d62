"""Algorithms as data: existing links only, and every chip ends with every chip's data once.

The oracle is symbolic: buffers hold the *set* of chips whose data they contain (bit sets), and
a reducing transfer that would count a chip twice raises. That scales to tori far larger than
the 8 CPU devices (see test_sim_replay.py for the numeric check).
"""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz.sim as sim
from gspmd_viz.sim import execute

TOPOLOGIES = [
    sim.torus((4, 4)),
    sim.torus((2, 4)),
    sim.torus((3, 5), wrap=False),
    sim.torus((8, 8), wrap=(False, True)),
    sim.torus((16, 16)),
    sim.torus((3, 3)),
    sim.torus((7,), wrap=False),
    sim.torus((6,)),
    sim.torus((4, 4, 4)),
    sim.torus((2, 3, 4), wrap=(True, False, True)),
    sim.topology.twisted_torus((4, 4, 8)),
]


def _applicable(topo, kind):
    for name in sim.algorithms(kind):
        try:
            yield name, sim.schedule(topo, kind, name)
        except ValueError:  # e.g. torus-3d on a 2-D topology
            continue


def _ids(topo):
    wraps = "twisted" if topo.twisted else "".join("tf"[not w] for w in topo.wrap)
    return "x".join(map(str, topo.shape)) + "-" + wraps


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_ids)
def test_all_reduce_leaves_full_sum_everywhere(topo):
    names = []
    for name, sched in _applicable(topo, "all-reduce"):
        bits = execute.contributions(sched)
        assert bits.all(), f"{name}: some chip misses some contribution"
        names.append(name)
    assert names == sim.applicable(topo, "all-reduce")
    assert {"ring", "bidirectional-ring"} <= set(names)
    assert topo.twisted or "naive" in names  # naive's closed form assumes untwisted routes


@pytest.mark.parametrize("topo", TOPOLOGIES[:6], ids=_ids)
def test_reduce_scatter_then_all_gather(topo):
    for name, rs in _applicable(topo, "reduce-scatter"):
        owners = execute.reduce_scatter_owners(rs)  # each chunk fully summed on exactly one chip
        assert np.bincount(owners, minlength=topo.n_chips).min() >= 1, name
        ag = sim.schedule(topo, "all-gather", name)
        final = execute.contributions(ag, execute.gather_start(ag, owners))
        expect = np.zeros_like(final[0])
        expect[np.arange(len(owners)), owners] = True
        assert (final == expect[None]).all(), f"{name}: all-gather did not deliver every chunk"


@pytest.mark.parametrize("topo", TOPOLOGIES[:6], ids=_ids)
def test_all_to_all_delivers_chunk_j_of_chip_i_to_chip_j(topo):
    sched = sim.schedule(topo, "all-to-all", "direct")
    n = topo.n_chips
    # token (i, j) = i * n + j: chip i starts with tokens for every destination j
    start = np.arange(n * n).reshape(n, n)
    final = execute.run(sched, start, combine="add")
    assert (final == start.T).all()


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_ids)
def test_every_transfer_uses_existing_links(topo):
    for kind in sim.KINDS:
        for name, sched in _applicable(topo, kind):
            for step in sched.steps:
                _, links, _ = topo.route(step.src, step.dst)
                assert topo.link_exists[links].all(), (kind, name)
                assert (step.src != step.dst).all()


@pytest.mark.parametrize("topo", [TOPOLOGIES[0], TOPOLOGIES[3], TOPOLOGIES[4]], ids=_ids)
def test_torus_steps_are_neighbour_hops(topo):
    """Rings inside one dim: 1 hop with wraparound, 2 hops (folded ring) without."""
    for name in ("torus-2d", "torus-2d-halves"):
        for step in sim.schedule(topo, "all-reduce", name).steps:
            hops = topo.distance(step.src, step.dst)
            limit = 1 if all(topo.wrap) else 2
            assert hops.max() <= limit


def test_phased_rings_on_a_twisted_torus_walk_its_short_dims_as_lines():
    """A twisted short dim's wraparound lands k chips along the long dim, on another line: its
    rings are walked folded (2-hop edges inside the line), the long dim's keep their wraparound
    (1 hop), and the closed form prices exactly that (checked against the step-by-step run)."""
    topo = sim.topology.twisted_torus((4, 4, 8))
    plain_lines = sim.torus((4, 4, 8), wrap=(False, False, True))  # the same rings, no twist
    assert topo.line_wrap == plain_lines.wrap
    for name in ("torus-3d", "torus-3d-halves", "torus-3d-thirds"):
        for step in sim.schedule(topo, "all-reduce", name).steps:
            moved = topo.coords[step.dst] != topo.coords[step.src]  # [transfers, dims]
            assert (moved.sum(1) == 1).all()  # each transfer stays in one line of one dim
            hops = topo.distance(step.src, step.dst)
            assert (hops <= 1 + moved[:, :2].any(1)).all()  # short dims folded: 2 hops at most
            assert (hops == plain_lines.distance(step.src, step.dst)).all()
        s = 3 * 2 * 128 * 4  # every chunk count the three algorithms need divides it
        tl = sim.simulate(topo, "all-reduce", s, name)
        assert tl.time_s == pytest.approx(sim.closed_form(topo, "all-reduce", s, name))
        assert tl.time_s == pytest.approx(sim.simulate(plain_lines, "all-reduce", s, name).time_s)


@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["ring", "bidirectional-ring", "torus-2d", "torus-2d-halves", "naive"]),
)
def test_symbolic_sum_property(a, b, w0, w1, name):
    topo = sim.torus((a, b), wrap=(w0, w1))
    assert execute.contributions(sim.schedule(topo, "all-reduce", name)).all()


def test_double_counting_is_detected():
    sched = sim.schedule(sim.torus((4, 4)), "all-reduce", "ring")
    sched.steps.insert(1, sched.steps[0])  # replay a reduce step: chunks would count twice
    with pytest.raises(AssertionError, match="twice"):
        execute.contributions(sched)


def test_ring_order_is_a_neighbour_cycle_when_a_dim_is_even():
    for topo in [
        sim.torus((4, 4), wrap=False),
        sim.torus((3, 4), wrap=False),
        sim.torus((2, 3, 5)),
    ]:
        order = sim.ring_order(topo)
        assert sorted(order) == list(range(topo.n_chips))
        assert (topo.distance(order, np.roll(order, -1)) == 1).all()


def test_algorithm_names_and_errors():
    assert {"ring", "bidirectional-ring", "torus-2d"} <= set(sim.algorithms("all-reduce"))
    assert "direct" in sim.algorithms("all-to-all")
    with pytest.raises(ValueError, match="unknown all-reduce algorithm"):
        sim.schedule(sim.torus((4, 4)), "all-reduce", "telepathy")
    with pytest.raises(ValueError, match="unknown collective"):
        sim.algorithms("all-reduce-ish")
    with pytest.raises(ValueError, match="needs a 3-D topology"):
        sim.schedule(sim.torus((4, 4)), "all-reduce", "torus-3d")
    with pytest.raises(ValueError, match="transfers"):
        sim.schedule(sim.preset("tpu-v3-multipod"), "all-to-all", "direct")


@pytest.mark.parametrize(
    "topo,name",
    [
        (sim.preset("tpu-v3-pod"), "torus-2d-halves"),
        (sim.torus((64, 16), wrap=(False, True)), "torus-2d"),
    ],
    ids=["pod-halves", "64x16-no-wrap-dim0"],
)
def test_pod_scale_numeric_sum(topo, name):
    """Whole-pod check with numbers: every chip ends with the column sums of the inputs."""
    sched = sim.schedule(topo, "all-reduce", name)
    x = np.random.default_rng(7).integers(-(2**20), 2**20, (topo.n_chips, sched.n_chunks))
    final = execute.run(sched, x, combine="add")
    assert (final == x.sum(axis=0)[None]).all()


@pytest.mark.parametrize(
    "topo",
    [
        sim.torus((4, 8)),
        sim.torus((1, 4)),
        sim.torus((3, 1, 4)),
        sim.torus((4, 4, 2)),
        sim.torus((4, 4)),
        sim.torus((3, 3, 3)),
    ],  # fmt: skip
    ids=_ids,
)
@pytest.mark.parametrize("kind", ["all-reduce", "reduce-scatter", "all-gather"])
def test_phases_run_in_order_along_the_dims_they_name(topo, kind):
    for name, sched in _applicable(topo, kind):
        if not name.startswith("torus"):
            continue
        phase_of_step = [s.phase for s in sched.steps]
        assert phase_of_step == sorted(phase_of_step), name  # contiguous, in time order
        assert set(phase_of_step) == set(range(len(sched.phases)))
        for step in sched.steps:
            moved = topo.coords[step.dst] != topo.coords[step.src]  # [transfers, ndim]
            dims = {int(d) for d in np.nonzero(moved.any(axis=0))[0]}
            named = {int(d) for d in re.findall(r"dim (\d)", sched.phases[step.phase].name)}
            # several parts switch phase together only when all dims are equal
            if name in ("torus-2d", "torus-3d") or len(set(topo.shape)) == 1:
                assert dims == named, (name, sched.phases[step.phase].name, dims)


def test_the_registry_lists_each_algorithm_once_with_what_it_serves():
    names = [a.name for a in sim.ALGORITHMS.values()]
    assert len(names) == len(set(names))
    for kind in sim.KINDS:  # every name a kind lists builds a schedule of that kind on its ranks
        for name in sim.algorithms(kind):
            entry = sim.ALGORITHMS[name]
            assert kind in entry.kinds and entry.description == sim.describe(name)
            for rank in entry.ranks:
                topo = sim.torus((2, 4, 2)[:rank])  # powers of two: logarithmic ones run too
                if entry.why_not(topo):  # pull-halving needs a dim of 32 or more
                    topo = sim.torus((32, 4, 2)[:rank])
                assert sim.schedule(topo, kind, name).kind == kind
    for rank, default in [(1, "bidirectional-ring"), (2, "torus-2d"), (3, "torus-3d")]:
        topo = sim.torus((4,) * rank)
        assert sim.default_algorithm(topo, "all-reduce") == default
        assert all(rank in sim.ALGORITHMS[n].ranks for n in sim.applicable(topo))
        assert sim.default_algorithm(topo, "all-to-all") == "direct"
    with pytest.raises(ValueError, match="unknown algorithm"):
        sim.describe("telepathy")
