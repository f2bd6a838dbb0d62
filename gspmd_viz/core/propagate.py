"""`gv.propagate`: infer every value's sharding from a few annotations, one factor rule at a time.

One generic algorithm over the primitive registry (registry.py), with priorities in the spirit
of GSPMD's aggressiveness levels and Shardy's op priorities (XLA's default propagation):
  priority 0  pass-through ops only (elementwise, reshape, transpose)
  priority 1  all ops; broadcasts only backward (result -> operand)
  priority 2  broadcasts forward too ("avoid resharding after a broadcast")
Each priority repeats a forward sweep (operands -> results, program order) and a backward sweep
(results -> operands, reverse order) until nothing changes. Per equation, each factor takes the
most specific axes its tensors agree on, minus axes another factor already holds in a tensor they
share; when two factors still want one mesh axis, the factor whose sharding comes from the bigger
tensor keeps it (then a user annotation beats an inferred one). Annotated values are fixed (and
so is a value whose only use is an annotation); others are only ever refined, so the passes reach
a fixed point. Every change is a Step; `explain` walks them back to the user's annotations.
# Shardy: OpPriorityPropagation + aggressive factor propagation; XLA: ShardingPropagation::Run
"""

from __future__ import annotations

import math

from gspmd_viz.core.factors import FactorRule
from gspmd_viz.core.mesh import Mesh
from gspmd_viz.core.program import Program, Value
from gspmd_viz.core.propagation import (
    PRIORITIES,
    Propagation,
    Step,
    user_annotations,
    with_constrained_producers,
)
from gspmd_viz.core.registry import is_known, rule_for
from gspmd_viz.core.sharding import Sharding

Spec = tuple[tuple[str, ...], ...]  # per tensor dim, the mesh axes splitting it


def _category(rule: FactorRule, eqn) -> str:
    """pass-through / broadcast / other, read off the rule (never off the primitive name).

    broadcast: a result factor that no operand has (broadcast_in_dim, iota-like ops);
    pass-through: only pass factors, and every operand and result has all of them.
    """
    ops = [t for v, t in zip(eqn.inputs, rule.operands, strict=True) if isinstance(v, Value)]
    every = set(range(len(rule.factors)))
    has = [{f for d in t for f in d} for t in ops]
    if ops and not every <= set().union(*has):
        return "broadcast"
    all_pass = all(f.kind == "pass" for f in rule.factors)
    return "pass-through" if all_pass and all(h == every for h in has) else "other"


def _eligible(category: str, priority: int, direction: str) -> bool:
    """Which sweeps visit an equation: pass-through ops always; others from priority 1 on,
    broadcasts only backward until priority 2 ("avoid resharding after a broadcast")."""
    if category == "pass-through":
        return True
    if category == "broadcast" and priority == 1:
        return direction == "backward"
    return priority >= 1


def _propagates(kind: str) -> bool:
    """need_replication factors (a sort's dim, a cumsum's scan dim) never carry axes."""
    return kind != "need_replication"


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


class _Tensor:
    """One operand or result of an equation, as the propagation sees it."""

    __slots__ = ("value", "factors", "is_result", "size")

    def __init__(self, value, factors, is_result):
        self.value, self.factors, self.is_result = value, factors, is_result
        self.size = math.prod(value.shape)


