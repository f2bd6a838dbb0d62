"""Choosing how one equation splits its factors over mesh axes, by what each choice costs.

Candidates: the split propagation settled on, the split each operand (in every sharding it is
available in; axes on a dim the equation cannot split moved to one it can) or result implies,
for a windowed op (concatenate, pad) what its consumers ask for or nothing split (gathering a
concatenation's operands once beats a halo per operand), pairs of these merged; with
`Costs.spread`, then splits with the mesh axes one leaves idle sharing its work
(split_cost.spread): of every candidate for a dot or convolution, where the work is, of the
winner so far for other ops (one FLOP a point at most). A candidate is
sanitized (only factors that may be split: pass, reductions that combine, lookups, halo-free
windows; compound dims in contiguous blocks; each mesh axis once) and costed: resharding the
operands to it, plus moving the results to what their consumers will ask for (or a value's only
reader splitting to match, if cheaper: lookahead.py), in wire bytes, ranked by split_cost.
A conv's rules (halos, or partial sums over taps) are all costed; covering halos win if cheaper.
# XLA: dot_handler.cc / convolution_handler.cc try strategies and compare costs
"""

import functools
import math
from collections.abc import Callable
from typing import Protocol

from gspmd_viz.core.cost.split_cost import (
    head_ranker,
    merged,
    promised_by_any,
    rank,
    repeats_nothing,
    sliced_after,
    spread,
    twice,
)
from gspmd_viz.core.halo.exchange import SpatialSplit, halo_permutes
from gspmd_viz.core.halo.windowed_ops import halo_operands, split_of, wide_halos_gather, window_of
from gspmd_viz.core.program.trace import Equation, Value
from gspmd_viz.core.propagation.record import FactorAxes
from gspmd_viz.core.reshard.planner import least_wire_bytes, reshard_plan
from gspmd_viz.core.rules.factors import FactorRule
from gspmd_viz.core.rules.registry import entry_for, point_flops
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd.reduce_combine import RIGHT_AWAY, combine_collectives


class Costs(Protocol):
    """What choosing a split asks of the partitioner (and nothing else)."""

    def available(self, v: Value) -> list[Sharding]:
        """The shardings v already exists in."""

    def fetch_cost(self, v: Value, target: Sharding) -> float:
        """Wire bytes to get v into `target` from its cheapest available sharding."""

    def wanted(self, v: Value) -> list[Sharding]:
        """The shardings v's consumers will likely ask for."""

    def handoff_cost(self, v: Value, local: Sharding, past: Callable | None = None) -> float:
        """Wire bytes to hand v, split as `local`, to its consumers; with `past`, bytes for
        which past(bytes) holds once they are sure to be that many (see handoff_bytes)."""

    def exchanged(self, eqn: Equation, k: int, sharding: Sharding, splits) -> bool:
        """Were operand k's halos (in `sharding`, for `splits`) exchanged already?"""

    chip: object  # a split_cost.ChipCost, or None (no chip: FLOPs break ties)
    spread: bool  # may idle mesh axes share an equation's work (split_cost.spread)?


@functools.lru_cache(maxsize=4096)
def cached_plan(src: Sharding, dst: Sharding, shape, dtype):
    return reshard_plan(src, dst, shape, dtype)


@functools.lru_cache(maxsize=4096)
def plan_floor(src: Sharding, dst: Sharding, shape, dtype) -> float:
    return least_wire_bytes(src, dst, shape, dtype)


# --- choosing the factor split ---------------------------------------------------------------


def _tensor_axes(fa: FactorAxes, tensor) -> tuple[tuple[str, ...], ...]:
    """Each dim's mesh axes under split fa: its factors' axes, major first."""
    return tuple(
        [
            tuple(fa.get(fs[0], ())) if len(fs) == 1  # most dims: one factor's axes as they are
            else tuple([a for f in fs for a in fa.get(f, ())])
            for fs in tensor
        ]
    )  # fmt: skip


