"""The Collective record: ring wire-byte formulas against their closed forms."""

import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.core.sharding.collective import wire_bytes
from gspmd_viz.units import format_bytes


@pytest.mark.parametrize(
    "kind, n, expected",
    [
        ("all-reduce", 4, 2 * 3 / 4),
        ("all-gather", 4, 3.0),  # (n-1)/n of the n-times-larger result
        ("reduce-scatter", 8, 7 / 8),
        ("all-to-all", 2, 1 / 2),
        ("collective-permute", 8, 1.0),
        ("all-reduce", 1, 0.0),  # a group of one sends nothing
    ],
)
def test_ring_formulas(kind, n, expected):
    assert wire_bytes(kind, 1.0, n) == pytest.approx(expected)


def test_collective_bytes_from_shape_and_dtype():
    c = gv.Collective("all-gather", ("x",), (4, 16), np.float32, 2, "eqn3", (0,))
    assert c.operand_bytes == 256 and c.wire_bytes == 256
    assert c.result_shape == (8, 16)
    assert str(c) == "all-gather(x) f32[4, 16] -> f32[8, 16]  (256 B on the wire)  [eqn3]"
    a2a = gv.Collective("all-to-all", ("y",), (2, 8), "bfloat16", 4, dims=(1, 0))
    assert a2a.result_shape == (8, 2) and a2a.wire_bytes == 3 / 4 * 32


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="unknown collective kind 'broadcast'"):
        gv.Collective("broadcast", ("x",), (4,), np.float32, 2)


def test_format_bytes():
    assert [format_bytes(b) for b in (12, 1536, 3 * 2**20)] == ["12 B", "1.5 KiB", "3.0 MiB"]
