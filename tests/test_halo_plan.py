"""gv.halo_plan against XLA's formulas (spmd_partitioner_util.cc, ExchangeHaloAndGetValidData;
written out here with C++ integer division) and against brute force: which input elements each
shard's windows read."""

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import gspmd_viz as gv


def _trunc_div(a: int, b: int) -> int:  # C++ `/` on int64 (b > 0): rounds toward zero
    return a // b if a >= 0 else -(-a // b)


def xla_halos(n, shards, w, s=1, wd=1, bd=1, pad=(0, 0)):
    """left/right halos per shard, as XLA's ReshardAsWindowedInput computes them."""
    pl, ph = pad
    dilated = 1 + (w - 1) * wd
    full = n + (bd - 1) * (n - 1) + pl + ph
    windows = (full - dilated) // s + 1
    c = math.ceil(windows / shards)
    shard = math.ceil(n / shards)
    e = _trunc_div(pl, bd)
    pl_rest = pl - e * bd  # C++ `%`
    left, right = [], []
    for i in range(shards):
        start = _trunc_div(s * c * i + bd - 1 - pl_rest, bd)
        limit = _trunc_div(s * c * i + s * (c - 1) + dilated + bd - 1 - pl_rest, bd)
        left.append(shard * i + e - start)
        right.append(limit - (shard * (i + 1) + e))
    return tuple(left), tuple(right)


def tap_positions(plan, windows) -> list[int]:
    """Brute force: every position of the padded, dilated input the windows read."""
    taps = range(0, plan.window_span, plan.dilation)
    return [plan.stride * j + t for j in windows for t in taps]