class EquationSplit:
    """One equation's rule, tensors and the cost of a factor split: `settled` is the split
    propagation settled on, `propagated` the results' propagated shardings. `made`: the
    shardings made so far (spec and pending sums -> Sharding), shared by the splits of one
    partition, so that equal shardings are one object (compared and hashed at once)."""

    def __init__(self, eqn: Equation, rule: FactorRule, settled, propagated, mesh, made=None):
        self.eqn, self.rule, self.settled, self.propagated = eqn, rule, settled, propagated
        self.made = {} if made is None else made
        self.mesh, self.sizes = mesh, mesh.shape
        self.entry = entry = entry_for(eqn)  # read at every costing: kept, not looked up
        indexed = entry.lookup_dims(eqn) if entry.lookup_dims else ()
        self.lookup = {f for d in indexed for f in rule.operands[0][d]}
        self.combine = entry.combine or ("sum" if self.lookup else None)
        self.halo_operands = halo_operands(eqn.eqn) if entry.halo else ()  # same dims in each
        self.halo_free = self.whole_window_factors(entry) if entry.halo_free_dims else {}
        self.halo = self.halo_factors() if entry.halo else {}
        self.gathered: dict[int, str] = {}  # operand-0 dim -> why halos would not pay
        self.compound = [fs for t in rule.operands + rule.results for fs in t if len(fs) > 1]
        self._shardings: dict[tuple, tuple] = {}  # split -> tensor_shardings
        self._sanitized: dict[tuple, FactorAxes] = {}  # split asked about -> split made
        self._implied: dict[tuple, FactorAxes] = {}  # (tensor, spec) -> from_tensor's split
        self._reductions: dict[tuple, tuple] = {}  # split -> reduction_axes

    @functools.cached_property
    def point_flops(self) -> float:
        """FLOPs per point of the factor loop nest (registry.point_flops), asked once."""
        return point_flops(self.eqn)

    @functools.cached_property
    def factor_sizes(self) -> tuple[int, ...]:
        return tuple(f.size for f in self.rule.factors)

    def halo_factors(self) -> dict[int, int]:
        """Windowed factor -> operand-0 dim a halo exchange may split."""
        rule = self.rule
        return {
            f: d
            for d in window_of(self.eqn.eqn)
            for f in rule.operands[0][d]
            if rule.factors[f].kind in ("windowed", "windowed-sum")
        }

    def whole_window_factors(self, entry) -> dict[int, tuple[int, int]]:
        """Windowed factor -> (size, stride) of the windowed operand's dim (a scatter's: its
        operand, not the source), for dims whose windows tile it: split into whole windows."""
        dims = entry.halo_free_dims(self.eqn)
        k = self.halo_operands[0] if self.halo_operands else 0
        return {
            f: (self.eqn.inputs[k].shape[d], stride)
            for d, stride in dims.items()
            for f in self.rule.operands[k][d]
            if self.rule.factors[f].kind != "windowed-sum"  # taps split too: a halo of their own
        }

    def splittable(self, f: int, axes) -> bool:
        kind = self.rule.factors[f].kind
        if kind == "pass" or (kind == "reduction" and self.combine) or f in self.lookup:
            return True
        if self.whole_windows(f, axes):
            return True
        return f in self.halo and all(
            self.halo_split(f, axes, k) is not None for k in self.halo_operands
        )

    def whole_windows(self, f: int, axes) -> bool:
        """Does splitting f give every shard whole windows (no halo needed)?"""
        if f not in self.halo_free:
            return False
        n, stride = self.halo_free[f]
        return n % (self.size(axes) * stride) == 0

    def halo_split(self, f: int, axes, operand: int = 0) -> SpatialSplit | None:
        """Factor f's dim of `operand` split over `axes` with a halo exchange; None where the
        windows do not fit. Halos that cover the dim (where XLA gathers) are noted: such a
        split must be cheaper than the gather to be chosen (`covers`)."""
        taps = self.rule.factors[f].kind == "windowed-sum"
        try:
            n, d = self.size(axes), self.halo[f]
            split = split_of(self.eqn.eqn, d, tuple(axes), n, operand, taps)
        except ValueError:
            return None
        if self.covering(split):
            self.gathered[d] = split.plan.gather_instead
        return split

    def covering(self, split: SpatialSplit) -> bool:
        return bool(split.plan.gather_instead) and wide_halos_gather(self.eqn.eqn)

    def covers(self, fa: FactorAxes) -> bool:
        """Does this split exchange halos that cover a dim (XLA gathers it instead)?"""
        if not self.halo_operands:  # most equations: asked at every costing
            return False
        return any(self.covering(s) for k in self.halo_operands for s in self.halo_splits(fa, k))

    def halo_splits(self, fa: FactorAxes, operand: int = 0) -> tuple[SpatialSplit, ...]:
        return tuple(
            self.halo_split(f, fa[f], operand)
            for f in sorted(fa)
            if f in self.halo and not self.whole_windows(f, fa[f])
        )

    def halo_bytes(self, fa: FactorAxes, exchanged=None) -> float:
        """Bytes a device sends in the halo exchanges this split needs (but those
        `exchanged(operand, its sharding, splits)` says were made already)."""
        total = 0.0
        for k in self.halo_operands:
            splits, v = self.halo_splits(fa, k), self.eqn.inputs[k]
            if exchanged and splits and exchanged(k, self.operand_sharding(fa, k), splits):
                continue
            local = self.operand_sharding(fa, k).shard_shape(v.shape)
            total += sum(p.bytes_per_sender for p in halo_permutes(splits, local, v.dtype))
        return float(total)

    @functools.cached_property
    def summed_factors(self) -> frozenset[int]:
        """The factors `summed` holds for."""
        return frozenset(f for f in range(len(self.rule.factors)) if self.summed(f))

    def summed(self, f: int) -> bool:
        """Does splitting factor f leave partial results (a reduction, or a split lookup)?"""
        return self.rule.factors[f].kind in ("reduction", "windowed-sum") or f in self.lookup

    def size(self, axes) -> int:
        return math.prod([self.sizes[a] for a in axes])

    def tensors(self):
        """(global shape, factors) of every operand and result."""
        e, r = self.eqn, self.rule
        return [
            (v.shape, t) for v, t in zip(e.inputs + e.outputs, r.operands + r.results, strict=True)
        ]

    def from_tensor(self, tensor, sharding: Sharding) -> FactorAxes:
        """The factor split a tensor's sharding implies (compound dims split major first);
        worked out once per (tensor, spec), a copy each time."""
        key = (tensor, sharding.spec)
        found = self._implied.get(key)
        if found is None:
            found = self._implied[key] = self._from_tensor(tensor, sharding)
        return dict(found)

    def _from_tensor(self, tensor, sharding: Sharding) -> FactorAxes:
        fa: FactorAxes = {}
        factors, sizes = self.rule.factors, self.sizes
        for d, fs in enumerate(tensor):
            axes = list(sharding.dim_axes(d))
            for f in fs:
                taken, n = [], 1  # n: the devices taken splits f over
                while axes and (  # a dim of one factor may split unevenly (padded shards)
                    len(fs) == 1 or factors[f].size % (n * sizes[axes[0]]) == 0
                ):
                    n *= sizes[axes[0]]
                    taken.append(axes.pop(0))
                fa.setdefault(f, tuple(taken))
                if n != factors[f].size:
                    break
        return fa

    def sanitize(self, fa: FactorAxes) -> FactorAxes:
        """fa cut to a split this equation can make (see the module text); worked out once
        per split asked about (a copy each time: callers build on it)."""
        key = tuple(fa.items())
        try:
            found = self._sanitized.get(key)
        except TypeError:  # axes given as lists
            key = tuple((f, tuple(axes)) for f, axes in key)
            found = self._sanitized.get(key)
        if found is None:
            found = self._sanitized[key] = self._sanitize(fa)
        return dict(found)

    def _sanitize(self, fa: FactorAxes) -> FactorAxes:
        factors = self.rule.factors
        fa = {f: tuple(a) for f, a in fa.items() if a and self.splittable(f, a)}
        for _ in range(len(factors) + 1) if self.compound else ():  # compound dims (each
            before = dict(fa)  # tensor's dims of more than one factor): contiguous blocks,
            for fs in self.compound:  # even splits only
                whole = True
                for f in fs:
                    n = self.size(fa.get(f, ()))
                    if not whole or factors[f].size % n:
                        fa.pop(f, None)
                    whole = whole and n == factors[f].size
            if fa == before:
                break
        return _each_axis_once(fa)

    def likely_operand(self, i: int) -> Sharding:
        """The sharding this equation will likely read operand i in: by propagation's split, or
        when that splits nothing (its operand and result disagreed: `rev` of rows split into
        columns split) by the split its propagated result implies, as XLA reshards the operand
        to the result."""
        fa = self.sanitize(self.settled)
        if not fa and len(self.propagated) == 1:
            fa = self.sanitize(self.from_tensor(self.rule.results[0], self.propagated[0]))
        return self.operand_sharding(fa, i)

    def reduction_axes(self, fa: FactorAxes) -> tuple[str, ...]:
        """Mesh axes holding partial results; a size-1 axis splits nothing, so none there.
        Worked out once per split (costing, masks and the local op all ask)."""
        if not self.summed_factors:  # an add, a transpose: no split leaves partial results
            return ()
        key = tuple(fa.items())
        found = self._reductions.get(key)
        if found is None:
            summed = self.summed_factors
            red = {a for f, axes in key if f in summed for a in axes if self.sizes[a] > 1}
            found = self._reductions[key] = tuple(a for a in self.mesh.axis_names if a in red)
        return found

    def operand_sharding(self, fa, i: int) -> Sharding:
        return self.tensor_shardings(fa)[0][i]

    def result_sharding(self, fa, j: int) -> Sharding:
        return self.tensor_shardings(fa)[1][j]

    def tensor_shardings(self, fa) -> tuple[tuple[Sharding, ...], tuple[Sharding, ...]]:
        """(every operand's, every result's) sharding under split fa, made once per split:
        costing asks for them many times, and every pass asks again (the memo shares this
        split)."""
        key = tuple(fa.items())
        found = self._shardings.get(key)
        if found is None:
            pending = self.reduction_axes(fa) if self.combine == "sum" else ()
            rule, made = self.rule, self.sharding
            ops = tuple([made(_tensor_axes(fa, t)) for t in rule.operands])
            results = tuple([made(_tensor_axes(fa, t), pending) for t in rule.results])
            found = self._shardings[key] = (ops, results)
        return found

    def sharding(self, spec: tuple, pending: tuple = ()) -> Sharding:
        """The sharding of a canonical spec (and pending sums), one object per layout made."""
        found = self.made.get((spec, pending))
        if found is None:
            found = self.made[spec, pending] = Sharding.of_axes(self.mesh, spec, pending)
        return found

    def cost(self, fa: FactorAxes, costs: Costs, above: float | None = None) -> float:
        """Wire bytes of split fa: halos exchanged, operands fetched, results handed on. With
        `above`, the bytes so far once the halos and the fetches so far exceed it (the caller
        asks only whether fa costs more: each further fetch or handoff adds bytes, never takes
        any away, so it is not planned)."""
        e = self.eqn
        total = (
            0.0
            if not self.halo_operands
            else self.halo_bytes(fa, functools.partial(costs.exchanged, self.eqn))
        )
        operands, results = self.tensor_shardings(fa)
        fetched = dict.fromkeys(  # in operand order; one read twice (concatenate([h, h])) once
            (v, target)
            for v, target in zip(e.inputs, operands, strict=True)
            if isinstance(v, Value)
        )
        for v, target in fetched:
            total += costs.fetch_cost(v, target)
            if above is not None and total > above:  # the other fetches need no plan
                return total
        past = None if above is None else lambda bytes_: total + bytes_ > above
        return total + self._handoff_bytes(fa, results, costs.handoff_cost, past)

    def handoff_bytes(self, fa: FactorAxes, handoff, past: Callable | None = None) -> float:
        """Bytes to combine partial results and hand each result on (`handoff(v, local,
        past)`). With `past` (bytes -> do they exceed the caller's budget?), the bytes so far
        once past() holds for them: the rest is not priced (a handoff so told may stop as
        soon as its own bytes, added to those before it, are past the budget)."""
        return self._handoff_bytes(fa, self.tensor_shardings(fa)[1], handoff, past)

    def _handoff_bytes(self, fa: FactorAxes, results: tuple, handoff, past) -> float:
        """handoff_bytes, given the results' shardings under fa."""
        total = 0.0
        red = self.reduction_axes(fa)
        if self.combine in RIGHT_AWAY and red:
            combined = combine_collectives(self.eqn, self.combine, red, self.sizes, results[0])
            total += sum(c.wire_bytes for c in combined)
        for v, local in zip(self.eqn.outputs, results, strict=True):
            if past is not None and past(total):
                return total
            if self.combine in RIGHT_AWAY:
                local = self.sharding(local.spec)  # combined right away
            total += handoff(v, local, past and functools.partial(past_after, past, total))
        return total

    def candidates(self, costs: Costs) -> list[FactorAxes]:
        """The candidate splits (the module text's list, none with idle axes sharing work)."""
        rule = self.rule
        found = [self.settled]
        for v, t in zip(self.eqn.inputs, rule.operands, strict=True):
            if isinstance(v, Value):
                for implied in (self.from_tensor(t, s) for s in costs.available(v)):
                    found += [implied, *self.rehomed(implied)]
        for s, t in zip(self.propagated, rule.results, strict=True):
            found.append(self.from_tensor(t, s))
        for v, t in zip(self.eqn.outputs if self.halo else (), rule.results, strict=False):
            found += [self.from_tensor(t, s) for s in costs.wanted(v)]  # gather before, not after
        if self.halo:  # or whole: concatenate([h, h]) gathers h once, not a halo per operand
            found.append({})
        unique: list[FactorAxes] = []
        for more in (lambda _: found, merged):
            for fa in map(self.sanitize, more(unique)):
                unique += [] if fa in unique else [fa]
        return unique

    def sharing_idle(self, bases: list[FactorAxes], weighed: list) -> list[FactorAxes]:
        """Each of `bases` with the mesh axes it leaves idle sharing its work
        (split_cost.spread), sanitized, each once and none of `weighed` (splits weighed)."""
        found: list[FactorAxes] = []
        for fa in map(self.sanitize, spread(self, bases)):
            found += [] if fa in found or fa in weighed else [fa]
        return found

    def rehomed(self, fa: FactorAxes) -> list[FactorAxes]:
        """fa with the axes this equation cannot split by (an update's rows, say) moved to
        each factor it can split and fa leaves whole (or splits over size-1 axes only): an
        all-to-all rather than a gather."""
        kept = self.sanitize(fa)
        used = {a for axes in kept.values() for a in axes}
        dropped = tuple(a for axes in fa.values() for a in axes if a not in used)
        if not dropped:
            return []
        moved = [(f, kept.get(f, ()) + dropped) for f in range(len(self.rule.factors))]
        return [
            {**kept, f: axes}
            for f, axes in moved
            if self.size(kept.get(f, ())) == 1 and self.splittable(f, axes)  # size-1: unsplit
        ]


