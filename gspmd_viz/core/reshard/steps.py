"""The moves a resharding plan is searched over: from one spec state, every single step
(slice, all-reduce, reduce-scatter, all-to-all, all-gather, collective-permute) and its cost.
reshard/planner.py finds the cheapest path through them.  # XLA: ReshardNoCache's per-case helpers
"""

import dataclasses
import itertools
import math
from typing import NamedTuple

from gspmd_viz.core.reshard.permute_rounds import round_count, within
from gspmd_viz.core.sharding.collective import Collective, wire_bytes
from gspmd_viz.core.sharding.sharding import Sharding, ceil_div

Spec = tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class ReshardStep:
    """One resharding step; `dims` = (dim,) or, for all-to-all, (split dim, concat dim)."""

    kind: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    before: Sharding
    after: Sharding
    collective: Collective | None = None

    @property
    def wire_bytes(self) -> float:
        return self.collective.wire_bytes if self.collective else 0.0


def _nests(n: int, outer: int, inner: int) -> bool:
    """Do the shards of a dim of size n split `outer` ways nest into `outer * inner` ways?"""
    return outer == 1 or ceil_div(n, outer) == inner * ceil_div(n, outer * inner)


class _Move(NamedTuple):
    kind: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    new: tuple  # the (spec, unreduced) state it leads to
    operand: tuple[int, ...] | None  # per-device operand shape (None: slice)


