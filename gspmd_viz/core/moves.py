"""The moves a resharding plan is searched over: from one spec state, every single step
(slice, all-reduce, reduce-scatter, all-to-all, all-gather, collective-permute) and its cost.
reshard.py finds the cheapest path through them.  # XLA: ReshardNoCache's per-case helpers
"""

import dataclasses
import itertools
import math
from typing import NamedTuple

import numpy as np

from gspmd_viz.core.collective import Collective, wire_bytes
from gspmd_viz.core.sharding import Sharding

Spec = tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Step:
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


def _ceil(n: int, k: int) -> int:
    return -(-n // k)


def _nests(n: int, outer: int, inner: int) -> bool:
    """Do the shards of a dim of size n split `outer` ways nest into `outer * inner` ways?"""
    return outer == 1 or _ceil(n, outer) == inner * _ceil(n, outer * inner)


class _Move(NamedTuple):
    kind: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    new: tuple  # the (spec, unreduced) state it leads to
    operand: tuple[int, ...] | None  # per-device operand shape (None: slice)


class Mover:
    """Moves from one (spec, unreduced) state to the next, with their bytes. Plain tuples
    while searching; Steps (with Shardings and Collectives) only for the chosen path."""

    def __init__(self, mesh, shape, dtype, source: str):
        self.mesh, self.shape, self.dtype, self.source = mesh, tuple(shape), dtype, source
        self.sizes = mesh.shape

    def sharding(self, state) -> Sharding:
        return Sharding(self.mesh, state[0], state[1])

    def size(self, axes) -> int:
        return math.prod(self.sizes[a] for a in axes)

    def local(self, spec) -> list[int]:
        return [_ceil(n, self.size(axes)) for n, axes in zip(self.shape, spec, strict=True)]

    def nests(self, dim: int, prefix, extra) -> bool:
        return _nests(self.shape[dim], self.size(prefix), self.size(extra))

    def cost(self, move: _Move) -> float:
        if move.operand is None:
            return 0.0
        nbytes = self.dtype.itemsize * math.prod(move.operand)
        group = 2 if move.kind == "collective-permute" else self.size(move.axes)
        return wire_bytes(move.kind, nbytes, group)

    def step(self, state, move: _Move) -> Step:
        collective = None
        if move.operand is not None:
            group = 2 if move.kind == "collective-permute" else self.size(move.axes)
            collective = Collective(
                move.kind, move.axes, move.operand, self.dtype, group, self.source, move.dims
            )
        before, after = self.sharding(state), self.sharding(move.new)
        return Step(move.kind, move.axes, move.dims, before, after, collective)

    def padded(self, spec, new, dim, axes) -> tuple[int, ...]:
        """The operand of a collective that splits `dim` over `axes`: padded to divide."""
        operand = self.local(spec)
        operand[dim] = self.size(axes) * self.local(new)[dim]
        return tuple(operand)

    # --- one generator per kind of move ---------------------------------------------------
    def slices(self, state, dst):
        spec, unreduced = state
        used = {a for axes in spec for a in axes} | unreduced
        for d, extra in _growth(spec, dst):
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if used & set(axes) or not self.nests(d, spec[d], axes):
                    break
                new = (_set(spec, d, spec[d] + axes), unreduced)
                yield _Move("slice", axes, (d,), new, None)

    def reduce_scatters(self, state, dst):
        spec, unreduced = state
        todo = unreduced - dst.unreduced
        for d, extra in _growth(spec, dst):
            for k in range(1, len(extra) + 1):
                axes = extra[:k]
                if not set(axes) <= todo or not self.nests(d, spec[d], axes):
                    break
                new_spec = _set(spec, d, spec[d] + axes)
                operand = self.padded(spec, new_spec, d, axes)
                yield _Move(
                    "reduce-scatter", axes, (d,), (new_spec, unreduced - set(axes)), operand
                )

    def all_reduces(self, state, dst):
        spec, unreduced = state
        todo = [a for a in self.mesh.axis_names if a in unreduced - dst.unreduced]
        for k in range(1, len(todo) + 1):
            for axes in itertools.combinations(todo, k):
                new = (spec, unreduced - set(axes))
                yield _Move("all-reduce", axes, (), new, tuple(self.local(spec)))

    def all_gathers(self, state, dst):
        """Un-split a dim's minor axes; where most of what a gather would bring is padding,
        sum zero-padded blocks instead (an all-reduce of the gathered size, as XLA does)."""
        spec, unreduced = state
        for d, cur in enumerate(spec):
            for k in range(1, len(cur) + 1):
                keep, axes = cur[: len(cur) - k], cur[len(cur) - k :]
                if self.nests(d, keep, axes):
                    new = (_set(spec, d, keep), unreduced)
                    yield _Move("all-gather", axes, (d,), new, tuple(self.local(spec)))
                    gathered = tuple(self.local(new[0]))
                    if 2 * gathered[d] < self.size(axes) * self.local(spec)[d]:
                        yield _Move("all-reduce", axes, (d,), new, gathered)

    def all_to_alls(self, state, dst):
        spec, unreduced = state
        growth = dict(_growth(spec, dst))
        for d, cur in enumerate(spec):
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

    def permutes(self, state, dst):
        """Straight to dst when every dst shard lies inside one src shard: the holder slices it
        out and sends it (same tiling in another device order has nothing to slice). Or, on the
        way, reorder each dim's axes so those dst keeps there come first: then only the minor
        axes need gathering (# XLA: reshard by collective-permute before an all-gather)."""
        spec, unreduced = state
        if unreduced or dst.unreduced:
            return
        goal = state_key(dst, len(self.shape))[0]
        for target in dict.fromkeys((goal, _dst_major(spec, goal), self.relabel(spec, goal))):
            if target != spec and self.inside(spec, target):
                yield from self._permute(spec, target)

    def _permute(self, spec, target):
        """The collective-permute from spec to target (`inside`). Where the shards nest, every
        src shard has as many holders as askers and each device sends at most once. Where an
        uneven split does not nest (4 rows over 8 devices to 4 over 4), a holder may have
        several askers: it sends one piece a round (`permute_rounds`), the operand [rounds,
        *local]. Where every device holds its new shard already: a free local slice, unless
        `slices` get there (a dim's axes growing at its end)."""
        new = (target, frozenset())
        rounds = round_count(self.sharding((spec, frozenset())), self.sharding(new), self.shape)
        if not rounds:
            grows = all(w[: len(h)] == h for h, w in zip(spec, target, strict=True))
            yield from [] if grows else [_Move("slice", (), (), new, None)]
            return
        roles = _roles(spec), _roles(target)
        moved = {a for a in self.mesh.axis_names if roles[0].get(a) != roles[1].get(a)}
        for d, (have, want) in enumerate(zip(spec, target, strict=True)):
            if not self.nested_dim(d, have, want):  # blocks move along all of its axes
                moved |= set(have) | set(want)
        local = tuple(self.local(target))
        operand = (rounds, *local) if rounds > 1 else local
        axes = tuple(a for a in self.mesh.axis_names if a in moved)
        yield _Move("collective-permute", axes, (), new, operand)

    def relabel(self, spec, goal):
        """spec with an axis swapped for the one goal has at the same place in the same dim,
        when that one is free and as large: a permute to it, then only gathers remain
        ((z, y) -> x on a 2x2x2 mesh: permute to (x, y), gather y; # XLA does the same)."""
        used, out = {a for axes in spec for a in axes}, []
        for have, want in zip(spec, goal, strict=True):
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
        return t % s == 0 and _ceil(n, s) == t // s * _ceil(n, t)

    def inside(self, spec, target) -> bool:
        """Does every shard of `target` (past its padding) lie inside one shard of `spec`?"""
        return all(
            self.nested_dim(d, have, want) or _within(n, self.size(have), self.size(want))
            for d, (n, have, want) in enumerate(zip(self.shape, spec, target, strict=True))
        )

    def moves(self, state, dst):
        for gen in (
            self.slices,
            self.reduce_scatters,
            self.all_reduces,
            self.all_to_alls,
            self.all_gathers,
            self.permutes,
        ):
            yield from gen(state, dst)


def _within(n: int, have: int, want: int) -> bool:
    """Does every shard of a dim of n split `want` ways that holds data lie, with its padding,
    inside the buffer of one shard of it split `have` ways?"""
    held, wanted = _ceil(n, have), _ceil(n, want)
    return all(j * wanted % held + wanted <= held for j in range(want) if j * wanted < n)


def permute_rounds(src: Sharding, dst: Sharding, shape) -> list[list[tuple[int, int, tuple]]]:
    """Rounds of (source, target, offsets): every device whose dst shard holds data takes it
    from one device whose src shard contains it, sliced at `offsets` in that one's buffer,
    and each device sends at most once a round. A device holding its own keeps it (source =
    target, in round 0); the others are spread over the holders of their src shard, those
    not keeping their own first. A shard of padding only gets nothing (it is never read)."""
    ndim, mesh = len(shape), src.mesh
    held, wanted = src.shard_shape(shape), dst.shard_shape(shape)
    holders: dict[tuple, list[int]] = {}
    for dev in range(mesh.size):
        holders.setdefault(tuple(src.shard_index(dev, d) for d in range(ndim)), []).append(dev)
    rounds: list[list[tuple[int, int, tuple]]] = [[]]
    away, load = [], {}
    for dev in range(mesh.size):
        start = [dst.shard_index(dev, d) * wanted[d] for d in range(ndim)]
        if all(i < n for i, n in zip(start, shape, strict=True)):
            chunk = tuple(i // k for i, k in zip(start, held, strict=True))
            offsets = tuple(i % k for i, k in zip(start, held, strict=True))
            if dev in holders[chunk]:
                rounds[0].append((dev, dev, offsets))
                load[dev] = 1
            else:
                away.append((dev, chunk, offsets))
    for dev, chunk, offsets in away:
        source = min(holders[chunk], key=lambda h: (load.get(h, 0), h))
        r = load.get(source, 0)
        load[source] = r + 1
        rounds.extend([] for _ in range(r + 1 - len(rounds)))
        rounds[r].append((source, dev, offsets))
    return rounds


def moving(rounds) -> list[list[tuple[int, int, tuple]]]:
    """The rounds of `permute_rounds` in which some piece leaves its device."""
    return [sends for sends in rounds if any(s != t for s, t, _ in sends)]


def round_count(src: Sharding, dst: Sharding, shape) -> int:
    """len(moving(permute_rounds(src, dst, shape))), counted without pairing devices (a
    64x64 mesh has 4096): per src shard c, H holders, K of them keeping their own, A other
    askers. Round 0 has a piece leave where some A > 0 meets a holder not keeping its own;
    the most loaded holders of c then send in rounds up to ceil((A + K) / H) - 1."""
    held, wanted = src.shard_shape(shape), dst.shard_shape(shape)
    hold = _block_index(src, len(shape))
    start = _block_index(dst, len(shape)) * np.array(wanted)[:, None]
    valid = np.all(start < np.array(shape)[:, None], axis=0)
    shards = [src.dim_shards(d) for d in range(len(shape))]
    keys = np.ravel_multi_index(tuple(hold), shards)
    want = np.minimum(start // np.array(held)[:, None], np.array(shards)[:, None] - 1)
    asked = np.ravel_multi_index(tuple(want), shards)  # (clipped where only padding is wanted)
    total = math.prod(shards)
    holders = np.bincount(keys, minlength=total)
    askers = np.bincount(asked[valid], minlength=total)
    keeping = np.bincount(asked[valid & (asked == keys)], minlength=total)
    away = askers - keeping
    busy = away > 0
    if not busy.any():
        return 0
    first = bool(np.any(holders[busy] > keeping[busy]))
    last = int(np.max(-(-(away[busy] + keeping[busy]) // holders[busy])))
    return int(first) + max(0, last - 1)


def _block_index(sharding: Sharding, ndim: int) -> np.ndarray:
    """[ndim, devices]: the shard of each tensor dim every device holds (shard_index)."""
    mesh = sharding.mesh
    grid = np.indices(mesh.sizes).reshape(len(mesh.sizes), -1)  # [axes, devices]
    coords = dict(zip(mesh.axis_names, grid, strict=True))
    index = np.zeros((ndim, mesh.size), int)
    for d in range(ndim):
        for axis in sharding.dim_axes(d):
            index[d] = index[d] * mesh.axis_size(axis) + coords[axis]
    return index


def _roles(spec) -> dict[str, tuple[int, int]]:
    """axis -> (tensor dim, position within the dim's axes)."""
    return {a: (d, i) for d, axes in enumerate(spec) for i, a in enumerate(axes)}


def _dst_major(spec, goal):
    """spec with each dim's axes reordered: the longest prefix of goal's axes there comes first."""
    out = []
    for have, want in zip(spec, goal, strict=True):
        lead = []
        for a in want:
            if a not in have:
                break
            lead.append(a)
        out.append(tuple(lead) + tuple(a for a in have if a not in lead))
    return tuple(out)


def _set(spec, dim, axes):
    return spec[:dim] + (tuple(axes),) + spec[dim + 1 :]


def _growth(spec, dst: Sharding):
    """(dim, axes dst wants after the current ones) for dims whose axes are a prefix of dst's."""
    for d, cur in enumerate(spec):
        want = dst.dim_axes(d)
        if want[: len(cur)] == cur and len(want) > len(cur):
            yield d, want[len(cur) :]


def state_key(sharding: Sharding, ndim: int):
    """(spec, unreduced) without size-1 mesh axes: they split nothing and sum nothing, so
    shardings that differ only there hold the same data on every device."""
    size = sharding.mesh.shape
    spec = tuple(tuple(a for a in sharding.dim_axes(d) if size[a] > 1) for d in range(ndim))
    return spec, frozenset(a for a in sharding.unreduced if size[a] > 1)