def _each_axis_once(fa: FactorAxes) -> FactorAxes:
    """fa (each factor's axes a non-empty tuple, as _sanitize makes them) in factor order,
    each factor's axes cut before the first mesh axis a factor before it splits (every mesh
    axis splits one factor at most)."""
    axes = [a for f in fa for a in fa[f]]
    if len(set(axes)) == len(axes):  # most splits: no axis named twice, nothing cut
        return {f: fa[f] for f in sorted(fa)}
    return _cut_repeats(fa)


def _cut_repeats(fa: FactorAxes) -> FactorAxes:
    """_each_axis_once, factor by factor: each keeps its axes up to one an earlier took."""
    used, out = set(), {}
    for f in sorted(fa):
        keep = []
        for a in fa[f]:
            if a in used:
                break
            keep.append(a)
        used.update(keep)
        if keep:
            out[f] = tuple(keep)
    return out


def past_after(past: Callable, before: float, bytes_: float) -> bool:
    """past(before + bytes_): a move's own bytes against a budget `before` spent part of
    (partial(past_after, past, before) is the budget left to it)."""
    return past(before + bytes_)


def rules_of(eqn: Equation, propagated: FactorRule) -> list[FactorRule]:
    """The rules an equation may split by: its entry's variants (the first numbers factors
    as propagation's rule does), else propagation's rule."""
    variants = entry_for(eqn).variants
    return variants(eqn) if variants else [propagated]


