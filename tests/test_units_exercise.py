"""The shared formatter and the predict-then-check helper."""

import pytest

from gspmd_viz.exercise import PREDICT_FIRST, check, verdict
from gspmd_viz.units import format_bytes, format_time, parse_bytes


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 B"), (12, "12 B"), (21.5, "21.5 B"), (1536, "1.5 KiB"), (3 * 2**30, "3.0 GiB")],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_bytes_huge_stays_in_pib():
    assert format_bytes(2**60) == "1024.0 PiB"


@pytest.mark.parametrize(
    "text, n", [("4096", 4096), ("1.5 GiB", 3 * 2**29), ("64MiB", 2**26), (" 2 B ", 2)]
)
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


@pytest.mark.parametrize("text", ["", "1.5", "-3 KiB", "ten MiB", "1 XB", "0"])
def test_parse_bytes_rejects_with_a_clear_message(text):
    with pytest.raises(ValueError, match="bytes|size"):
        parse_bytes(text)


@pytest.mark.parametrize(
    "t, text", [(2.5, "2.5 s"), (1.23e-3, "1.23 ms"), (4e-6, "4 µs"), (3e-9, "3 ns")]
)
def test_format_time(t, text):
    assert format_time(t) == text


def test_check_says_predict_first_until_a_guess(capsys):
    assert check(None, 42) is None
    assert capsys.readouterr().out.strip() == PREDICT_FIRST


def test_check_right_and_wrong_say_why(capsys):
    assert check(6, 6.0, "two shards of 12") is True
    assert "right" in capsys.readouterr().out
    assert check((4, 6), (4, 3), "dim 1 is split") is False
    out = capsys.readouterr().out
    assert "not quite" in out and "(4, 3)" in out and "dim 1 is split" in out


def test_verdict_compares_numbers_with_tolerance():
    assert verdict(0.1 + 0.2, 0.3).startswith("right")
    assert verdict(True, 1).startswith("not quite")
