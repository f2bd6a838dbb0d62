"""Topologies: links, neighbours and routes checked against coordinate arithmetic."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz.sim as sim

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)


@st.composite
def topologies(draw):
    shape = draw(shapes)
    wrap = tuple(draw(st.booleans()) for _ in shape)
    return sim.torus(shape, wrap)


def _expected_links(topo):
    n = topo.n_chips
    total = 0
    for size, w in zip(topo.shape, topo.wrap, strict=True):
        per_line = 2 * size if (w and size > 2) else 2 * (size - 1)
        total += n // size * per_line
    return total


def _torus_distance(topo, a, b):
    ca, cb = topo.coord(a), topo.coord(b)
    d = 0
    for x, y, n, w in zip(ca, cb, topo.shape, topo.wrap, strict=True):
        d += min(abs(x - y), n - abs(x - y)) if w else abs(x - y)
    return d


@given(topologies())
def test_link_count_and_neighbours(topo):
    assert topo.n_links == _expected_links(topo)
    for chip in range(topo.n_chips):
        c = np.array(topo.coord(chip))
        expect = set()
        for d, (n, w) in enumerate(zip(topo.shape, topo.wrap, strict=True)):
            for s in (1, -1):
                nc = c.copy()
                nc[d] += s
                if w:
                    nc[d] %= n
                if 0 <= nc[d] < n and nc[d] != c[d]:
                    expect.add(topo.index(nc))
        assert set(topo.neighbours(chip)) == expect


@given(topologies(), st.data())
def test_routes_follow_existing_links_and_are_shortest(topo, data):
    n = topo.n_chips
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=len(src), max_size=len(src))))
    t_idx, links, hops = topo.route(src, dst)
    assert topo.link_exists[links].all()
    for i in range(len(src)):
        path = links[t_idx == i]
        here = int(src[i])
        for link in path:  # links come in travel order: each starts where the previous ended
            a, b, _, _ = topo.link_info(link)
            assert a == here
            here = b
        assert here == dst[i]
        assert hops[i] == len(path) == _torus_distance(topo, int(src[i]), int(dst[i]))


def test_presets():
    pod = sim.preset("tpu-v3-pod")
    assert pod.shape == (32, 32) and pod.wrap == (True, True) and pod.n_chips == 1024
    multi = sim.preset("tpu-v3-multipod")
    assert multi.n_chips == 4096 and multi.wrap == (False, True)
    assert sim.preset("tpu-v4-4x4x4").ndim == 3
    assert "4096 chips" in repr(multi)
    assert set(sim.PRESETS) >= {"2x4", "4x4", "tpu-v3-pod", "tpu-v3-multipod", "tpu-v4-4x4x4"}


@pytest.mark.parametrize(
    "shape",
    [(0, 4), (4, -1), (2.5,), (), (2, 2, 2, 2), (True, 4)],
)
def test_bad_shapes(shape):
    with pytest.raises(ValueError, match="topology"):
        sim.torus(shape)


def test_bad_preset_and_wrap():
    with pytest.raises(ValueError, match="unknown topology preset"):
        sim.preset("tpu-v9000")
    with pytest.raises(ValueError, match="wrap"):
        sim.torus((4, 4), wrap=(True,))


def test_chips_have_sources_and_overrides():
    import dataclasses

    for name in ("tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p"):
        c = sim.chip(name)
        assert c.name == name and c.ici_link_bandwidth_Bps > 0 and c.hbm_bytes > 0
    fast = dataclasses.replace(sim.chip("tpu-v3"), ici_link_bandwidth_Bps=2e11)
    topo = sim.torus((4, 4))
    slow_t = sim.closed_form(topo, "all-reduce", 2**20, "torus-2d", chip="tpu-v3")
    fast_t = sim.closed_form(topo, "all-reduce", 2**20, "torus-2d", chip=fast)
    assert fast_t < slow_t
    with pytest.raises(ValueError, match="unknown chip"):
        sim.chip("tpu-v1000")
    with pytest.raises(ValueError, match="positive"):
        dataclasses.replace(fast, ici_link_bandwidth_Bps=0)


# ----- twisted tori: links, routes, diameter and cuts against a BFS over the built links -----
TWISTED = [(4, 4, 8), (4, 8, 8), (3, 3, 6), (3, 6, 6), (5, 5, 10)]


def _bfs_distances(topo):
    """[n, n] hop counts by breadth-first search over topo.link_dst (no routing involved)."""
    n = topo.n_chips
    nbrs = topo.link_dst.reshape(n, -1)
    dist = np.full((n, n), -1, np.int64)
    for s in range(n):
        dist[s, s], frontier, hops = 0, [s], 0
        while frontier:
            hops += 1
            nxt = np.unique(nbrs[frontier].ravel())
            nxt = nxt[(nxt >= 0) & (dist[s, nxt] < 0)]
            dist[s, nxt] = hops
            frontier = list(nxt)
    return dist


@pytest.mark.parametrize("shape", TWISTED, ids=lambda s: "x".join(map(str, s)))
def test_twisted_links_land_k_along_the_long_dims(shape):
    topo = sim.topology.twisted_torus(shape)
    k = min(shape)
    assert topo.twisted and topo.kind == "twisted torus" and topo.n_links == 6 * topo.n_chips
    for chip in range(topo.n_chips):
        c = np.array(topo.coord(chip))
        for d in range(3):
            for sign in (1, -1):
                nc = c.copy()
                nc[d] += sign
                if shape[d] == k and not 0 <= nc[d] < k:  # a short dim's wraparound
                    nc += sign * np.array([k if n == 2 * k else 0 for n in shape])
                link = topo._link_id(chip, d, 3, sign)
                assert topo.link_dst[link] == topo.index(nc % np.array(shape))


@pytest.mark.parametrize("shape", TWISTED, ids=lambda s: "x".join(map(str, s)))
def test_twisted_routes_are_shortest_and_diameter_matches_bfs(shape):
    topo = sim.topology.twisted_torus(shape)
    bfs = _bfs_distances(topo)
    src, dst = np.divmod(np.arange(topo.n_chips**2), topo.n_chips)
    t_idx, links, hops = topo.route(src, dst)  # raises if a route leaves the links
    assert (hops == bfs.ravel()).all()
    assert (np.bincount(t_idx, minlength=len(src)) == hops).all()
    assert sim.cost.diameter(topo) == bfs.max() == 3 * min(shape) // 2
    plain = sim.torus(shape)
    assert sim.cost.diameter(plain) == _bfs_distances(plain).max() > bfs.max()


def _crossing(topo, d):
    """Directed links from coordinate < size // 2 to >= size // 2 along dim d, counted."""
    src = np.arange(topo.n_link_slots) // (topo.ndim * 2)
    ok = topo.link_exists
    half = topo.shape[d] // 2
    a = topo.coords[src[ok], d] < half
    b = topo.coords[topo.link_dst[ok], d] >= half
    return int((a & b).sum())


@pytest.mark.parametrize("shape", TWISTED, ids=lambda s: "x".join(map(str, s)))
def test_cut_links_closed_form_counts_the_built_links(shape):
    for topo in (sim.topology.twisted_torus(shape), sim.torus(shape)):
        for d in range(3):
            assert sim.cost.cut_links(topo, d) == _crossing(topo, d)
    k, n = min(shape), int(np.prod(shape))
    twisted = sim.topology.twisted_torus(shape)
    # the long dims' cut gains one link per line of each short dim twisted into it
    long = [d for d in range(3) if shape[d] == 2 * k]
    short = [d for d in range(3) if shape[d] == k]
    for d in long:
        assert sim.cost.cut_links(twisted, d) == 2 * n // (2 * k) + len(short) * n // k


@pytest.mark.parametrize("shape", [(4, 4, 4), (4, 4, 9), (8, 4, 4), (4, 8), (2, 2, 4)])
def test_untwistable_shapes_are_refused(shape):
    with pytest.raises(ValueError, match="twisted torus needs a shape kxkx2k or kx2kx2k"):
        sim.topology.twisted_torus(shape)