def frozen(fa: FactorAxes) -> tuple:
    """A factor split as a dict key."""
    return tuple(sorted(fa.items()))


def choose(
    splits: list[EquationSplit],
    costs: Costs,
    also: tuple[FactorAxes, ...] = (),
    ranked: dict | None = None,
) -> tuple[EquationSplit, FactorAxes, bool]:
    """The best split of one equation under any of its rules (`splits`, propagation's first)
    by split_cost.rank; ties go to halos that do not cover a dim, then to propagation's split,
    and a free one that does no work twice, nor leaves idle an axis a reader slices, at once.
    Third: whether the winner is a split only `Costs.spread` proposes (without it, the choice
    would be another; otherwise the same, as the rest come first and win ties).
    `also`: more splits of the first rule to weigh (gather_or_reduce.py's two plans);
    `ranked`, when given, is filled with each first-rule split's rank, keyed by `frozen`."""
    q0 = splits[0]
    first = q0.sanitize(q0.settled)
    settled_cost = q0.cost(first, costs)
    free = settled_cost == 0 and not q0.covers(first) and not sliced_after(q0, first, costs)
    repeating = [q for q in splits if not repeats_nothing(q, costs)]
    if free and q0 not in repeating:  # done once whatever the operands promise: what they
        return q0, first, False  # promise is not worked out
    promise = _promise(splits, costs, repeating)
    if free and twice(q0, first, costs, promise) == 1:
        return q0, first, False
    candidates = {q: q.candidates(costs) for q in splits}
    found = [(q, fa, False) for q in splits for fa in candidates[q]]
    found += [(q0, fa, False) for fa in also if not any(q is q0 and fa == g for q, g, _ in found)]
    key = _keyer(q0, first, settled_cost, costs, promise, ranked)
    heads, prune = _heads(costs, promise), _pruning(splits, also, ranked)
    best, lowest = _lowest(found, key, heads, prune)
    if costs.spread:  # then splits with idle mesh axes sharing the work, weighed after
        shared = _shared(candidates, found, best)
        best, lowest = _lowest(shared, key, heads, prune, best, lowest)
    return best


