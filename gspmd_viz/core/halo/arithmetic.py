"""Halo arithmetic for one sharded dim of a windowed op (convolution, pooling).

A windowed op reads, for output window j, the input positions s·j + t·wd (t < w) of the
*padded, base-dilated* input: element k of the real input sits at position pl + k·bd, holes
and padding read the pad value. Split the outputs over S shards (c = ceil(W/S) windows each, the
uneven tiling every sharding here uses) and the input the same way (ceil(N/S) elements each):
shard i then needs input elements [start(i), limit(i)), which reach past its own shard by its
*halo* on each side, or fall short of it (a negative halo: trim).

    start(i) = ceil((s·c·i − pl) / bd)        limit(i) = ceil((s·c·i + s(c−1) + dilated − pl) / bd)
    left(i)  = shard·i − start(i)             right(i) = limit(i) − shard·(i+1)

These equal XLA's offset calculations (XLA: spmd/spmd_partitioner_util.cc
ExchangeHaloAndGetValidData, PartitionedHlo::ReshardAsWindowedInput), which tests check on
random configs.

`HaloPlan.transfers` is the exchange: collective-permute rounds (rounds.py), each sending
the same slice of every sender's shard, only to shards whose real windows read it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

from gspmd_viz.core.halo.rounds import Transfer, cheapest_rounds
from gspmd_viz.core.sharding.sharding import ceil_div


class Sides(NamedTuple):
    left: int
    right: int


def _check_int(name: str, value, low: int | None = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"halo_plan: {name} must be an int, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"halo_plan: {name} must be at least {low}, got {value}")
    return value


def _check_padding(padding) -> tuple[int, int]:
    if not isinstance(padding, (tuple, list)) or len(padding) != 2:
        raise ValueError(f"halo_plan: padding must be a pair (low, high) of ints, got {padding!r}")
    return (
        _check_int("padding low", padding[0], None),
        _check_int("padding high", padding[1], None),
    )


@dataclasses.dataclass(frozen=True)
class HaloPlan:
    """What every shard of one sharded dim needs and how it gets it (see the module doc)."""

    size: int
    shards: int
    window: int
    stride: int
    dilation: int
    base_dilation: int
    padding: tuple[int, int]

    @property
    def shard_size(self) -> int:
        return ceil_div(self.size, self.shards)

    @property
    def window_span(self) -> int:
        """Positions one window covers on the padded, dilated input: 1 + (w−1)·wd."""
        return 1 + (self.window - 1) * self.dilation

    @property
    def padded_size(self) -> int:
        """Positions of the padded, base-dilated input: N + (bd−1)(N−1) + pl + ph."""
        lo, hi = self.padding
        return self.size + (self.base_dilation - 1) * (self.size - 1) + lo + hi

    @property
    def windows_total(self) -> int:
        return (self.padded_size - self.window_span) // self.stride + 1

    @property
    def windows_per_shard(self) -> int:
        return ceil_div(self.windows_total, self.shards)

    @property
    def windows(self) -> tuple[range, ...]:
        """The output windows each shard computes for real (the last ones may have fewer)."""
        c, total = self.windows_per_shard, self.windows_total
        return tuple(range(min(c * i, total), min(c * (i + 1), total)) for i in range(self.shards))

    def _first_element(self, position: int) -> int:
        """The first input element at or after `position` of the padded, dilated input."""
        return ceil_div(position - self.padding[0], self.base_dilation)

    def elements_under(self, first_window: int, windows: int = 1) -> range:
        """Input elements under `windows` windows from `first_window` (beyond [0, N): padding)."""
        begin = self.stride * first_window
        end = begin + self.stride * (windows - 1) + self.window_span
        return range(self._first_element(begin), self._first_element(end))

    @functools.cached_property
    def needs(self) -> tuple[range, ...]:
        """Input elements [start(i), limit(i)) shard i's c windows cover (XLA's halo ranges)."""
        c = self.windows_per_shard
        return tuple(self.elements_under(c * i, c) for i in range(self.shards))

    @property
    def left(self) -> tuple[int, ...]:
        return tuple(self.shard_size * i - r.start for i, r in enumerate(self.needs))

    @property
    def right(self) -> tuple[int, ...]:
        return tuple(r.stop - self.shard_size * (i + 1) for i, r in enumerate(self.needs))

    @functools.cached_property
    def reads(self) -> tuple[range, ...]:
        """Real input elements shard i's real windows read: needs ∩ [0, N), empty if no window."""
        out = []
        for win in self.windows:
            span = self.elements_under(win.start, len(win)) if win else range(0)
            lo, hi = max(span.start, 0), min(span.stop, self.size)
            out.append(range(lo, hi) if lo < hi else range(0))
        return tuple(out)

    def owned(self, i: int) -> range:
        """Real input elements stored on shard i."""
        n = self.shard_size
        return range(min(n * i, self.size), min(n * (i + 1), self.size))

    @functools.cached_property
    def transfers(self) -> tuple[Transfer, ...]:
        return cheapest_rounds(self)

    @property
    def rounds(self) -> Sides:
        """Collective-permute rounds on each side (more than one: a halo wider than a shard;
        a round packing both sides counts on each)."""
        sides = [s for t in self.transfers for s in t.sides]
        return Sides(sides.count("left"), sides.count("right"))

    @property
    def ready_span(self) -> int:
        """Positions the windows of one shard cover: the window-ready input's size on the dim
        (base dilation done, first window at 0)."""
        return self.stride * (self.windows_per_shard - 1) + self.window_span

    @property
    def ready_size(self) -> int:
        """Elements of the window-ready local input: the widest [start(i), limit(i))."""
        return max(len(r) for r in self.needs)

    @property
    def dilation_offsets(self) -> tuple[int, ...]:
        """Position of element start(i) after shard i's first window start (0 ≤ · < bd)."""
        c, s, pl = self.windows_per_shard, self.stride, self.padding[0]
        return tuple(
            pl + r.start * self.base_dilation - s * c * i for i, r in enumerate(self.needs)
        )

    @property
    def gather_instead(self) -> str:
        """Why XLA would replicate instead of exchanging halos ('' when it exchanges)."""
        return _gather_reason(self)

    def elements_sent(self) -> dict[int, int]:
        """Elements of this dim each shard sends over all rounds (shard -> count)."""
        sent = dict.fromkeys(range(self.shards), 0)
        for t in self.transfers:
            for src, _ in t.pairs:
                sent[src] += t.size
        return sent


