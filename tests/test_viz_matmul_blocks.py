"""The matmul picture draws one rectangle per distinct block, as jax places the arrays."""

import re

import pytest

import gspmd_viz as gv
from gspmd_viz.viz.arrays.matmul_blocks import matmul_svg, reshard_svg

MESH = gv.Mesh({"x": 2, "y": 4})
SHAPES = {"A": (16, 32), "B": (32, 64), "C": (16, 64)}
CASES = [  # (A, B, C) specs of lesson 03's matmul cases
    ((None, "y"), ("y", None), (None, None)),
    (("x", None), (None, "y"), ("x", "y")),
    (("y", None), (None, "y"), (None, "y")),
]


def _jax_blocks(spec, shape) -> int:
    """Distinct blocks: the distinct index boxes jax gives the devices."""
    placed = gv.Sharding(MESH, spec).to_named_sharding().devices_indices_map(shape)
    return len({tuple((s.start, s.stop) for s in box) for box in placed.values()})


@pytest.mark.parametrize("specs", CASES)
def test_one_rectangle_per_block_and_the_collective_on_the_arrow(specs):
    arrays = {n: (gv.Sharding(MESH, s), SHAPES[n]) for n, s in zip("ABC", specs, strict=True)}
    svg = matmul_svg(arrays, "1 all-gather; 1.5 KiB per device on the wire")
    rects = len(re.findall(r"<rect ", svg))
    assert rects == sum(_jax_blocks(s, SHAPES[n]) for n, s in zip("ABC", specs, strict=True))
    assert "1 all-gather; 1.5 KiB per device on the wire" in svg
    assert len(svg) < 20_000  # small enough to commit in a lesson


def test_bad_input_is_named():
    s = gv.Sharding(MESH, (None, None, None))
    with pytest.raises(ValueError, match="A: a matmul operand is 2-D"):
        matmul_svg({"A": (s, (2, 3, 4)), "B": (s, (4, 5)), "C": (s, (3, 5))}, "")
    with pytest.raises(ValueError, match="arrays must be A, B and C"):
        matmul_svg({"B": (s, (4, 5))}, "")


def test_reshard_picture_draws_both_layouts():
    src, dst = gv.Sharding(MESH, ("y", None)), gv.Sharding(MESH, ("x", None))
    svg = reshard_svg(src, dst, (16, 64), "collective-permute(x,y), all-gather(y)")
    assert len(re.findall(r"<rect ", svg)) == _jax_blocks(("y", None), (16, 64)) + _jax_blocks(
        ("x", None), (16, 64)
    )
    assert "collective-permute(x,y), all-gather(y)" in svg


def _width(svg: str) -> float:
    return float(re.search(r'<svg [^>]*width="([\d.]+)"', svg).group(1))


def _titles(svg: str) -> list[tuple[float, str]]:
    """(left x, text) of each array's 11 px title."""
    title = r'<text x="([\d.]+)"[^>]*font-size="11" text-anchor="start"[^>]*>([^<]*)</text>'
    return [(float(x), t) for x, t in re.findall(title, svg)]


def _right_edge(svg: str) -> float:
    """The right edge of the rightmost block drawn."""
    rects = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    return max(float(x) + float(w) for x, w in rects)


def test_every_title_fits_and_a_short_one_does_not_widen_the_picture():
    """A result with pending sums is titled wider than it is drawn: the picture makes room for
    its title (TITLE_CHAR px a character); a title narrower than its array adds nothing past
    the array's right edge (+ 4 px of margin)."""
    a, b = gv.Sharding(MESH, (None, "y")), gv.Sharding(MESH, ("y", "x"))
    pending = gv.Sharding(MESH, (None, "x"), unreduced={"y"})
    long = matmul_svg({"A": (a, (4, 256)), "B": (b, (256, 512)), "C": (pending, (4, 512))}, "r")
    specs = zip("ABC", CASES[0], strict=True)  # C: f32[16, 64], a title narrower than C
    short = matmul_svg({n: (gv.Sharding(MESH, s), SHAPES[n]) for n, s in specs}, "x")
    for svg in (long, short):
        assert all(x + 6.2 * len(t) <= _width(svg) for x, t in _titles(svg)), svg
    left, title = _titles(long)[-1]
    assert title == "C: " + pending.describe((4, 512), "float32")
    assert _width(long) == pytest.approx(left + 6.2 * len(title) + 4, abs=1)
    assert _width(long) > _right_edge(long) + 4
    assert _width(short) == pytest.approx(_right_edge(short) + 4, abs=1)
