"""Today's TPU slices: shapes each generation offers, its wraparound rule, chips with sources.

Oracles: the rules as the scaling book states them (v5e/v6e: wraparound only on an axis of
length 16; v4/v5p/TPU7x: on every axis of a slice of whole 4x4x4 cubes, none below a cube),
the chip counts of the named pods, and the ring closed form (a line without wraparound carries
both ring directions on each link: twice the time of a wrapped line for a large payload).
"""

import pytest

import gspmd_viz.sim as sim

TWO_D = ["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"]


@pytest.mark.parametrize("gen", ["tpu-v5e", "tpu-v6e"])
@pytest.mark.parametrize("shape", TWO_D)
def test_2d_slices_wrap_only_axes_of_16(gen, shape):
    topo = sim.preset(f"{gen}-{shape}")
    dims = tuple(int(n) for n in shape.split("x"))
    assert topo.shape == dims
    assert topo.wrap == tuple(n == 16 for n in dims)
    assert sim.chip_of(topo) == gen
    assert sim.preset(f"{gen}-{topo.n_chips}").shape == dims  # chip counts name the same slice


@pytest.mark.parametrize("gen", ["tpu-v4", "tpu-v5p", "tpu7x"])
def test_3d_slices_wrap_on_whole_cubes_only(gen):
    for shape in [(2, 2, 1), (2, 2, 2), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 16)]:
        topo = sim.preset(f"{gen}-{'x'.join(map(str, shape))}")
        cube = all(n % 4 == 0 for n in shape)
        assert topo.shape == shape
        assert topo.wrap == tuple(cube and n > 2 for n in shape)
        assert topo.n_links == sum(  # every chip links to each neighbour; wraps close the lines
            (n if cube and n > 2 else n - 1) * topo.n_chips // n * 2 for n in shape if n > 1
        )


def test_named_pods():
    counts = {"tpu-v5e-256": 256, "tpu-v6e-256": 256, "tpu-v4-4096": 4096,
              "tpu-v5p-8960": 8960, "tpu7x-9216": 9216}  # fmt: skip
    for name, n in counts.items():
        topo = sim.preset(name)
        assert topo.n_chips == n and all(topo.wrap) and topo.name == name
    assert sim.preset("tpu-v4-4096").shape == (16, 16, 16)  # 64 cubes


@pytest.mark.parametrize(
    "name,match",
    [("tpu-v5e-3x16", "does not offer a 3x16"), ("tpu-v6e-32x32", "does not offer"),
     ("tpu-v5p-3x4x4", "whole cubes"), ("tpu-v4-16x16x32", "up to 4,096 chips"),
     ("tpu-v5e-16x16x1", "does not offer"), ("tpu-v9-256", "unknown topology preset"),
     ("tpu-v5e-", "unknown topology preset"), ("tpu-v6e-100", "does not offer a 100"),
     # twisted tori: v4 and v5p only, kxkx2k and kx2kx2k with k a multiple of 4
     ("tpu-v4-4x4x4-twisted", "cannot twist a 4x4x4"), ("tpu-v5p-8x4x4-twisted", "kxkx2k"),
     ("tpu-v5p-2x2x4-twisted", "cannot twist"), ("tpu-v5e-4x8-twisted", "no twisted tori"),
     ("tpu7x-4x4x8-twisted", "no twisted tori"), ("tpu-v4-4x4x8-twist", "unknown topology")],
)  # fmt: skip
def test_shapes_a_generation_does_not_offer(name, match):
    with pytest.raises(ValueError, match=match):
        sim.preset(name)


def test_no_wraparound_doubles_a_large_all_reduce_along_that_axis():
    slice_, s = sim.preset("tpu-v5e-8x16"), 2**30
    wrapped = sim.torus((8, 16), wrap=True)
    chip = sim.chip_of(slice_)
    line = sim.simulate(slice_, "all-reduce", s, "torus-2d", chip=chip, pad=True).phases[0]
    ring = sim.simulate(wrapped, "all-reduce", s, "torus-2d", chip=chip, pad=True).phases[0]
    assert "dim 0" in line.name and line.time_s / ring.time_s == pytest.approx(2, rel=0.01)


def test_chips_have_figures_and_sources():
    for name in ("tpu-v5e", "tpu-v6e", "tpu-v5p", "tpu7x"):
        c = sim.chip(name)
        assert c.source and c.peak("bf16") == c.peak_bf16_flops
        assert max(c.peak(d) for d, _ in c.peak_by_dtype) >= c.peak_bf16_flops
    with pytest.raises(ValueError, match="no peak figure for 'fp64'"):
        sim.chip("tpu-v6e").peak("fp64")
    rows = sim.presets.table()
    assert {r["preset"] for r in rows} == {"tpu-v5e-256", "tpu-v6e-256", "tpu-v4-4096",
                                           "tpu-v5p-8960", "tpu7x-9216"}  # fmt: skip
    for r in rows:
        assert r["chip source"] and r["topology source"]
        assert "x".join(map(str, sim.preset(r["preset"]).shape)) == r["pod"]
    assert any("secondary" in r["topology source"] for r in rows)


