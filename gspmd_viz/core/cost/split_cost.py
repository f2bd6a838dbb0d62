"""What a candidate split of one equation costs beyond its bytes: work done twice, FLOPs, time on
a chip, and memory. choose_split.py ranks its candidates with `rank`.

Bytes alone let the planner buy a few bytes with redundant compute: gather an operand over a mesh
axis it was split on, then compute the same result on every device of that axis (1.35x XLA's
FLOPs on the zoo's training step). So a split's rank is, in order:
  1. over HBM: its local operands and results would not fit on the chip (it cannot run);
  2. work done twice: the devices along the mesh axes the operands promise (every operand
     holding a factor arrives split over them, or holds pending sums over them) but the split
     uses for no factor all compute the same thing: the product of those axes' sizes (1: no
     redundant work). A gather or copy counts too: whatever reads its replicated result would
     compute replicated as well. An elementwise op does not: its one FLOP a result costs no
     more than a collective's copy of it. An axis one operand splits a factor over while
     another holds it whole promises nothing, unless every operand arrives split over it on
     some factor: gathering that one operand is XLA's plan and often the cheaper one.
     The count is multiplied by the devices idle on padding: a factor split over more devices
     than it has elements (4 experts over 8) leaves the rest computing on nothing
     (`idle_on_padding`);
  3. wire bytes (split.EquationSplit.cost: operands fetched, results moved where wanted);
  4. time on the chip: local FLOPs at peak plus each collective's ring time (gv.sim's chip
     through `ChipCost`; core knows no chip by name), or the FLOPs alone without a chip;
  5. the bytes its local operands and results hold: of two splits equal so far, the one that
     holds less (a table looked up where its rows live, not gathered for the same bytes).
At the zoo's toy sizes a pure time model is latency-bound (~1 us a collective), so redundant
compute would look free: that is why it comes after the rule and the bytes, not before.
# XLA: dot_handler.cc weighs its strategies by FLOPs and bytes; GSPMD (2105.04663) section 3.5
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from gspmd_viz.core.program.trace import Value
from gspmd_viz.core.sharding.sharding import as_dtype, ceil_div


@dataclasses.dataclass(frozen=True)
class ChipCost:
    """What the partitioner knows of a chip: peak FLOP/s, HBM bytes and bandwidth, and a
    collective's seconds `collective_seconds(kind, S, n)` (S: all-gather's result bytes, the
    operand's for the others, as gv.sim.collective_time takes it)."""

    name: str
    peak_flops: float
    hbm_bytes: float
    hbm_bandwidth: float
    collective_seconds: Callable[[str, float, int], float] = dataclasses.field(repr=False)

    def comm_seconds(self, collectives) -> float:
        """Each collective's ring time, one after another, over all its trips."""
        return sum(
            c.trips * self.collective_seconds(c.kind, c.payload_bytes, c.group_size)
            for c in collectives
        )


# --- one equation under one split ---------------------------------------------------------------


def flops(q, fa) -> float:
    """Per-device FLOPs of equation `q` (split.EquationSplit) under split `fa`: its factor loop
    nest with split factors cut to their (padded) local size, times the primitive's FLOPs per
    point (2 for a multiply-add, 0 for data movement). A whole factor is whole everywhere."""
    if q.entry.identity:
        return 0.0
    local = list(q.factor_sizes)  # [factor's size]: whole, then cut where split
    for f, axes in fa.items():
        local[f] = ceil_div(local[f], q.size(axes))
    return float(q.point_flops * math.prod(local))


def local_bytes(q, fa) -> int:
    """Bytes of the equation's local (padded) operands and results under split `fa`."""
    values, (ops, results) = q.eqn.inputs + q.eqn.outputs, q.tensor_shardings(fa)
    return sum(s.shard_bytes(v.shape, v.dtype) for v, s in zip(values, ops + results, strict=True))


class HeldBytes:
    """local_bytes(q, fa) worked out when first compared or read (int()): two ranks that
    differ before their last entry never read it (choose_split ranks many candidates)."""

    __slots__ = ("_bytes", "_fa", "_q")
    __hash__ = None

    def __init__(self, q, fa):
        self._q, self._fa, self._bytes = q, fa, None

    def __int__(self) -> int:
        if self._bytes is None:
            self._bytes = local_bytes(self._q, self._fa)
        return self._bytes

    def __eq__(self, other) -> bool:
        return int(self) == int(other)

    def __lt__(self, other) -> bool:
        return int(self) < int(other)

    def __gt__(self, other) -> bool:
        return int(self) > int(other)


