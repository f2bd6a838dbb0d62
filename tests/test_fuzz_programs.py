"""Random small programs (tests/fuzz_programs.py) run partitioned: equal to the program with its
annotations dropped on one device, no crash, and no more wire bytes than 1.25x XLA's + 64 B
(except steps with a measured byte gap: fuzz_programs.BYTES_GAPS). benchmarks/fuzz.py runs it
long."""

from fuzz_programs import check, fsdp_dot, programs
from hypothesis import given, settings


def assert_right_and_cheap(p) -> None:
    out = check(p)
    assert not out.crashed, f"{out.crashed}\n{p}"
    assert not out.wrong, f"{out.wrong}\n{p}"
    if not p.bytes_gap:
        assert not out.over_bytes, f"ours {out.ours} B, XLA {out.xla} B\n{p}"


@settings(max_examples=100, derandomize=True)  # the long random run: benchmarks/fuzz.py
@given(programs())
def test_random_programs_are_right_and_cheap(p):
    assert_right_and_cheap(p)


@settings(max_examples=30, derandomize=True)
@given(programs(max_steps=2, first=fsdp_dot))
def test_random_programs_after_an_fsdp_dot_are_right_and_cheap(p):
    """Programs that start with x[rows@a] @ w[k@a, n@b] (core/choice/gather_or_reduce.py)."""
    assert_right_and_cheap(p)