def elements_between(plan, positions) -> set[int]:
    """Input elements (any integer; outside [0, N) = padding) from the first to the last of
    `positions`: what a shard must hold to slide its windows over them."""
    if not positions:
        return set()
    pl, bd = plan.padding[0], plan.base_dilation
    span = range(min(positions), max(positions) + 1)
    return {(p - pl) // bd for p in span if (p - pl) % bd == 0}


def elements_read(plan, windows) -> set[int]:
    pl, bd = plan.padding[0], plan.base_dilation
    return {(p - pl) // bd for p in tap_positions(plan, windows) if (p - pl) % bd == 0}


@st.composite
def configs(draw):
    return dict(
        size=draw(st.integers(1, 40)),
        shards=draw(st.integers(1, 8)),
        window=draw(st.integers(1, 7)),
        stride=draw(st.integers(1, 5)),
        dilation=draw(st.integers(1, 3)),
        base_dilation=draw(st.integers(1, 3)),
        padding=(draw(st.integers(-4, 6)), draw(st.integers(-4, 6))),
    )


def _plan_or_skip(cfg):
    lo, hi = cfg["padding"]
    full = cfg["size"] + (cfg["base_dilation"] - 1) * (cfg["size"] - 1) + lo + hi
    assume(full >= 1 + (cfg["window"] - 1) * cfg["dilation"])
    return gv.halo_plan(**cfg)


def test_reference_worked_example():
    plan = gv.halo_plan(size=10, shards=4, window=1, stride=2)
    assert plan.left == (0, -1, -2, -3)
    assert plan.right == (0, 1, 2, 3)
    assert plan.shard_size == 3
    assert plan.windows == (range(0, 2), range(2, 4), range(4, 5), range(5, 5))


@given(configs())
def test_halos_equal_xla_formulas(cfg):
    plan = _plan_or_skip(cfg)
    args = (cfg["size"], cfg["shards"], cfg["window"], cfg["stride"], cfg["dilation"])
    assert (plan.left, plan.right) == xla_halos(*args, cfg["base_dilation"], cfg["padding"])


@given(configs())
def test_needs_are_the_elements_the_windows_cover(cfg):
    plan = _plan_or_skip(cfg)
    c = plan.windows_per_shard
    for i, need in enumerate(plan.needs):
        windows = range(c * i, c * (i + 1))
        assert set(need) == elements_between(plan, tap_positions(plan, windows))
        assert elements_read(plan, windows) <= set(need)
        assert plan.shard_size * i - plan.left[i] == need.start
        assert plan.shard_size * (i + 1) + plan.right[i] == need.stop


@given(configs())
def test_windows_split_the_output_like_every_uneven_sharding(cfg):
    plan = _plan_or_skip(cfg)
    total = (plan.padded_size - plan.window_span) // plan.stride + 1
    assert [j for w in plan.windows for j in w] == list(range(total))
    assert all(len(w) <= math.ceil(total / plan.shards) for w in plan.windows)


@given(configs())
def test_transfers_deliver_every_element_a_real_window_reads(cfg):
    plan = _plan_or_skip(cfg)
    for i, read in enumerate(plan.reads):
        between = elements_between(plan, tap_positions(plan, plan.windows[i]))
        assert set(read) == {k for k in between if 0 <= k < plan.size}
        have = set(plan.owned(i))
        for t in plan.transfers:
            for src, dst in t.pairs:
                if dst == i:
                    base = plan.shard_size * src
                    have |= {base + k for k in range(t.lo, t.hi) if base + k < plan.size}
        assert set(read) <= have


def xla_exchange_halo_sizes(plan) -> list[int]:
    """Elements each collective-permute of XLA's ExchangeHalo (the non-compact path) sends
    from every sender, skipped rounds left out."""
    n = plan.shard_size
    max_left, max_right = max(plan.left[1:], default=0), max(plan.right[:-1], default=0)
    left_bound, right_bound = -max(plan.left), n + max(plan.right)
    sizes = []
    for r in range(max(0, math.ceil(max_left / n))):  # XLA walks r downwards, stops here
        if (-r - 1) * n >= right_bound:
            continue
        size = min(max_left - n * r, n) - max(-r * n - right_bound, 0)
        sizes.append(size)
    skipped = min(max(left_bound - n, 0), max(max_right, 0)) // n
    for r in range(skipped, max(0, math.ceil(max_right / n))):
        size = min(max_right - n * r, n) - max(left_bound - (r + 1) * n, 0)
        sizes.append(size)
    return sizes


@given(configs())
def test_never_sends_more_than_xla_exchange_halo(cfg):
    """Summed over rounds, the elements of one permute's slice: what a device that sends in
    every round sends, and the wire bytes both partitioners are compared by."""
    plan = _plan_or_skip(cfg)
    assume(not plan.gather_instead)
    xla = sum(xla_exchange_halo_sizes(plan))
    assert sum(t.size for t in plan.transfers) <= xla, (plan.transfers, xla)


@given(configs())
def test_rounds_have_distinct_senders_and_receivers(cfg):
    plan = _plan_or_skip(cfg)
    for t in plan.transfers:
        assert len({src for src, _ in t.pairs}) == len({dst for _, dst in t.pairs}) == len(t.pairs)
        assert all(src != dst for src, dst in t.pairs)


def test_rounds_pack_pieces_of_different_distances_when_that_sends_less():
    """17 rows over 8 shards, 2-wide windows at stride 1: shard i reads rows [2i, 2i + 3).
    One round per distance sends the hulls 3 + 3 + 1 rows; pieces packed as XLA's compact
    exchange does (each source its next piece, receivers distinct) send 3 + 1 + 2."""
    plan = gv.halo_plan(17, 8, window=2)
    assert sorted(t.size for t in plan.transfers) == [1, 2, 3]
    assert any(len(t.distances) > 1 for t in plan.transfers)


def test_rounds_count_collective_permutes_per_side():
    # window 9 on shards of 2: each side needs 4 elements, i.e. two neighbours' whole shards
    plan = gv.halo_plan(16, 8, window=9, padding=(4, 4))
    assert plan.left == (4,) * 8 and plan.right == (4,) * 8
    assert plan.rounds == (2, 2)
    assert plan.rounds.left == 2
    assert plan.elements_sent()[3] == 8 and not plan.gather_instead


def test_a_halo_covering_the_dim_says_gather_instead():
    plan = gv.halo_plan(8, 4, window=7, padding=(3, 3))
    assert "gather" in plan.gather_instead


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(size=0, shards=2, window=1), "size must be at least 1"),
        (dict(size=8, shards=0, window=1), "shards must be at least 1"),
        (dict(size=8, shards=2, window=3, stride=0), "stride must be at least 1"),
        (dict(size=8, shards=2, window=2.5), "window must be an int"),
        (dict(size=8, shards=2, window=True), "window must be an int"),
        (dict(size=8, shards=2, window=1, padding=3), "padding must be a pair"),
        (dict(size=8, shards=2, window=1, padding=(1, "2")), "padding high must be an int"),
        (dict(size=4, shards=2, window=3, dilation=3), "window spans 7 positions"),
        (dict(size=4, shards=2, window=2, padding=(-2, -1)), "padded input has only 1"),
    ],
)
def test_impossible_configs_say_what_is_wrong(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        gv.halo_plan(**kwargs)
