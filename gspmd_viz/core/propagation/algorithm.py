"""`gv.propagate`: infer every value's sharding from a few annotations, one factor rule at a time.

One generic algorithm over the primitive registry (registry.py), with Shardy's op priorities
(XLA's default propagation; GSPMD's aggressiveness levels in the same spirit):
  priority 0  pass-through ops only (elementwise, reshape, transpose)
  priority 1  all ops, pass factors only (a contracting or reduced dim carries no axis yet, so
              it cannot take one a batch or free dim will want); broadcasts only backward
  priority 2  all factors of all ops; broadcasts still only backward
  priority 3  broadcasts forward too ("avoid resharding after a broadcast")
An elementwise op whose operand has size-1 dims it broadcasts (`x - m[:, None]`) is lowered as
a broadcast of that operand, then the op: it is pass-through among its other tensors, and that
operand takes axes as a broadcast's operand does (backward from 1) and gives them at 3.
Each priority runs to a fixed point as Shardy's rewrite driver does: equations in program order,
each writing its results, then its operands, and an equation touching a value that just changed
is visited again at once. Per equation, each factor takes the most specific axes its tensors
agree on; each tensor then settles its own conflicts, the factors taking their axes in turn,
the one whose sharding comes from the bigger tensor first (then, in an elementwise op, the one
split more ways; then the earlier tensor), each keeping what no earlier factor holds there.
Annotated values are fixed (and so is a value whose only use is an annotation); others are only
ever refined, so the passes reach a fixed point. Every change is a PropagationStep; `explain`
walks them back to the user's annotations.
# Shardy: OpPriorityPropagation + aggressive factor propagation; XLA: ShardingPropagation::Run
"""

from __future__ import annotations

import contextlib
import gc
import math
from operator import itemgetter

from gspmd_viz.core.program.trace import Program, Value
from gspmd_viz.core.propagation.record import (
    BROADCAST_FORWARD,
    PRIORITIES,
    Propagation,
    PropagationStep,
    category,
    eligible,
    narrow_operands,
    user_annotations,
    with_constrained_producers,
)
from gspmd_viz.core.rules.factors import FactorRule
from gspmd_viz.core.rules.registry import is_known, program_rules
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding

Spec = tuple[tuple[str, ...], ...]  # per tensor dim, the mesh axes splitting it


PASS_FACTORS_ONLY = 1  # the priority at which only pass factors carry axes (Shardy's op priority 2)
_PASS_ONLY = ("pass-through", "broadcasting")  # categories whose rules have only pass factors


