"""Device orders for a logical mesh on a slice: every chip once, neighbours stay neighbours.

Oracles: the ring closed form (cost.ring_time through sim.closed_form on the sub-torus of the
axis) for the good order, and the ring formula written out for the naive order on a line
without wraparound, whose closing edge crosses every link of the line: 2(n-1) steps of
2 x S/(2n) bytes per link and n - 1 hops.
"""

import itertools

import numpy as np
import pytest

import gspmd_viz.sim as sim

CASES = [
    ({"x": 8, "y": 16}, "tpu-v5e-8x16"),
    ({"data": 16, "model": 16}, "tpu-v4-4x8x8"),
    ({"data": 8, "model": 32}, "tpu-v5p-4x8x8"),
    ({"a": 2, "b": 4, "c": 4}, "tpu-v5p-2x4x4"),
    ({"data": 16, "model": 16}, "tpu-v6e-256"),
]


@pytest.mark.parametrize("mesh,name", CASES)
@pytest.mark.parametrize("how", sim.device_order.HOWS)
def test_every_chip_once(mesh, name, how):
    d = sim.place(mesh, sim.preset(name), how)
    assert d.order.shape == tuple(mesh.values())
    assert sorted(d.order.ravel()) == list(range(d.topo.n_chips))


@pytest.mark.parametrize("mesh,name", CASES)
def test_good_order_rings_are_never_longer_or_slower(mesh, name):
    topo = sim.preset(name)
    good, naive = sim.place(mesh, topo), sim.place(mesh, topo, "naive")
    for axis in mesh:
        for nbytes in (2**15, 2**24):
            g = good.collective(axis, nbytes=nbytes)
            n = naive.collective(axis, nbytes=nbytes)
            assert g.time_s <= n.time_s * (1 + 1e-12), (axis, nbytes)
            assert g.max_hops <= n.max_hops


def test_folded_line_against_the_ring_closed_forms():
    """v5e-8x16: the axis of 8 has no wraparound. Good: folded ring, 2-hop edges; naive: the
    closing edge 7 -> 0 crosses all 7 links, so each step pays 7 hops."""
    topo, s, n = sim.preset("tpu-v5e-8x16"), 2**20, 8
    spec = sim.chip("tpu-v5e")
    beta, alpha = spec.ici_link_bandwidth_Bps, spec.hop_latency_s
    good = sim.place({"x": 8, "y": 16}, topo).collective("x", nbytes=s)
    line = sim.torus((8,), wrap=False)
    assert good.time_s == pytest.approx(
        sim.closed_form(line, "all-reduce", s, "bidirectional-ring", chip=spec)
    )
    naive = sim.place({"x": 8, "y": 16}, topo, "naive").collective("x", nbytes=s)
    assert naive.max_hops == n - 1
    assert naive.time_s == pytest.approx(2 * (n - 1) * (2 * s / (2 * n) / beta + (n - 1) * alpha))


def test_axis_folded_onto_two_physical_dims_snakes():
    """model = 16 chips on a 4x8x8 v4 slice: 8 along one dim times 2 along another; the good
    order walks them as one cycle of neighbour hops."""
    d = sim.place({"data": 16, "model": 16}, sim.preset("tpu-v4-4x8x8"))
    groups = d.groups("model")
    hops = d.topo.distance(groups, np.roll(groups, -1, axis=1))
    assert (hops == 1).all()
    coords = d.topo.coords[groups[0]]
    assert sum(len(set(coords[:, k])) > 1 for k in range(3)) == 2


def test_errors():
    topo = sim.preset("tpu-v5e-8x16")
    with pytest.raises(ValueError, match="does not fill"):
        sim.place({"x": 4, "y": 4}, topo)
    with pytest.raises(ValueError, match="how must be"):
        sim.place({"x": 8, "y": 16}, topo, "clever")
    d = sim.place({"x": 8, "y": 16}, topo)
    with pytest.raises(ValueError, match="unknown mesh axis 'z'"):
        d.collective("z")
    with pytest.raises(ValueError, match="ring collective"):
        d.collective("x", kind="all-to-all")


def test_timeline_is_what_collective_times_and_its_bound_holds():
    d = sim.place({"x": 8, "y": 16}, sim.preset("tpu-v5e-8x16"), "naive")
    tl = d.timeline("x", nbytes=2**20)
    assert tl.time_s == d.collective("x", nbytes=2**20).time_s
    assert 0 < tl.lower_bound_s <= tl.time_s
    assert max(s.max_hops for s in tl.steps) == 7  # the closing edge 7 -> 0 of every column


def test_ring_drawing_shows_the_long_closing_edge():
    from gspmd_viz.viz.torus.device_order import ring_svg

    topo, mesh = sim.preset("tpu-v5e-8x16"), {"x": 8, "y": 16}
    naive, good = sim.place(mesh, topo, "naive"), sim.place(mesh, topo)
    svg = ring_svg({"naive": naive, "place": good}, "x")
    assert svg.startswith("<svg") and svg.count("<circle") == 2 * 8
    assert svg.count('stroke="#e4002b"') == 1  # only the naive 7 -> 0 edge is longer than 2
    assert ">7</text>" in svg
    with pytest.raises(ValueError, match="one line of chips"):
        v4 = sim.preset("tpu-v4-4x8x8")
        ring_svg({"place": sim.place({"data": 16, "model": 16}, v4)}, "model")


