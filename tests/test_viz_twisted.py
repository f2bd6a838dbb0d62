"""The twisted-torus plane figure: every ghost label is where the built wraparound link lands."""

import re

import pytest

import gspmd_viz.sim as sim
from gspmd_viz.viz.twisted.plane import plane_svg


def _ghost_labels(svg):
    """(d1, d2) printed in the dashed circles ("d2" alone when d1 is 0), left to right."""
    found = re.findall(r'stroke-dasharray="3,2"/><text[^>]*>([\d,]+)</text>', svg)
    return [tuple(int(v) for v in ("0," + t if "," not in t else t).split(",")) for t in found]


@pytest.mark.parametrize("name", ["tpu-v4-4x4x8", "tpu-v5p-4x8x8"])
def test_ghost_row_shows_where_going_up_lands(name):
    plain, twisted = sim.preset(name), sim.preset(f"{name}-twisted")
    k, n = plain.shape[0], plain.shape[2]
    labels = _ghost_labels(plane_svg([plain, twisted]))
    d1 = k if twisted.shape[1] == 2 * k else 0  # a kx2kx2k twist also moves along d1
    assert labels[:n] == [(0, c) for c in range(n)]  # untwisted: the same column
    assert labels[n:] == [(d1, (c + k) % n) for c in range(n)]  # twisted: k columns on
    for c, (y, z) in enumerate(labels[n:]):  # and that is the link the topology built
        up = [twisted.coord(m) for m in twisted.neighbours(twisted.index((k - 1, 0, c)))]
        assert (0, y, z) in up


def test_plane_svg_refuses_other_ranks():
    with pytest.raises(ValueError, match="draws 3-D topologies"):
        plane_svg([sim.preset("tpu-v5e-8x16")])