def twice(q, fa, costs, promise: set[str]) -> int:
    """How many devices compute each result of the equation under `fa` although its operands
    arrive split so that they need not: the product of the sizes of the mesh axes `promise`
    (promised_by_any) names and `fa` splits no factor over. An op that only moves data computes
    nothing, so done whole it does nothing twice where it must gather anyway: a windowed op
    (concatenate, pad) may gather its operands once instead of exchanging a halo per operand,
    and a dynamic update of part of a split dim may gather it rather than move the split to
    another dim and back (XLA gathers); and over a mesh axis every reader asks for the result
    whole on, it is gathered anyway, so the bytes decide where (a widening convert gathers its
    narrower operand, as XLA does; a lookup gathers its table when that is smaller than the
    rows it looks up, and the matmul that reads them needs them whole over the table's axis).
    An elementwise op does one FLOP a result, no more than the copy a collective makes of it, so
    repeating it counts for nothing and the bytes decide (a loop's carry plus its update is
    added where the carry lives, not moved to the update's split and gathered back)."""
    return twice_counter(q, costs, promise)(fa)


def twice_counter(q, costs, promise: set[str]) -> Callable[[dict], int]:
    """`twice` of q for any split, with what does not depend on the split (whether q repeats
    nothing whatever its split, the axes its readers ask for whole, the promised axes' sizes)
    worked out once: the candidates of one choice share it."""
    if repeats_nothing(q, costs):
        return lambda fa: 1
    whole = _asked_whole_over(q, costs) if q.entry.flops == 0 else set()
    counted = {a: q.sizes[a] for a in promise - whole if q.sizes[a] > 1}

    def count(fa: dict) -> int:
        used = {a for axes in fa.values() for a in axes}
        return math.prod([n for a, n in counted.items() if a not in used])

    return count


def repeats_nothing(q, costs) -> bool:
    """Is `twice` 1 for every split of q and whatever the operands promise: an op that only
    moves data with halos or an operand it must gather anyway, or an elementwise op?"""
    moves_only = q.entry.flops == 0
    return (moves_only and (q.halo or _gathers_anyway(q, costs))) or _elementwise(q)


def sliced_after(q, fa, costs) -> bool:
    """Do the readers of q (a split.EquationSplit) ask for a result split over a mesh axis `fa`
    leaves idle? Then the idle devices compute what a free slice throws away: `x[16/y, 32] @
    w[32, 64]` read as `[16/y, 64/x]` is done twice, where slicing w first halves it."""
    asked = {a for v in q.eqn.outputs for s in costs.wanted(v) for a in s.tiled_axes}
    return bool(asked.intersection(_idle_axes(q, fa)))


def _idle_axes(q, fa) -> tuple[str, ...]:
    """The mesh axes (of more than one device) split `fa` of q leaves unused, in mesh order."""
    used = {a for axes in fa.values() for a in axes}
    return tuple(a for a in q.mesh.axis_names if a not in used and q.sizes[a] > 1)


def _elementwise(q) -> bool:
    """One FLOP a point and every factor passing through (add, max, exp; not a reduction)."""
    return q.entry.flops == 1 and all(f.kind == "pass" for f in q.rule.factors)


def idle_on_padding(q, fa) -> float:
    """How many devices there are for each one that holds a piece of work under `fa` when a
    factor is split over more devices than it has elements (E = 4 experts over 8 devices: half
    of them hold only padding, 2). 1 when every device holds part of each split factor."""
    if q.entry.flops == 0:
        return 1.0
    sizes = (q.size(axes) / q.rule.factors[f].size for f, axes in fa.items())
    return math.prod(n for n in sizes if n > 1)


def arrivals(q, costs) -> list[tuple]:
    """(value, factors, sharding, the factor split it implies) of each operand as it arrives."""
    found = []
    for v, tensor in zip(q.eqn.inputs, q.rule.operands, strict=True):
        if isinstance(v, Value):
            sharding = costs.available(v)[0]
            found.append((v, tensor, sharding, q.from_tensor(tensor, sharding)))
    return found