def _common_prefix(a, b) -> tuple[str, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return tuple(a[:n])


def _prefix_free(axes, taken) -> tuple[str, ...]:
    """The longest prefix of `axes` that avoids every axis in `taken`."""
    for n, a in enumerate(axes):
        if a in taken:
            return tuple(axes[:n])
    return tuple(axes)


def _held_by_others(holdings: dict, f: int) -> set[str]:
    """The mesh axes a tensor's factors other than f hold (`holdings`: factor -> axes)."""
    return {a for g, axes in holdings.items() if g != f for a in axes}


def _source(held, f: int, axes) -> tuple[int, object]:
    """(position, tensor) of factor f's source among an equation's (tensor, holdings): the
    biggest tensor holding all of `axes` (not empty) on f, the earliest on a tie (Shardy's
    getFactorToSourceTensor)."""
    n, found = len(axes), None
    for k, (t, h) in enumerate(held):
        if h.get(f, ())[:n] == axes and (found is None or t.size > found[1].size):
            found = (k, t)
    return found


def _spec_reader(slots: list[int]):
    """specs -> the tuple of the specs at `slots` (one itemgetter call per visit)."""
    if len(slots) > 1:
        return itemgetter(*slots)
    return lambda specs: tuple([specs[k] for k in slots])


def _places(eqn, rule) -> list[tuple]:
    """Per operand then result of the equation that is a value: (its index among the operands
    or results, its factors, whether it is a result, the factors it has, its size)."""
    places = []
    for values, factor_lists, result in (
        (eqn.inputs, rule.operands, False),
        (eqn.outputs, rule.results, True),
    ):
        for n, (v, factors) in enumerate(zip(values, factor_lists, strict=True)):
            if isinstance(v, Value):
                mine = frozenset(sum(factors, ()))
                places.append((n, factors, result, mine, math.prod(v.shape)))
    return places


class _Tensor:
    """One operand or result of an equation, as the propagation sees it: `slot`, its value's
    place in Propagator.specs; `opened`, the dims propagation may refine; `closed`, fixed
    with none open."""

    __slots__ = ("value", "slot", "factors", "is_result", "size", "mine", "opened", "closed")
    __slots__ += ("read_from", "held")

    def __init__(self, value, place, slot, opened, fixed):
        self.value, self.slot = value, slot
        _, self.factors, self.is_result, self.mine, self.size = place  # (_places)
        self.opened, self.closed = opened, fixed and not opened
        self.read_from = self.held = None  # the spec `held` was read off (Propagator.held_now)


class Propagator:
    def __init__(self, program: Program, mesh: Mesh, annotations: dict):
        self.program, self.mesh, self.size = program, mesh, mesh.shape
        self.user = dict(annotations)
        self.fixed = with_constrained_producers(program, annotations)
        self.slot = {v.id: k for k, v in enumerate(program.values)}  # value id -> place in specs
        self.specs: list[Spec] = [((),) * v.ndim for v in program.values]
        for v, s in self.fixed.items():
            self.specs[self.slot[v.id]] = tuple(s.dim_axes(d) for d in range(v.ndim))
        self.pinned = {self.slot[v.id] for v in self.fixed}  # the slots of fixed values
        eqns = program.equations
        self.rules = program_rules(program)
        self.places: dict[tuple, list] = {}  # (id(rule), kind) -> its tensors' places (_places)
        self.tensors = [self._tensors(e, r) for e, r in zip(eqns, self.rules, strict=True)]
        self.read = [_spec_reader([t.slot for t in ts]) for ts in self.tensors]  # per equation
        self.kinds = self._kinds()
        self.categories, self.narrow = self._categories()
        self.steps: list[PropagationStep] = []
        self.conflicts: list[str] = []
        self.raised: list[tuple] = []  # (factor name, axes, axes) of each conflict met
        self.quiet: dict[int, tuple] = {}  # equation -> how it was last visited, till it changes
        self.made: dict[tuple, tuple] = {}  # (kind, how, specs) -> what write_back did
        self.settled_made: dict[tuple, dict] = {}  # (kind, specs) -> the equation's split
        self.layouts: dict[Spec, Sharding] = {}  # spec -> its Sharding (`layout`)

    def _tensors(self, eqn, rule) -> list[_Tensor]:
        """Its operands and results that are values. Propagation may refine every dim of an
        unannotated value, and the dims an annotation leaves open (P.UNCONSTRAINED, the dim
        jax.vmap adds)."""
        # twins share one rule object (program_rules) and have values or literals alike, of
        # one shape each; keyed by the kind too, so a rule object two kinds shared is safe
        key = (id(rule), self.program.kinds[eqn])
        places = self.places.get(key)
        if places is None:
            places = self.places[key] = _places(eqn, rule)
        tensors, slot, pinned, values = [], self.slot, self.pinned, (eqn.inputs, eqn.outputs)
        for place in places:
            v = values[place[2]][place[0]]
            k = slot[v.id]
            opened = self.program.open_dims.get(v, ()) if k in pinned else range(v.ndim)
            tensors.append(_Tensor(v, place, k, opened, k in pinned))
        return tensors

    def _shards(self, axes) -> int:
        return math.prod([self.size[a] for a in axes]) if axes else 1

    def _kinds(self) -> list[int]:
        """Per equation, a number shared by equations a visit cannot tell apart on the same
        specs (transformer layers repeat): rule, and per tensor its factors, side, size,
        whether it is closed or its open dims, which value it shares."""
        numbers: dict[tuple, int] = {}
        kinds = []
        rules: dict[FactorRule, int] = {}  # a number per rule, equal rules one number
        shapes: dict[tuple, int] = {}  # a number per tensors' (factors, side, size)
        # (id(rule), equation kind) -> its numbers, so each rule object is hashed once
        # (program_rules gives the equations of a kind one rule, and their tensors share
        # factors, sides and sizes)
        by_object: dict[tuple, tuple] = {}
        eqns, program_kinds = self.program.equations, self.program.kinds
        for e, rule, ts in zip(eqns, self.rules, self.tensors, strict=True):
            mine = (id(rule), program_kinds[e])
            numbers_of_rule = by_object.get(mine)
            if numbers_of_rule is None:
                shape = tuple([(t.factors, t.is_result, t.size) for t in ts])
                numbers_of_rule = (
                    rules.setdefault(rule, len(rules)),
                    shapes.setdefault(shape, len(shapes)),
                )
                by_object[mine] = numbers_of_rule
            # None where the full entry is the same for every equation of the rule's shape
            # (no tensor fixed: each open in every dim; every tensor its own value)
            slots = [t.slot for t in ts]
            fixed = not self.pinned.isdisjoint(slots)
            opened = tuple([(t.closed, t.opened) for t in ts]) if fixed else None
            shared = tuple([slots.index(k) for k in slots]) if len(set(slots)) < len(ts) else None
            key = (numbers_of_rule, opened, shared)
            kinds.append(numbers.setdefault(key, len(numbers)))
        return kinds

    def _categories(self) -> tuple[list, list]:
        """Per equation its category and narrow operands, worked out once per kind: both read
        only the rule and which factors each tensor has, and equations of a kind share those."""
        found: dict[int, tuple] = {}
        for i, kind in enumerate(self.kinds):
            if kind not in found:
                rule, ts = self.rules[i], self.tensors[i]
                c = category(rule, self.program.equations[i])
                narrow = (
                    narrow_operands([t.factors for t in ts], rule) if c == "broadcasting" else ()
                )
                found[kind] = (c, frozenset(narrow))
        return [found[k][0] for k in self.kinds], [found[k][1] for k in self.kinds]

    # --- reading factor shardings off tensors ---------------------------------------------
    def split_dim(self, axes, dim_factors, rule) -> dict[int, tuple[str, ...]]:
        """A dim's axes, handed out to its factors major first (whole factors before minors)."""
        if len(dim_factors) == 1:
            return {dim_factors[0]: axes}
        out, i = {}, 0
        for f in dim_factors:
            size, taken, prod = rule.factors[f].size, [], 1
            while i < len(axes) and size % (prod * self.size[axes[i]]) == 0:
                prod *= self.size[axes[i]]
                taken.append(axes[i])
                i += 1
            out[f] = tuple(taken)
            if prod != size:
                break
        return out

    def holdings(self, rule, t) -> dict[int, tuple[str, ...]]:
        """factor -> the axes tensor t currently gives it (a copy: the caller may edit it)."""
        return dict(self.held_now(rule, t))

    def held_now(self, rule, t) -> dict[int, tuple[str, ...]]:
        """holdings, not to be edited: read again only when t's spec changed (a write
        replaces the spec, never edits it)."""
        spec = self.specs[t.slot]
        if t.read_from is not spec:
            held = {}
            for d, fs in enumerate(t.factors):
                if fs:
                    held |= self.split_dim(spec[d], fs, rule)
            t.read_from, t.held = spec, held
        return t.held

    def merge(self, eqn, rule, f, cands) -> tuple[str, ...]:
        """The most specific axes all tensors agree on for factor f: `x` and `x, y` agree on
        `x, y`; `x` against `y` is a conflict, cut back to the common prefix (and logged)."""
        best, expand = (), True
        for axes in cands:
            if not axes or axes == best:
                continue  # agrees, and adds nothing
            n = len(_common_prefix(best, axes))
            if n < min(len(best), len(axes)):
                self.raised.append((rule.factors[f].name, best, axes))
                self.note_conflict(eqn, *self.raised[-1])
                best, expand = best[:n], False
            elif len(axes) > len(best) and expand:
                best = axes
        return best

    def note_conflict(self, eqn, name: str, best, axes) -> None:
        note = (
            f"eqn {eqn.index} {eqn.primitive} factor {name}: "
            f"{','.join(best)} against {','.join(axes)}, neither propagates"
        )
        if note not in self.conflicts:
            self.conflicts.append(note)

    def wanted(self, i: int, pass_only=False, split=False, skip=frozenset()) -> dict:
        """factor -> (axes, source tensor) for equation i's factors that get axes, in claim
        order (Shardy's: the bigger source tensor first, then the earlier one in the
        equation); `pass_only`: only pass factors carry axes; `split`: each factor minus the
        axes another factor holds in a tensor they share (the equation's split, `settled`);
        `skip`: tensors not read. A factor that gets no axes would claim last and take
        nothing: it is left out."""
        eqn, rule = self.program.equations[i], self.rules[i]
        held = [(t, self.held_now(rule, t)) for k, t in enumerate(self.tensors[i]) if k not in skip]
        given: dict[int, list] = {}  # factor -> the axes the tensors give it, where not ()
        for _, h in held:
            for f, axes in h.items():
                if axes:
                    given.setdefault(f, []).append(axes)
        claims, elementwise, factors = [], self.categories[i] == "pass-through", rule.factors
        for f in sorted(given):  # factor order: conflicts are noted in it
            # need_replication factors (a sort's dim, a cumsum's scan dim) never carry axes
            kind = factors[f].kind
            if kind == "need_replication" or (pass_only and kind != "pass"):
                continue
            cands = given[f]  # all the same (one tensor, or most often): what all agree on
            same = cands.count(cands[0]) == len(cands)
            axes = cands[0] if same else self.merge(eqn, rule, f, cands)
            if axes:
                (k, src), most = _source(held, f, axes), -self._shards(axes) if elementwise else 0
                if split:  # minus the axes other factors hold in a tensor that has f too
                    others = (_held_by_others(h, f) for _, h in held if f in h)
                    axes = _prefix_free(axes, set().union(*others))
                claims.append((-src.size, most, k, f, axes, src))
        claims.sort()  # by (size, split, position, factor): factors differ, so no tie reaches axes
        return {c[3]: (c[4], c[5]) for c in claims}

    # --- writing them back ----------------------------------------------------------------
    def proposal(self, t, rule, wanted) -> tuple[Spec, list, list]:
        """The spec the factors give tensor t (refining its current spec), and why. The
        tensor settles its own conflicts: its factors take their wanted axes in claim order,
        around the axes its other factors hold."""
        cur = self.specs[t.slot]
        if self.holds_already(t, rule, wanted):
            return cur, [], []
        used = {a for axes in cur for a in axes}
        fa, held, mine = {}, self.holdings(rule, t), t.mine
        for f, (axes, src) in wanted.items():
            if f in mine:  # around the axes the tensor's other factors hold (or just took)
                held[f] = _prefix_free(axes, _held_by_others(held, f))
                fa[f] = (held[f], (src,))
        new, factors, sources, opened = [], [], [], t.opened
        for d, fs in enumerate(t.factors):
            if fa.keys().isdisjoint(fs):  # no factor of the dim takes axes: it keeps its own
                new.append(cur[d])
                continue
            axes = []
            for f in fs:
                got, src = fa.get(f, ((), ()))
                shards = self._shards(got)
                if len(fs) > 1 and rule.factors[f].size % shards:
                    break  # a compound dim splits evenly or not at all (as split.sanitize)
                axes += got
                if got and axes[: len(cur[d])] == list(cur[d]) and len(axes) > len(cur[d]):
                    factors.append(rule.factors[f].name)
                    sources += [s for s in src if s.value is not t.value]
                if shards != rule.factors[f].size:
                    break  # a minor factor only counts once the major one is whole
            ok = tuple(axes[: len(cur[d])]) == cur[d] and d in opened
            new.append(cur[d] + (_prefix_free(axes[len(cur[d]) :], used) if ok else ()))
            used |= set(new[-1])
        return tuple(new), factors, sources

    def holds_already(self, t, rule, wanted) -> bool:
        """Whether, for every factor of t, the axes it wants are a prefix of those t gives it
        now: then each dim's proposal is a prefix of its current axes, and t keeps its spec."""
        held, mine = self.held_now(rule, t), t.mine
        for f, (axes, _) in wanted.items():
            if f in mine and held.get(f, ())[: len(axes)] != axes:
                return False
        return True

    def how(self, kind: str, narrow: frozenset, priority: int) -> tuple:
        """What a visit at `priority` of an equation of category `kind` with `narrow`
        operands does, as far as it differs between priorities: the directions it writes,
        whether only pass factors carry axes (moot when the rule has only those), the tensors
        it does not read, whether narrow operands wait."""
        ways = tuple(d for d in ("forward", "backward") if eligible(kind, priority, d))
        # narrow operands give axes at priority 3 only, take them from 1 (a broadcast)
        skip = narrow if priority < BROADCAST_FORWARD else frozenset()
        pass_only = priority == PASS_FACTORS_ONLY and kind not in _PASS_ONLY
        return ways, pass_only, skip, bool(narrow) and priority == 0

    def hows_at(self, priority: int) -> list[tuple]:
        """Per equation, what a visit at `priority` does (`how`), worked out once per
        category and narrow operands (all it reads)."""
        found: dict[tuple, tuple] = {}
        hows = []
        for key in zip(self.categories, self.narrow, strict=True):
            how = found.get(key)
            if how is None:
                how = found[key] = self.how(*key, priority)
            hows.append(how)
        return hows

    def visit(self, i: int, priority: int, how: tuple) -> list[int]:
        """Equation i's factors written back to its results, then its operands (in the
        directions `how` allows); the slots of the values that changed. A visit that would
        do what the equation's last visit did (`quiet`: the same how, and no tensor of it
        changed since) would change nothing, as that one did (its conflicts are noted
        already): skipped."""
        if self.quiet.get(i) == how:
            return []
        self.quiet[i] = how  # dropped (`run`) when a tensor of the equation changes
        specs = self.read[i](self.specs)
        if not how[0] or not any(map(any, specs)):
            return []  # no direction, or no tensor of it holds a mesh axis to hand on
        return self.write_back(i, priority, how, specs)

    def write_back(self, i: int, priority: int, how: tuple, specs: tuple) -> list[int]:
        """Equation i's factors written to the tensors `how` lets it write; the slots changed.
        What an equation of the same kind did on the same specs is done again (its conflicts
        noted, its writes made), not worked out again."""
        key = (self.kinds[i], how, specs)
        if key not in self.made:
            self.raised = []
            writes = self.worked_out(i, priority, how)
            self.made[key] = (tuple(self.raised), writes)
            return [self.tensors[i][w[1]].slot for w in writes]
        raised, writes = self.made[key]
        eqn, tensors = self.program.equations[i], self.tensors[i]
        for conflict in raised:
            self.note_conflict(eqn, *conflict)
        for direction, k, new, factors, sources in writes:
            why = (factors, [tensors[s].value for s in sources])
            self.write((priority, i, direction), tensors[k], new, why)
        return [tensors[w[1]].slot for w in writes]

    def worked_out(self, i: int, priority: int, how: tuple) -> tuple:
        """write_back worked out: its writes, each (direction, tensor, spec, factors, source
        tensors)."""
        ways, pass_only, skip, narrow_waits = how
        wanted = self.wanted(i, pass_only=pass_only, skip=skip) if ways else {}
        tensors, rule, writes = self.tensors[i], self.rules[i], []
        waiting = self.narrow[i] if narrow_waits else ()  # a broadcast's operand takes from 1
        for direction in ways:
            forward = direction == "forward"
            for k, t in enumerate(tensors):
                if t.is_result != forward or t.closed or k in waiting:
                    continue
                new, factors, sources = self.proposal(t, rule, wanted)
                if new != self.specs[t.slot]:
                    why = (factors, [s.value for s in sources])
                    self.write((priority, i, direction), t, new, why)
                    sources = tuple([tensors.index(s) for s in sources])
                    writes.append((direction, k, new, tuple(factors), sources))
        return tuple(writes)

    def write(self, where: tuple, t: _Tensor, new: Spec, why: tuple) -> None:
        """Give tensor t the spec `new`, recorded as a PropagationStep at `where` (priority,
        equation, direction) with `why` (the factors that carried the axes, their source
        values)."""
        priority, i, direction = where
        before, after = self.layout(self.specs[t.slot]), self.layout(new)
        self.specs[t.slot] = new
        factors, sources = tuple(dict.fromkeys(why[0])), tuple(dict.fromkeys(why[1]))
        primitive = self.program.equations[i].primitive
        step = (priority, i, primitive, direction, t.value, before, after, factors, sources)
        self.steps.append(PropagationStep(*step))

    def layout(self, spec: Spec) -> Sharding:
        """The Sharding of a spec, one object per spec (`layouts`): steps record two per write,
        and the partitioner compares and hashes them thousands of times (the same object is
        equal at once)."""
        found = self.layouts.get(spec)
        if found is None:
            found = self.layouts[spec] = Sharding.of_axes(self.mesh, spec)  # specs: canonical
        return found

    # --- the passes -----------------------------------------------------------------------
    def run(self) -> None:
        """Each priority to a fixed point, Shardy's way: equations in program order, and an
        equation touching a value that just changed is visited again at once (a stack)."""
        touching: list[list[int]] = [[] for _ in self.specs]  # slot -> equations touching it
        for i, ts in enumerate(self.tensors):
            for t in ts:
                touching[t.slot].append(i)
        for priority in range(len(PRIORITIES)):
            hows = self.hows_at(priority)
            stack = list(reversed(range(len(self.rules))))
            waiting = set(stack)
            while stack:
                i = stack.pop()
                waiting.discard(i)
                for slot in self.visit(i, priority, hows[i]):
                    for j in touching[slot]:
                        self.quiet.pop(j, None)
                        if j not in waiting:
                            stack.append(j)
                            waiting.add(j)

    def settled(self, i: int) -> dict[int, tuple[str, ...]]:
        """Every factor of equation i -> the axes it settled on (() when it holds none): in
        claim order, each keeps the prefix of its axes no earlier factor holds. Worked out
        once per kind of equation and specs of its tensors (`settled_made`)."""
        key = (self.kinds[i], self.read[i](self.specs))
        found = self.settled_made.get(key)
        if found is None:
            found = self.settled_made[key] = self._settled(i)
        return dict(found)

    def _settled(self, i: int) -> dict[int, tuple[str, ...]]:
        found = dict.fromkeys(range(len(self.rules[i].factors)), ())
        for f, (axes, _) in self.wanted(i, split=True).items():
            found[f] = _prefix_free(axes, {a for ax in found.values() for a in ax})
        return found

    def record(self) -> Propagation:
        """The plain record of the finished run (conflicts noted before settling factors)."""
        program, conflicts = self.program, tuple(self.conflicts)
        unknown = {e.primitive for e in program.equations if not is_known(e.primitive)}
        return Propagation(
            program=program,
            mesh=self.mesh,
            annotations=self.user,
            pinned={v: s for v, s in self.fixed.items() if v not in self.user},
            steps=tuple(self.steps),
            conflicts=conflicts,
            unknown_primitives=tuple(sorted(unknown)),
            rules=tuple(self.rules),
            settled=tuple(self.settled(i) for i in range(len(self.rules))),
            shardings={v: self.layout(self.specs[k]) for k, v in enumerate(program.values)},
        )


def propagate(program: Program, mesh: Mesh | None = None, annotations: dict | None = None):
    """Propagate the program's annotations (plus `annotations`: value or name -> spec)."""
    if not isinstance(program, Program):
        raise TypeError(f"gv.propagate takes a gv.trace(...) Program, got {type(program).__name__}")
    mesh = mesh or program.mesh
    if mesh is None:
        raise ValueError("the program has no mesh_split annotations; pass mesh=gv.Mesh(...)")
    if program.mesh is not None and program.mesh != mesh:
        raise ValueError(
            f"the function's annotations use {program.mesh!r}, which is not the mesh "
            f"{mesh!r} given to propagate"
        )
    with collector_paused():
        p = Propagator(program, mesh, user_annotations(program, mesh, annotations))
        p.run()
        found = p.record()
        del p  # freed while the collector is off: its first run after scans only the record
    return found


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while propagation (and gv.partition's passes)
    run (left off if it was off). They make hundreds of thousands of short-lived objects that
    reference counting frees, and the collector, run by allocation counts, scanned the young
    ones dozens of times per 2-layer decoder and walked the whole heap (jax's included) once or
    twice per 8-layer one: 20-40% of a partition's time, 7-12% of a propagation's. What they
    leave is collected as usual after: the collector's first run after the block, owed by then,
    scans every young object still alive, so drop the working state inside it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
