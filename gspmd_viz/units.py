"""Bytes and seconds as people read them: the one formatter core, sim and viz share.

numpy-free and import-free on purpose, so every layer may use it without a cycle.
"""

import re

_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
_PARSE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(B|KiB|MiB|GiB|TiB)?\s*$")
_FACTOR = {None: 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; exact integers below 1 KiB ('12 B'), one decimal otherwise."""
    if n < 1024:
        return f"{n:.0f} B" if float(n).is_integer() else f"{n:.1f} B"
    for unit in _BYTE_UNITS:
        n /= 1024
        if n < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def parse_bytes(text: str) -> int:
    """'1.5 GiB' -> 1610612736, '4096' -> 4096; ValueError naming the accepted forms."""
    m = _PARSE.match(str(text))
    if not m:
        raise ValueError(
            f"cannot read {text!r} as a size: write a number with an optional unit "
            "B, KiB, MiB, GiB or TiB, e.g. '64 MiB' or '1.5 GiB'"
        )
    value = float(m.group(1)) * _FACTOR[m.group(2)]
    if value < 1 or not value.is_integer():
        raise ValueError(f"{text!r} is not a whole number of bytes (at least 1 B)")
    return int(value)


def format_time(seconds: float) -> str:
    """4 significant digits in s, ms, µs or ns: 0.00123 -> '1.23 ms'."""
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= size:
            return f"{seconds / size:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"