def _gather_reason(plan: HaloPlan) -> str:
    # XLA: ExchangeHalo gives up when the halos plus the shard cover the whole dim and a halo
    # is wider than a shard; the caller then replicates the operand.
    n, s = plan.shard_size, plan.shards
    max_left = max(plan.left[1:], default=0)
    max_right = max(plan.right[:-1], default=0)
    if max_left + max_right + n >= n * s and max(max_left, max_right) > n:
        return (
            f"halos ({max_left} left, {max_right} right) plus a shard of {n} cover all "
            f"{n * s} elements: gathering the dim is cheaper"
        )
    return ""


def padding_for(padding, size: int, window: int, stride: int = 1, dilation: int = 1):
    """'SAME' / 'VALID' / (lo, hi) -> (lo, hi), as jax.lax pads a dim of `size` (SAME: ceil(N/s)
    outputs, the odd element of padding on the high side)."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"padding {padding!r}: write SAME, VALID or a pair (low, high)")
        if padding.upper() == "VALID":
            return (0, 0)
        span = 1 + (window - 1) * dilation
        total = max(0, (ceil_div(size, stride) - 1) * stride + span - size)
        return (total // 2, total - total // 2)
    return _check_padding(padding)


def halo_plan(
    size: int,
    shards: int,
    window: int,
    stride: int = 1,
    dilation: int = 1,
    base_dilation: int = 1,
    padding: tuple[int, int] = (0, 0),
) -> HaloPlan:
    """The halos of one sharded dim of a windowed op; see `HaloPlan` and the module doc.

    >>> p = halo_plan(10, 4, window=1, stride=2)
    >>> p.left, p.right
    ((0, -1, -2, -3), (0, 1, 2, 3))
    """
    args = {"size": size, "shards": shards, "window": window, "stride": stride}
    args |= {"dilation": dilation, "base_dilation": base_dilation}
    for name, value in args.items():
        _check_int(name, value)
    plan = HaloPlan(**args, padding=_check_padding(padding))
    if plan.padded_size < plan.window_span:
        raise ValueError(
            f"halo_plan: the window spans {plan.window_span} positions (window {window}, "
            f"dilation {dilation}) but the padded input has only {plan.padded_size} "
            f"(size {size}, base dilation {base_dilation}, padding {plan.padding}): "
            "use a smaller window or dilation, or more padding"
        )
    return plan
