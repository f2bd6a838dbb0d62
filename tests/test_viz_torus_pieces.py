"""pieces_svg: a collective's steps against time, one row per piece (oracle: the timelines)."""

import html
import re

import pytest

import gspmd_viz as gv
from gspmd_viz.viz.torus import pieces as draw

POD = gv.sim.preset("tpu-v3-pod")


def _rects(svg):
    """(x, width, fill) of every bar."""
    found = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="16" '
                       r'fill="([#\w]+)"', svg)  # fmt: skip
    return [(float(x), float(w), fill) for x, w, fill in found]


def test_bars_tile_each_piece_and_end_where_the_timeline_ends():
    one = gv.sim.simulate(POD, "all-reduce", 2**20, "pull-halving")
    four = gv.sim.simulate(POD, "all-reduce", 2**20, "pull-halving", pieces=4)
    svg = draw.pieces_svg({"lockstep": one, "4 pieces": four})
    assert svg.count(">piece ") == 1 + 4
    assert f"lockstep ({one.time_s * 1e6:.1f} µs)" in svg
    scale = (draw.WIDTH - draw.LEFT - draw.RIGHT) / one.time_s  # the longer one sets the axis
    bars = _rects(svg)
    sends = [b for b in bars if b[2] in draw.PHASE_COLOURS]
    assert len(sends) == sum(r.max_link_bytes > 0 for r in [*one.steps, *four.steps])
    right = max(x + w for x, w, _ in bars)
    assert right == pytest.approx(draw.LEFT + one.time_s * scale, abs=0.02)
    lockstep_bars = bars[: 2 * len(one.steps)]  # no wait in lockstep: send then flight
    assert all(fill != draw.WAIT for _, _, fill in lockstep_bars)
    covered = sum(w for _, w, _ in lockstep_bars)
    assert covered == pytest.approx(one.time_s * scale, abs=0.01 * len(lockstep_bars))
    for name in (p.name for p in one.phases):
        assert html.escape(name) in svg


def test_waits_show_only_where_a_piece_queues_for_a_link():
    four = gv.sim.simulate(POD, "all-reduce", 2**20, "pull-halving", pieces=4)
    svg = draw.pieces_svg({"4 pieces": four})
    waits = [b for b in _rects(svg) if b[2] == draw.WAIT]
    queued = [r for r in four.steps if draw._parts(r, four.chip)[0][2] > 0]
    assert len(waits) == len(queued) > 0
    assert all(r.piece > 0 or r.start_s > 0 for r in queued)


def test_no_timelines_is_a_clear_error():
    with pytest.raises(ValueError, match="needs at least one timeline"):
        draw.pieces_svg({})