def _gathers_anyway(q, costs) -> bool:
    """Does an operand arrive split on a factor the equation must hold whole (not a lookup's
    indexed dim, which splits: each device looks up the rows it holds)?"""
    return any(
        q.rule.factors[f].kind == "need_replication" and f not in q.lookup and q.size(a) > 1
        for _, _, _, split in arrivals(q, costs)
        for f, a in split.items()
    )


def _asked_whole_over(q, costs) -> set[str]:
    """The mesh axes over which all that read every result (its consumers, or the output) ask
    for it whole."""
    wanted = [costs.wanted(v) for v in q.eqn.outputs]
    if not all(wanted):  # nothing is known of a result's readers
        return set()
    return set.intersection(*(set(s.replicated_axes) for w in wanted for s in w))


def promised(q, costs) -> set[str]:
    """The mesh axes the operands' arrival shardings promise a split over: those every operand
    holding a factor splits it over, those of a factor every holder splits but over disjoint
    axes (`x[16, 32/y] @ w[32/x, 64]`: one of the two moves), those every operand splits some
    factor over (`_split_by_every_operand`), and an operand's pending sums.
    A factor some operand holds whole promises nothing in a dot: splitting it would slice
    that operand and leave partial sums to move, and XLA's dot handler gathers the split one
    (`x[16, 32/y] @ w[32, 64]`: 1.5 KiB of x gathered, not 6 KiB of sums reduced). A windowed
    op (a convolution) moves the smaller operand as XLA's conv handler does: a kernel split on
    its channels is gathered, but an image split on its channels promises the split (the
    kernel is sliced to it, the partial sums reduced; convolving the whole image on every
    device was 2.6-3.5x XLA's FLOPs)."""
    arrived = arrivals(q, costs)
    axes = _split_by_every_operand([split for *_, split in arrived])
    split_somewhere = set()  # a factor no operand splits promises nothing: its sets are empty
    for _, _, sharding, split in arrived:
        axes.update(sharding.unreduced)
        split_somewhere.update(f for f, a in split.items() if a)
    windowed = any(f.kind.startswith("windowed") for f in q.rule.factors)
    for f in split_somewhere:
        held = _holders(arrived, f, windowed)
        sets = [s for s, _ in held]
        agreed = set.intersection(*sets)
        if agreed or all(sets) or (windowed and _split_holder_bigger(held)):
            axes |= agreed or set.union(*sets)
    return axes


def _holders(arrived: list[tuple], f: int, windowed: bool) -> list[tuple[set[str], int]]:
    """(the axes it splits factor f over, its bytes if `windowed`, else 0) of each arrival
    (`arrivals`) holding f."""
    return [
        (set(split.get(f, ())), _value_bytes(v) if windowed else 0)
        for v, tensor, _, split in arrived
        if any(f in fs for fs in tensor)
    ]


def _split_by_every_operand(splits: list[dict]) -> set[str]:
    """The mesh axes every operand (of two or more; `splits`: the factor split each arrives
    in) is split over, on whatever factor: computed whole over such an axis, every operand is
    gathered there and all its devices do the same work. `attn[8, 16, 4@y, 8] . wo[32, 4,
    8@y]` splits the heads in one and the head dim in the other: one of them moves (XLA moves
    wo to the heads' split), not both."""
    held = [{a for axes in split.values() for a in axes} for split in splits]
    return set.intersection(*held) if len(held) > 1 else set()


def promised_by_any(splits, costs) -> set[str]:
    """The axes any of an equation's rules (split.EquationSplit each) sees promised: operands
    arrive as they arrive whatever rule reads them, so what one rule sees promised (a conv
    kernel's taps split) no other rule may call free to compute whole."""
    return set().union(*(promised(q, costs) for q in splits))


def _split_holder_bigger(held: list[tuple[set[str], int]]) -> bool:
    """Is the biggest operand splitting a factor bigger than the biggest holding it whole?"""
    split = max((size for s, size in held if s), default=0)
    return split > max((size for s, size in held if not s), default=0)