def _promise(splits: list[EquationSplit], costs: Costs, repeating: list) -> set[str]:
    """promised_by_any, worked out only if a rule may repeat work (`repeating`: the splits
    for which split_cost.repeats_nothing fails): no other rule's rank reads what the operands
    promise (split_cost.twice_counter), so for none of them it is worked out."""
    return promised_by_any(splits, costs) if repeating else set()


def _pruning(splits: list[EquationSplit], also: tuple, ranked: dict | None) -> Callable | None:
    """(split, factor split) -> may _lowest pass it over without its exact key? Never for a
    split with halos (costing one notes which halos would not pay: EquationSplit.gathered).
    Where ranks are recorded (`ranked`), the splits of `also` are always ranked in full: the
    record reads their ranks and the winner's (a winner's key is exact: nothing beat it); so
    is every split of an equation of several rules (the record looks a winner of another
    rule up among the first rule's ranks). None: nothing is passed over."""
    if ranked is not None and len(splits) > 1:
        return None
    exact = also if ranked is not None else ()
    return functools.partial(_cuttable, splits[0], exact)


def _cuttable(q0: EquationSplit, exact: tuple, q: EquationSplit, fa: FactorAxes) -> bool:
    return not q.halo and not (q is q0 and fa in exact)


def _keyer(q0: EquationSplit, first, settled_cost: float, costs: Costs, promise, ranked):
    """choose's key of a (split, factor split, shared) candidate given its rank head and an
    `above` (see _lowest): rank, then whether it covers a dim with halos; the settled split's
    wire bytes are known already. A split whose costing stopped past `above` (the lowest
    key's wire bytes; heads tied) is keyed by its head and those bytes alone: they make it
    lose. Fills `ranked` (if given) with each first-rule rank worked out in full."""

    def key(qfs, head, above=None) -> tuple:
        q, fa, _ = qfs
        wire = settled_cost if q is q0 and fa == first else q.cost(fa, costs, above)
        if above is not None and wire > above:  # its head ties the lowest's: it loses there
            return (*head[0], wire)
        ranks = rank(q, fa, costs, wire, promise, head)
        if ranked is not None and q is q0:  # exact ranks
            ranked[frozen(fa)] = (*ranks[:-1], int(ranks[-1]))  # the bytes held read
        return (*ranks, q.covers(fa))

    return key