class Propagator:
    def __init__(self, program: Program, mesh: Mesh, annotations: dict):
        self.program, self.mesh, self.size = program, mesh, mesh.shape
        self.user = dict(annotations)
        self.fixed = with_constrained_producers(program, annotations)
        self.spec: dict[Value, Spec] = {v: ((),) * v.ndim for v in program.values}
        for v, s in self.fixed.items():
            self.spec[v] = tuple(s.dim_axes(d) for d in range(v.ndim))
        eqns = program.equations
        self.rules = [rule_for(e) for e in eqns]
        self.categories = [_category(r, e) for r, e in zip(self.rules, eqns, strict=True)]
        self.tensors = [self._tensors(e, r) for e, r in zip(eqns, self.rules, strict=True)]
        self.steps: list[Step] = []
        self.conflicts: list[str] = []
        self.tick = 0
        self.changed_at = {v: 0 for v in program.values}

    @staticmethod
    def _tensors(eqn, rule) -> list[_Tensor]:
        pairs = [(v, t, False) for v, t in zip(eqn.inputs, rule.operands, strict=True)]
        pairs += [(v, t, True) for v, t in zip(eqn.outputs, rule.results, strict=True)]
        return [_Tensor(*p) for p in pairs if isinstance(p[0], Value)]

    def _shards(self, axes) -> int:
        return math.prod(self.size[a] for a in axes)

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
        """factor -> the axes tensor t currently gives it."""
        spec, held = self.spec[t.value], {}
        for d, fs in enumerate(t.factors):
            if fs:
                held |= self.split_dim(spec[d], fs, rule)
        return held

    def merge(self, eqn, rule, f, cands):
        """The most specific axes all tensors agree on for factor f: `x` and `x, y` agree on
        `x, y`; `x` against `y` is a conflict, cut back to the common prefix (and logged)."""
        best, src, expand = (), None, True
        for axes, t in cands:
            n = len(_common_prefix(best, axes))
            if n < min(len(best), len(axes)):
                note = (
                    f"eqn {eqn.index} {eqn.primitive} factor {rule.factors[f].name}: "
                    f"{','.join(best)} against {','.join(axes)}, neither propagates"
                )
                if note not in self.conflicts:
                    self.conflicts.append(note)
                best, expand = best[:n], False
            elif len(axes) > len(best) and expand:
                best, src = axes, t
        return best, src

    def factor_axes(self, i: int) -> dict[int, tuple[tuple[str, ...], tuple]]:
        """factor -> (axes, source values), with every mesh axis used by one factor at most."""
        eqn, rule = self.program.equations[i], self.rules[i]
        held = [(t, self.holdings(rule, t)) for t in self.tensors[i]]
        merged = {}
        for f, factor in enumerate(rule.factors):
            cands = [(h[f], t) for t, h in held if f in h]
            if cands and _propagates(factor.kind):
                axes, src = self.merge(eqn, rule, f, cands)
                # minus axes another factor already holds in a tensor that has f too
                taken = {a for _, h in held if f in h for g, ax in h.items() if g != f for a in ax}
                merged[f] = (_prefix_free(axes, taken), src)

        def claim(f):  # Shardy: the bigger source tensor first, then a user annotation
            axes, src = merged[f]
            return (-src.size, src.value not in self.fixed, f) if axes else (0, True, f)

        used, out = set(), {}
        for f in sorted(merged, key=claim):
            axes, src = merged[f]
            out[f] = (_prefix_free(axes, used), (src.value,) if src is not None else ())
            used.update(out[f][0])
        return out

    # --- writing them back ----------------------------------------------------------------
    def proposal(self, t, rule, fa) -> tuple[Spec, list, list]:
        """The spec the factors give tensor t (refining its current spec), and why."""
        cur = self.spec[t.value]
        used = {a for axes in cur for a in axes}
        new, factors, sources = [], [], []
        for d, fs in enumerate(t.factors):
            axes = []
            for f in fs:
                got, src = fa.get(f, ((), ()))
                if len(fs) > 1 and rule.factors[f].size % self._shards(got):
                    break  # a compound dim splits evenly or not at all (as split.sanitize)
                axes += got
                if got and axes[: len(cur[d])] == list(cur[d]) and len(axes) > len(cur[d]):
                    factors.append(rule.factors[f].name)
                    sources += [s for s in src if s is not t.value]
                if self._shards(got) != rule.factors[f].size:
                    break  # a minor factor only counts once the major one is whole
            ok = tuple(axes[: len(cur[d])]) == cur[d] and d in self.open_dims(t.value)
            new.append(cur[d] + (_prefix_free(axes[len(cur[d]) :], used) if ok else ()))
            used |= set(new[-1])
        return tuple(new), factors, sources

    def open_dims(self, v: Value):
        """The dims propagation may refine: all of an unannotated value's, and the dims an
        annotation leaves open (P.UNCONSTRAINED, the dim jax.vmap adds)."""
        if v in self.fixed:
            return self.program.open_dims.get(v, ())
        return range(v.ndim)

    def visit(self, i: int, priority: int, direction: str) -> bool:
        eqn, rule = self.program.equations[i], self.rules[i]
        fa = self.factor_axes(i)
        changed = False
        for t in self.tensors[i]:
            closed = t.value in self.fixed and not self.program.open_dims.get(t.value)
            if t.is_result != (direction == "forward") or closed:
                continue
            new, factors, sources = self.proposal(t, rule, fa)
            if new != self.spec[t.value]:
                v, before = t.value, self.sharding(t.value)
                self.spec[v] = new
                self.tick += 1
                self.changed_at[v] = self.tick
                why = (tuple(dict.fromkeys(factors)), tuple(dict.fromkeys(sources)))
                self.steps.append(
                    Step(priority, i, eqn.primitive, direction, v, before, self.sharding(v), *why)
                )
                changed = True
        return changed

    def sharding(self, v: Value) -> Sharding:
        return Sharding(self.mesh, self.spec[v])

    # --- the passes -----------------------------------------------------------------------
    def sweep(self, priority: int, direction: str, seen: dict) -> bool:
        order = range(len(self.rules))
        changed = False
        for i in order if direction == "forward" else reversed(order):
            if not _eligible(self.categories[i], priority, direction):
                continue
            last = max((self.changed_at[t.value] for t in self.tensors[i]), default=0)
            if seen.get((i, direction), -1) >= last:
                continue  # nothing this equation touches changed since its last visit
            changed |= self.visit(i, priority, direction)
            seen[(i, direction)] = self.tick
        return changed

    def run(self) -> None:
        for priority in range(len(PRIORITIES)):
            seen: dict = {}
            while self.sweep(priority, "forward", seen) | self.sweep(priority, "backward", seen):
                pass

    def settled(self, i: int) -> dict[int, tuple[str, ...]]:
        """Every factor of equation i -> the axes it settled on (() when it holds none)."""
        found = self.factor_axes(i)
        return {f: found.get(f, ((),))[0] for f in range(len(self.rules[i].factors))}

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
            shardings={v: self.sharding(v) for v in program.values},
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
    p = Propagator(program, mesh, user_annotations(program, mesh, annotations))
    p.run()
    return p.record()