def merged(candidates: list[dict]) -> list[dict]:
    """Each pair of candidate splits taken together (the second's axes win a shared factor):
    a lookup split where its table lives AND its batch where its ids live does no work twice,
    though neither the table's nor the ids' sharding alone implies it. Also each split with
    the mesh axes another uses given up to it: a table's rows over (x, y) and the ids' batch
    over y make rows over x and batch over y (XLA's lookup, then an all-reduce over x)."""
    pairs = [{**a, **b} for i, a in enumerate(candidates) for b in candidates[i + 1 :]]
    pairs += [{**_yielding(a, b), **b} for a in candidates for b in candidates if a != b]
    return [fa for fa in pairs if fa not in candidates]


def _yielding(fa: dict, to: dict) -> dict:
    """fa with each factor's axes cut before the first mesh axis that `to` uses."""
    taken = {a for axes in to.values() for a in axes}
    out = {}
    for f, axes in fa.items():
        if taken.isdisjoint(axes):  # most factors: kept whole
            out[f] = tuple(axes)
            continue
        k = 0
        while axes[k] not in taken:
            k += 1
        if k:
            out[f] = tuple(axes[:k])
    return out


def spread(q, candidates: list[dict]) -> list[dict]:
    """Each of q's candidate splits (q: a split.EquationSplit) with the mesh axes it leaves
    idle also splitting a factor every operand and result may split (a matmul's rows or
    columns, an elementwise op's dims): the idle devices share the work instead of repeating
    it, and the result is gathered after if wanted whole. Not for an op that only moves data,
    nor a reduction: it does too little per result to pay for another collective (a max over
    split rows: one all-reduce, as XLA does)."""
    flops, kinds = q.entry.flops, {f.kind for f in q.rule.factors}
    if flops == 0 or (flops == 1 and "reduction" in kinds):
        return []
    out = []
    for fa in candidates:
        idle = _idle_axes(q, fa)
        for axes in dict.fromkeys([(a,) for a in idle] + [idle] if idle else []):
            for f, factor in enumerate(q.rule.factors):
                if factor.kind == "pass":
                    out.append({**fa, f: fa.get(f, ()) + axes})
    return out


def rank(q, fa, costs, wire_bytes: float, promise: set[str], head=None) -> tuple:
    """The key split.EquationSplit.choose minimizes (see the module text); `costs.chip` is a
    ChipCost or None; `promise`: the axes the operands promise (promised_by_any); `head`:
    rank_head's answer for the same split, if worked out already."""
    chip, work = costs.chip, flops(q, fa)
    (over, done_twice), held = head or rank_head(q, fa, costs, promise)
    if chip is None:
        return (False, done_twice, wire_bytes, work, held)
    return (over, done_twice, wire_bytes, work / chip.peak_flops, held)


def rank_head(q, fa, costs, promise: set[str]) -> tuple[tuple[bool, float], int]:
    """(rank's first two entries: held bytes over the chip's memory, devices per piece of
    work; the bytes held). They need no wire bytes: a split whose head is above another's
    ranks below it however few bytes it moves, so choose_split need not work those out."""
    return head_ranker(q, costs, promise)(fa)


def head_ranker(q, costs, promise: set[str], lazy: bool = False) -> Callable[[dict], tuple]:
    """rank_head of q for any split, with what does not depend on the split worked out once
    (`twice_counter`, the chip's memory): the candidates of one choice share it. `lazy`: the
    bytes held as a HeldBytes, where no split of q can be over the chip's memory (a local
    shard, padded, holds no more than the whole value), so only a tie reads them."""
    count = twice_counter(q, costs, promise)
    hbm = None if costs.chip is None else costs.chip.hbm_bytes
    fits = hbm is None or _whole_bytes(q) <= hbm

    def head(fa: dict) -> tuple[tuple[bool, float], int]:
        held = HeldBytes(q, fa) if lazy and fits else local_bytes(q, fa)
        return (not fits and held > hbm, count(fa) * idle_on_padding(q, fa)), held

    return head


def _whole_bytes(q) -> int:
    """Bytes of q's operands and results, whole."""
    return sum(_value_bytes(v) for v in q.eqn.inputs + q.eqn.outputs)


def _value_bytes(v) -> int:
    """Bytes of a value (or literal) whole."""
    return math.prod(v.shape) * as_dtype(v.dtype).itemsize