def _shared(candidates: dict, found: list, best) -> list:
    """(split, factor split, True) for the splits that idle mesh axes sharing the work of
    another make, those not weighed already (`found`): of every candidate of a dot or
    convolution (two FLOPs a point: nearly all of a model's work, and sharing may slice an
    operand before it moves, so a candidate that lost may win once shared), of the winner
    alone (`best`) for other ops, doing one FLOP a point at most."""
    out = []
    for q, fas in candidates.items():
        bases = fas if q.entry.flops > 1 else [best[1]] if best[0] is q else []
        weighed = [fa for p, fa, _ in found if p is q]
        out += [(q, fa, True) for fa in q.sharing_idle(bases, weighed)]
    return out


def _heads(costs: Costs, promise: set[str]) -> Callable:
    """(split, factor split) -> split_cost.rank_head, each rule's set-up (head_ranker) made
    once: its candidates share it. The bytes held are worked out only if a tie reads them
    (split_cost.HeldBytes)."""
    made: dict[EquationSplit, Callable] = {}

    def head(q: EquationSplit, fa: FactorAxes) -> tuple:
        if q not in made:
            made[q] = head_ranker(q, costs, promise, lazy=True)
        return made[q](fa)

    return head


def _lowest(found: list, key, head, prune: Callable | None, best=None, lowest=None) -> tuple:
    """(item, key) of min(found, key=key), or (`best`, its key `lowest`) when nothing found
    is lower (a tie keeps the one weighed first); but a candidate whose rank_head is above the
    lowest key's first entries so far is passed over without working out its key (its wire
    bytes): it cannot be the lowest; one whose head ties them has its wire bytes worked out
    only as far as needed to exceed the lowest key's (`key(item, head, above)`:
    EquationSplit.cost). Only for a split `prune` allows (_pruning)."""
    for item in found:
        q, fa, _ = item
        first = head(q, fa)
        cut = prune is not None and lowest is not None and prune(q, fa)
        if cut and first[0] > lowest[:2]:
            continue
        k = key(item, first, lowest[2] if cut and first[0] == lowest[:2] else None)
        if lowest is None or k < lowest:
            best, lowest = item, k
    return best, lowest