def test_classic_presets_keep_their_chip_and_default():
    for name in sim.PRESETS:
        assert sim.chip_of(sim.preset(name)) == "tpu-v3"
    tl = sim.simulate(sim.preset("tpu-v5e-4x4"), "all-reduce", 2**16)
    assert tl.chip.name == "tpu-v5e"
    v5e = sim.closed_form(sim.preset("tpu-v5e-256"), "all-reduce", 2**30)
    v6e = sim.closed_form(sim.preset("tpu-v6e-256"), "all-reduce", 2**30)
    assert v5e / v6e == pytest.approx(2, rel=0.01)  # v6e links: 9e10 B/s a direction, v5e 4.5e10


# ----- twisted tori: v4 and v5p only, kxkx2k and kx2kx2k with k a multiple of 4 --------------
@pytest.mark.parametrize(
    "name",
    [
        "tpu-v4-4x4x8-twisted",
        "tpu-v5p-4x8x8-twisted",
        "tpu-v5p-8x8x16-twisted",
        "tpu-v4-8x16x16-twisted",
    ],
)
def test_twisted_presets(name):
    topo = sim.preset(name)
    plain = sim.preset(name.removesuffix("-twisted"))
    assert topo.twisted and not plain.twisted and topo.shape == plain.shape
    assert sim.chip_of(topo) == sim.chip_of(plain) == name.split("-")[0] + "-" + name.split("-")[1]
    assert topo.n_links == plain.n_links  # the same cables, landing elsewhere


def test_twisted_all_to_all_beats_untwisted_and_respects_its_bound():
    s = 2**24
    twisted, plain = sim.preset("tpu-v4-4x4x8-twisted"), sim.preset("tpu-v4-4x4x8")
    tw = sim.simulate(twisted, "all-to-all", s, "direct", pad=True)
    un = sim.simulate(plain, "all-to-all", s, "direct", pad=True)
    beta, alpha = tw.chip.ici_link_bandwidth_Bps, tw.chip.hop_latency_s
    # bisection bound: half the chips' data for the other half, s/n per pair, over the cut
    # (untwisted: the long dim's 2 x 16 links; twisted: a short dim's 2 x 32 links)
    n = 128
    assert un.lower_bound_s == pytest.approx(64 * 64 * s / n / (32 * beta))
    assert tw.lower_bound_s == pytest.approx(un.lower_bound_s / 2)
    assert tw.time_s >= tw.lower_bound_s + 6 * alpha  # the bound plus the diameter's latency
    assert tw.time_s < un.time_s
    assert sim.applicable(twisted, "all-to-all") == ["direct"]


def test_rings_on_a_twisted_torus_match_their_closed_form():
    topo = sim.preset("tpu-v5p-4x8x8-twisted")
    rings = ["ring", "bidirectional-ring"]
    phased = ["torus-3d", "torus-3d-halves", "torus-3d-thirds"]
    assert sim.applicable(topo, "all-reduce") == rings + phased  # test_sim_algorithms checks phased
    for name in rings:
        tl = sim.simulate(topo, "all-reduce", 2**20, name)
        assert tl.time_s == pytest.approx(sim.closed_form(topo, "all-reduce", 2**20, name))
    with pytest.raises(ValueError, match="assume untwisted wraparound"):
        sim.simulate(topo, "all-reduce", 2**20, "swing")


def test_twisted_slices_lists_the_twistable_shapes_cloud_names():
    """Google Cloud's v5p table marks 4x4x8, 4x8x8, 8x8x16 and 8x16x16 as twistable; every name
    listed builds a twisted torus of a kxkx2k or kx2kx2k shape that fits in its pod."""
    names = sim.presets.twisted_slices()
    v5p = [n for n in names if n.startswith("tpu-v5p-")]
    cloud = [f"tpu-v5p-{s}-twisted" for s in ("4x4x8", "4x8x8", "8x8x16", "8x16x16")]
    assert v5p[:4] == cloud
    for name in names:
        topo = sim.preset(name)
        pod = sim.GENERATIONS[name.rsplit("-", 2)[0]].pod_shape
        assert topo.twisted
        assert all(a <= b for a, b in zip(sorted(topo.shape), sorted(pod), strict=True))
    assert {n.split("-")[1] for n in names} == {"v4", "v5p"}  # only they twist