class Mover:
    """Moves from one (spec, unreduced) state to the next, with their bytes. Plain tuples
    while searching; Steps (with Shardings and Collectives) only for the chosen path."""

    def __init__(self, mesh, shape, dtype, source: str, goal):
        self.mesh, self.shape, self.dtype, self.source = mesh, tuple(shape), dtype, source
        self.sizes = mesh.shape
        self.goal = goal  # the (spec, unreduced) state the search heads for (`state_key`)
        self.dst_axes, self.dst_unreduced = goal
        # memos for this one plan: the search asks the same sizes, tiles and layouts again
        # and again for every state it reaches (keyed by axes / spec / state tuples)
        self._sizes: dict = {}
        self._locals: dict = {}
        self._shardings: dict = {}
        self._growths: dict = {}
        self._devices = None  # _asked's, once asked
        self._dst_local = None  # missing's goal shard shape, once asked

    def sharding(self, state) -> Sharding:
        if state not in self._shardings:
            self._shardings[state] = Sharding.of_axes(self.mesh, state[0], state[1])
        return self._shardings[state]

    def size(self, axes) -> int:
        size = self._sizes.get(axes)
        if size is None:
            size = self._sizes[axes] = math.prod([self.sizes[a] for a in axes])
        return size

    def local(self, spec) -> tuple[int, ...]:
        local = self._locals.get(spec)
        if local is None:
            local = self._locals[spec] = _local(self.shape, spec, self.sizes)
        return local

    def growth(self, spec) -> list[tuple[int, tuple[str, ...]]]:
        growth = self._growths.get(spec)
        if growth is None:
            growth = self._growths[spec] = _growth(spec, self.dst_axes)
        return growth

    def nests(self, dim: int, prefix, extra) -> bool:
        return _nests(self.shape[dim], self.size(prefix), self.size(extra))

    def cost(self, move: _Move) -> float:
        if move.operand is None:
            return 0.0
        nbytes = self.dtype.itemsize * math.prod(move.operand)
        group = 2 if move.kind == "collective-permute" else self.size(move.axes)
        return wire_bytes(move.kind, nbytes, group)

    def step(self, state, move: _Move) -> ReshardStep:
        collective = None
        if move.operand is not None:
            group = 2 if move.kind == "collective-permute" else self.size(move.axes)
            collective = Collective(
                move.kind, move.axes, move.operand, self.dtype, group, self.source, move.dims
            )
        before, after = self.sharding(state), self.sharding(move.new)
        return ReshardStep(move.kind, move.axes, move.dims, before, after, collective)

    def steps(self, way) -> list[ReshardStep]:
        """The steps of a way the search found: its (state, move) pairs."""
        return [self.step(before, move) for before, move in way]

    def padded(self, spec, new, dim, axes) -> tuple[int, ...]:
        """The operand of a collective that splits `dim` over `axes`: padded to divide."""
        operand = list(self.local(spec))
        operand[dim] = self.size(axes) * ceil_div(self.shape[dim], self.size(new[dim]))
        return tuple(operand)

    # --- one generator per kind of move ---------------------------------------------------
    def slices(self, state):
        spec, unreduced = state
        growth = self.growth(spec)
        used = {a for axes in spec for a in axes} | unreduced if growth else set()
        for d, extra in growth:
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if used & set(axes) or not self.nests(d, spec[d], axes):
                    break
                new = (_set(spec, d, spec[d] + axes), unreduced)
                yield _Move("slice", axes, (d,), new, None)

    def reduce_scatters(self, state):
        spec, unreduced = state
        todo = unreduced - self.dst_unreduced
        for d, extra in self.growth(spec) if todo else ():
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if not set(axes) <= todo or not self.nests(d, spec[d], axes):
                    break
                new_spec = _set(spec, d, spec[d] + axes)
                operand = self.padded(spec, new_spec, d, axes)
                yield _Move(
                    "reduce-scatter", axes, (d,), (new_spec, unreduced - set(axes)), operand
                )

    def all_reduces(self, state):
        spec, unreduced = state
        pending = unreduced - self.dst_unreduced
        todo = [a for a in self.mesh.axis_names if a in pending] if pending else []
        for k in range(1, len(todo) + 1):
            for axes in itertools.combinations(todo, k):
                new = (spec, unreduced - set(axes))
                yield _Move("all-reduce", axes, (), new, self.local(spec))

    def all_gathers(self, state):
        """Un-split a dim's minor axes; where most of what a gather would bring is padding,
        sum zero-padded blocks instead (an all-reduce of the gathered size, as XLA does)."""
        spec, unreduced = state
        local, size = self.local(spec), self.size
        for d, cur in enumerate(spec):
            for k in range(1, len(cur) + 1):
                keep, axes = cur[: len(cur) - k], cur[len(cur) - k :]
                outer, inner = size(keep), size(axes)
                if _nests(self.shape[d], outer, inner):
                    new = (_set(spec, d, keep), unreduced)
                    yield _Move("all-gather", axes, (d,), new, local)
                    if 2 * ceil_div(self.shape[d], outer) < inner * local[d]:  # gathered size
                        yield _Move("all-reduce", axes, (d,), new, self.local(new[0]))

    def all_to_alls(self, state):
        spec, unreduced = state
        growth = dict(self.growth(spec))
        for d, cur in enumerate(spec) if growth else ():
            for k in range(1, len(cur) + 1):
                keep, axes = cur[: len(cur) - k], cur[len(cur) - k :]
                for e, extra in growth.items():
                    # the axes dst adds to dim e, in any order: a permute then puts blocks in place
                    if e == d or sorted(extra[:k]) != sorted(axes):
                        continue
                    if not (self.nests(d, keep, axes) and self.nests(e, spec[e], axes)):
                        continue
                    new_spec = _set(_set(spec, d, keep), e, spec[e] + axes)
                    operand = self.padded(spec, new_spec, e, axes)
                    yield _Move("all-to-all", axes, (e, d), (new_spec, unreduced), operand)

    def permutes(self, state, reached=None):
        """Straight to dst when every dst shard lies inside one src shard: the holder slices it
        out and sends it (same tiling in another device order has nothing to slice). Or, on the
        way, reorder each dim's axes so those dst keeps there come first, or put dst's axes
        first and the src axes it drops after them (`_goal_major`): then only the minor axes
        need gathering (# XLA: reshard by collective-permute before an all-gather). A target
        state `reached(state)` says no move can reach more cheaply is passed over unpriced
        (its rounds would need devices paired: `rounds`)."""
        spec, unreduced = state
        if unreduced or self.dst_unreduced:
            return
        goal = self.goal[0]
        targets = (goal, _dst_major(spec, goal), _goal_major(spec, goal))
        targets += (self.relabel(spec, goal), self.on_data(spec))
        for target in dict.fromkeys(targets):
            if target == spec or (reached is not None and reached((target, frozenset()))):
                continue
            # a target every device holds already yields nothing (`_permute`): skip it early;
            # `inside` first: most targets fail it, at once where a shard of theirs is larger
            if self.inside(spec, target) and not self.holds_own(spec, target):
                yield from self._permute(spec, target)

    def _permute(self, spec, target):
        """The collective-permute from spec to target (`inside`). Where the shards nest, every
        src shard has as many holders as askers and each device sends at most once. Where an
        uneven split does not nest (4 rows over 8 devices to 4 over 4), a holder may have
        several askers: it sends one piece a round (`permute_rounds`), the operand [rounds,
        *local]. Where every device holds its new shard already: a free local slice, unless
        `slices` get there (a dim's axes growing at its end)."""
        new = (target, frozenset())
        rounds = self.rounds(spec, target)
        if not rounds:
            grows = all(w[: len(h)] == h for h, w in zip(spec, target, strict=True))
            yield from [] if grows else [_Move("slice", (), (), new, None)]
            return
        roles = _roles(spec), _roles(target)
        moved = {a for a in self.mesh.axis_names if roles[0].get(a) != roles[1].get(a)}
        for d, (have, want) in enumerate(zip(spec, target, strict=True)):
            if not self.nested_dim(d, have, want):  # blocks move along all of its axes
                moved |= set(have) | set(want)
        local = self.local(target)
        operand = (rounds, *local) if rounds > 1 else local
        axes = tuple(a for a in self.mesh.axis_names if a in moved)
        yield _Move("collective-permute", axes, (), new, operand)

    def rounds(self, spec, target) -> int:
        """round_count from spec to target. Where every dim nests (`nested_dim`), each src
        shard has as many holders as devices asking for pieces of it: one round if any
        device sends, known without pairing devices where one that `sends` asks does."""
        dims = enumerate(zip(spec, target, strict=True))
        if all(self.nested_dim(d, h, w) for d, (h, w) in dims) and self.sends(spec, target):
            return 1
        if self.keeps_own(spec, target):
            return 0
        old, new = self.sharding((spec, frozenset())), self.sharding((target, frozenset()))
        return round_count(old, new, self.shape)

    def sends(self, spec, target) -> bool:
        """Does some device find its data in target outside its own shard in spec? Asked of
        the devices one step from device 0 along one axis: a yes is sure, a no says nothing."""
        axes = [a for a in self.mesh.axis_names if self.sizes[a] > 1]
        return any(self._sends(spec, target, axis) for axis in axes)

    def _sends(self, spec, target, axis) -> bool:
        """`sends` for the device at 1 along `axis` (permute_rounds._asks for it alone): its
        target shard holds data, and it lies in another shard of spec than its own."""
        away = False
        blocks = zip(self.shape, spec, target, self.local(spec), self.local(target), strict=True)
        for n, have, want, held, size in blocks:
            start = _unit_index(want, axis, self.sizes) * size
            if start >= n:  # its target shard holds padding only: it asks for nothing
                return False
            asked = min(start // max(held, 1), self.size(have) - 1)
            away = away or asked != _unit_index(have, axis, self.sizes)
        return away

    def on_data(self, spec):
        """spec with each dim's major axes dropped while the devices past the first along them
        hold padding only (4 rows over (x, y) on 2x4: the devices at x = 1 hold none): the
        same blocks over fewer axes, the holders sending them on (a permute), where gathering
        the dim would bring every block of padding too."""
        out = []
        for n, axes, block in zip(self.shape, spec, self.local(spec), strict=True):
            if not axes:
                out.append(axes)
                continue
            k = 0
            while k < len(axes) and n <= block * self.size(axes[k + 1 :]):
                k += 1
            out.append(axes[k:] if k else axes)
        return tuple(out)

    def relabel(self, spec, goal):
        """spec with an axis swapped for the one goal has at the same place in the same dim,
        when that one is free and as large: a permute to it, then only gathers remain
        ((z, y) -> x on a 2x2x2 mesh: permute to (x, y), gather y; # XLA does the same)."""
        used, out = {a for axes in spec for a in axes}, []
        for have, want in zip(spec, goal, strict=True):
            if not (have and want):
                out.append(have)
                continue
            have = list(have)
            for i, (a, b) in enumerate(zip(have, want, strict=False)):
                if a != b and b not in used and self.sizes[a] == self.sizes[b]:
                    have[i] = b
                    used.add(b)
            out.append(tuple(have))
        return tuple(out)

    def nested_dim(self, dim: int, have, want) -> bool:
        """Does dim split `want` ways divide every shard of it split `have` ways into the same
        whole number of shards (none straddling a shard's end)?"""
        n, s, t = self.shape[dim], self.size(have), self.size(want)
        return t % s == 0 and ceil_div(n, s) == t // s * ceil_div(n, t)

    def holds_own(self, spec, target) -> bool:
        """Does every device's new shard lie inside its own old one, known without counting
        devices (`round_count` would say 0)? Yes where every dim's axes grow at its end and
        nest: along a dim split s ways then t, the device at (i, j) (old index i, index j over
        the added axes) starts its new block at i * ceil(n/s) + j * ceil(n/t), and
        ceil(n/s) == t/s * ceil(n/t) keeps it inside."""
        return all(
            w[: len(h)] == h and self.nested_dim(d, h, w)
            for d, (h, w) in enumerate(zip(spec, target, strict=True))
        )

    def keeps_own(self, spec, target) -> bool:
        """round_count would say 0, known without counting devices: each dim's axes grow at
        its end and nest (`holds_own`), or grow at its start by axes that only add shards of
        padding: target's blocks as large as spec's (ceil(n/t) == ceil(n/s)), so a device at
        index q > 0 over the added axes starts at or past q * s * ceil(n/s) >= n and asks for
        nothing, and one at q = 0 wants the very block it holds."""
        for d, (have, want) in enumerate(zip(spec, target, strict=True)):
            if want[: len(have)] == have and self.nested_dim(d, have, want):
                continue
            n, k = self.shape[d], len(want) - len(have)
            if not (k > 0 and want[k:] == have):
                return False
            if ceil_div(n, self.size(want)) != ceil_div(n, self.size(have)):
                return False
        return True

    def inside(self, spec, target) -> bool:
        """Does every shard of `target` (past its padding) lie inside one shard of `spec`?
        (Not where one is larger.)"""
        if any(w > h for w, h in zip(self.local(target), self.local(spec), strict=True)):
            return False
        return all(
            self.nested_dim(d, have, want) or within(n, self.size(have), self.size(want))
            for d, (n, have, want) in enumerate(zip(self.shape, spec, target, strict=True))
        )

    def floor(self, start) -> tuple:
        """A lower bound on the (wire bytes, collectives, steps) of every plan from start (not
        the goal): the most some device must receive (`must_receive`)."""
        least = max([0.0, *self.must_receive(start)])
        return (least, int(least > 0), 1)

    def at_floor_from(self, state, spent, cost) -> bool:
        """Does no way on from state (not the goal; `spent` to reach it) cost less than
        `cost`? Each costs at least `spent`, a step, and what some device must receive
        (`must_receive`): in a collective where that is more than nothing. The devices are
        asked one by one until that is known (the bound only grows)."""
        if cost <= (spent[0], spent[1], spent[2] + 1):
            return True
        most, itemsize = 0.0, self.dtype.itemsize
        for axis in self._asked(state):  # must_receive's devices, one by one
            most = max(most, float(itemsize * self.missing(state[0], axis)))
            if cost <= (spent[0] + most, spent[1] + (most > 0), spent[2] + 1):
                return True
        return False

    def must_receive(self, state):
        """Bytes that devices of `_asked` must each receive on every way from state to the
        goal, device by device: the data of its goal shard it does not hold (`missing`). No
        step sends a device less than it receives, so each bounds a way's wire bytes. Asked
        only where no sums are pending and every cost is exact (`_exact`): a tie could
        otherwise round either way."""
        itemsize = self.dtype.itemsize
        return (float(itemsize * self.missing(state[0], a)) for a in self._asked(state))

    def _asked(self, state) -> list:
        """The devices `must_receive` asks (`missing`): none where sums are pending or costs
        round."""
        if state[1]:
            return []
        if self._devices is None:  # the same for every state without pending sums
            self._devices = [None, *self.mesh.split_axes] if self._exact() else []
        return self._devices

    def _exact(self) -> bool:
        """Are all costs exact floats? With groups of 2^k devices, each is a whole multiple of
        2^-k bytes, and these are far below 2^53 of them."""
        mesh = self.mesh
        return (
            mesh.powers_of_two
            and self.dtype.itemsize * math.prod(self.shape) * mesh.size**2 < 2**40
        )

    def missing(self, spec, axis) -> int:
        """Elements of its goal shard that the device at 1 along `axis` and 0 along the
        others (device 0 for None) does not hold in spec (padding holds nothing)."""
        wanted = kept = 1
        if self._dst_local is None:
            self._dst_local = self.local(self.dst_axes)
        blocks = zip(
            self.shape, spec, self.dst_axes, self.local(spec), self._dst_local, strict=True
        )
        for n, have, want, held, size in blocks:
            # (_unit_index is 0 where axis is not in the dim's axes, None never is)
            start = _unit_index(want, axis, self.sizes) * size if axis in want else 0
            end = n if start + size > n else start + size
            if start >= end:
                return 0
            wanted *= end - start
            if have == want:  # the same block: all of it held
                kept *= end - start
                continue
            held_start = _unit_index(have, axis, self.sizes) * held if axis in have else 0
            overlap = min(end, held_start + held) - max(start, held_start)
            kept *= overlap if overlap > 0 else 0
        return wanted - kept

    def moves(self, state, reached=None):
        """Every move from state, kind by kind in this order (of equal-cost ways the search
        keeps the first); each kind's moves are made only when the ones before are used up.
        `reached(new)`: is new reached already at a cost no move from state goes below? Then
        a permute to it is not made (the search would not keep it)."""
        grows, pending = self.growth(state[0]), state[1]  # kinds that yield nothing skipped
        kinds = [self.slices(state)] if grows else []
        kinds += [self.reduce_scatters(state)] if grows and pending else []
        kinds += [self.all_reduces(state)] if pending else []
        kinds += [self.all_to_alls(state)] if grows else []
        kinds += [self.all_gathers(state), self.permutes(state, reached)]
        return itertools.chain.from_iterable(kinds)


def _roles(spec) -> dict[str, tuple[int, int]]:
    """axis -> (tensor dim, position within the dim's axes)."""
    return {a: (d, i) for d, axes in enumerate(spec) for i, a in enumerate(axes)}


def _unit_index(axes, axis, sizes) -> int:
    """The shard, over a dim split by `axes`, of the device at 1 along `axis` and 0 along
    the others: the product of the sizes of the axes after it (0 where it is not there)."""
    if axis is None or axis not in axes:
        return 0
    return math.prod(sizes[a] for a in axes[axes.index(axis) + 1 :])


def _dst_major(spec, goal):
    """spec with each dim's axes reordered: the longest prefix of goal's axes there comes first."""
    out = []
    for have, want in zip(spec, goal, strict=True):
        k = 0
        while k < len(want) and want[k] in have:
            k += 1
        lead = want[:k]
        out.append(have if have[:k] == lead else lead + tuple(a for a in have if a not in lead))
    return tuple(out)


def _goal_major(spec, goal):
    """goal with each dim's other src axes after its own, minor: a permute to it, then only
    those are gathered ([64@y] -> [64@x] on 2x4: permute to [64@(x, y)], 1 KiB, gather y,
    3 KiB, not gather y then slice, 6 KiB; # XLA does the same)."""
    kept = {a for axes in goal for a in axes}
    return tuple(
        want + tuple(a for a in have if a not in kept)
        for have, want in zip(spec, goal, strict=True)
    )


def _local(shape, spec, sizes) -> tuple[int, ...]:
    """The padded shard shape of `shape` split by `spec` (ceil division per dim)."""
    local = []
    for n, axes in zip(shape, spec, strict=True):
        shards = 1
        for a in axes:
            shards *= sizes[a]
        local.append(-(-n // shards))
    return tuple(local)


def _set(spec, dim, axes):
    return spec[:dim] + (tuple(axes),) + spec[dim + 1 :]


def _growth(spec, dst_axes) -> list[tuple[int, tuple[str, ...]]]:
    """(dim, axes dst wants after the current ones) for dims whose axes are a prefix of dst's."""
    return [
        (d, want[len(cur) :])
        for d, (cur, want) in enumerate(zip(spec, dst_axes, strict=True))
        if len(want) > len(cur) and want[: len(cur)] == cur
    ]


def state_key(sharding: Sharding, ndim: int):
    """(spec, unreduced) without size-1 mesh axes: they split nothing and sum nothing, so
    shardings that differ only there hold the same data on every device (Sharding.identity,
    its trailing replicated dims written out)."""
    _, spec, unreduced = sharding.identity
    return spec + ((),) * (ndim - len(spec)), unreduced
