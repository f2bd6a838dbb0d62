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