# ----- twisted slices: rings on the real links ------------------------------------------------
TWISTED_CASES = [
    ({"x": 32, "y": 4}, "tpu-v4-4x4x8-twisted"),  # x: 4x4 planes at z, z + 4 joined by the twist
    ({"x": 64, "y": 4}, "tpu-v5p-4x8x8-twisted"),  # the kx2kx2k twist moves d1 and d2 at once
    ({"x": 4, "y": 8, "z": 4}, "tpu-v4-4x4x8-twisted"),  # y: d0 at z and z + 4, one 8-cycle
    ({"a": 4, "b": 4, "c": 8}, "tpu-v4-4x4x8-twisted"),  # a, b: a short dim alone, no cycle
    ({"data": 16, "model": 16}, "tpu-v4-4x8x8-twisted"),
    ({"x": 8, "y": 16, "z": 8}, "tpu-v5p-8x8x16-twisted"),
]


def _edge_hops(order, axis):
    groups = order.groups(axis)
    return order.topo.distance(groups, np.roll(groups, -1, axis=1))  # [groups, n] shortest paths


@pytest.mark.parametrize("mesh,name", TWISTED_CASES)
def test_twisted_good_order_is_never_slower_than_naive(mesh, name):
    topo = sim.preset(name)
    good, naive = sim.place(mesh, topo), sim.place(mesh, topo, "naive")
    assert sorted(good.order.ravel()) == list(range(topo.n_chips))
    for axis in mesh:
        for nbytes in (2**15, 2**24):
            g, n = good.collective(axis, nbytes=nbytes), naive.collective(axis, nbytes=nbytes)
            assert g.time_s <= n.time_s * (1 + 1e-12), (axis, nbytes)
            assert g.max_hops <= n.max_hops


@pytest.mark.parametrize("mesh,name", TWISTED_CASES)
def test_twisted_rings_are_as_short_as_an_exhaustive_search_finds(mesh, name):
    """Groups of up to 8 chips: no ring order through the group's chips has a shorter longest
    edge (hops from the topology's own shortest paths), checked over all (n-1)! orders."""
    topo = sim.preset(name)
    good = sim.place(mesh, topo)
    for axis in (a for a in mesh if mesh[a] <= 8):
        row = good.groups(axis)[0]
        rings = (np.array([row[0], *p]) for p in itertools.permutations(row[1:]))
        best = min(topo.distance(r, np.roll(r, -1)).max() for r in rings)
        assert _edge_hops(good, axis).max() == best, axis


@pytest.mark.parametrize(
    "mesh,name,axis",
    [({"x": 32, "y": 4}, "tpu-v4-4x4x8", "x"), ({"x": 64, "y": 4}, "tpu-v5p-4x8x8", "x"),
     ({"x": 4, "y": 8, "z": 4}, "tpu-v4-4x4x8", "y")],
)  # fmt: skip
def test_a_ring_closes_through_the_twist_at_the_ring_closed_form(mesh, name, axis):
    """Twisted, the group's chips close a ring of neighbour hops through the twisted wraparound:
    the simulated time is the ring closed form of n chips one hop apart. Untwisted, the same
    group is two pieces k chips apart, so its longest edge is longer and it is slower."""
    twisted, plain = sim.preset(f"{name}-twisted"), sim.preset(name)
    n, s = mesh[axis], 2**20
    good = sim.place(mesh, twisted)
    assert (_edge_hops(good, axis) == 1).all()
    ring = sim.torus((n,), wrap=True)
    chip = sim.chip_of(twisted)
    expected = sim.closed_form(ring, "all-reduce", s, "bidirectional-ring", chip=chip)
    got = good.collective(axis, nbytes=s)
    assert got.time_s == pytest.approx(expected)
    untwisted = sim.place(mesh, plain).collective(axis, nbytes=s)
    assert untwisted.max_hops > 1 and untwisted.time_s > got.time_s


def test_neighbour_cycle_uses_only_real_links():
    """Every edge of the cycle is a link the topology built (its link_dst table), every chip
    once; a line of chips (a short twisted dim alone) has no cycle."""
    from gspmd_viz.sim.collectives.rings import neighbour_cycle

    topo = sim.preset("tpu-v5p-4x8x8-twisted")
    chips = np.array([c for c in range(topo.n_chips) if topo.coords[c, 2] in (1, 5)])
    cycle = chips[neighbour_cycle(topo, chips)]
    assert sorted(cycle) == sorted(chips)
    links = set(zip(np.repeat(np.arange(topo.n_chips), 2 * topo.ndim), topo.link_dst, strict=True))
    assert all((int(a), int(b)) in links for a, b in zip(cycle, np.roll(cycle, -1), strict=True))
    line = np.array([topo.index((a, 0, 0)) for a in range(4)])
    assert neighbour_cycle(topo, line) is None


def test_a_twisted_short_dim_is_no_ring_in_the_sub_torus():
    """The short dims' wraparound lands k chips along: a group along one of them is a line."""
    topo = sim.preset("tpu-v4-4x4x8-twisted")
    where = sim.placement.place({"a": 4, "b": 4, "c": 8}, topo)
    assert sim.placement.sub_torus(where, ["a"], topo).wrap == (False,)
    assert sim.placement.sub_torus(where, ["c"], topo).wrap == (True,)
