"""`Propagation`: the plain record `gv.propagate` returns, and the `PropagationStep`s it is made of.

Everything a widget or the partitioner reads is here, settled at the end of the run: the
sharding of every value, the initial state (user annotations, and values pinned by the
annotation on their only use), every step, the factor rule of every equation and the factor
axes propagation settled on for it. It holds no live algorithm: replaying `steps` from the
initial state ends at `sharding(v)` for every value. The priorities the run goes through, and
which equations take part in each (`category`, `eligible`), are named here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gspmd_viz.core.program.trace import Program, Value
from gspmd_viz.core.rules.factors import FactorRule
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding

PRIORITIES = ("pass-through ops", "pass factors", "all ops", "broadcast forward")
BROADCAST_FORWARD = PRIORITIES.index("broadcast forward")  # a broadcast gives axes forward
FactorAxes = dict[int, tuple[str, ...]]  # factor index -> the mesh axes splitting it


# --- who propagates at which priority ------------------------------------------------------


def category(rule: FactorRule, eqn) -> str:
    """pass-through / broadcasting / broadcast / other, read off the rule (never off the
    primitive name). broadcast: a result factor that no operand has (broadcast_in_dim, iota-like
    ops); pass-through: only pass factors, and every operand and result has all of them;
    broadcasting: only pass factors, every result has all, and an operand of the results'
    rank lacks some (size-1 dims the op broadcasts, `x - m[:, None]`: `narrow_operands`)."""
    ops = [t for v, t in zip(eqn.inputs, rule.operands, strict=True) if isinstance(v, Value)]
    every = set(range(len(rule.factors)))
    has = [_factor_set(t) for t in ops]
    if ops and not every <= set().union(*has):
        return "broadcast"
    if not all(f.kind == "pass" for f in rule.factors):
        return "other"
    if all(h == every for h in has):
        return "pass-through"
    whole = all(_factor_set(t) == every for t in rule.results)
    same_rank = all(len(t) == len(rule.results[0]) for t in ops)
    return "broadcasting" if whole and same_rank else "other"


def narrow_operands(tensors, rule) -> set[int]:
    """Positions, among an equation's tensors (each a list of per-dim factors), of those
    lacking some of its factors: the operands a broadcasting op broadcasts first."""
    every = set(range(len(rule.factors)))
    return {k for k, t in enumerate(tensors) if _factor_set(t) != every}


def _factor_set(tensor) -> set[int]:
    """The factors a tensor (a list of per-dim factors) holds, in any dim."""
    return {f for dim in tensor for f in dim}


def eligible(kind: str, priority: int, direction: str) -> bool:
    """Whether an equation of `kind` (`category`) propagates in `direction` at `priority`:
    pass-through ops always (and broadcasting ones, their narrow operands apart:
    Propagator.visit); others from priority 1 on, broadcasts only backward until priority 3."""
    if kind in ("pass-through", "broadcasting"):
        return True
    if kind == "broadcast" and 1 <= priority < BROADCAST_FORWARD:
        return direction == "backward"
    return priority >= 1


# --- the initial state ---------------------------------------------------------------------


def user_annotations(program: Program, mesh: Mesh, extra: dict) -> dict:
    """The program's own annotations plus `extra` (value or name -> spec), checked."""
    fixed = dict(program.annotations)
    for key, spec in (extra or {}).items():
        v = program.value(key) if isinstance(key, str) else key
        s = spec if isinstance(spec, Sharding) else Sharding(mesh, spec)
        if s.mesh != mesh:
            raise ValueError(f"annotation on {v.name} uses {s.mesh!r}, the program uses {mesh!r}")
        if len(s.spec) != v.ndim:
            s.check_rank(v.ndim)
        if v in fixed and fixed[v] != s:
            raise ValueError(
                f"conflicting fixed annotations on {v.name}: {v.type_text(fixed[v])} "
                f"and {v.type_text(s)}"
            )
        fixed[v] = s
    return fixed


def with_constrained_producers(program: Program, annotations: dict) -> dict:
    """A constraint also fixes its operand when nothing else uses it and an equation made it
    (not a program input) and it leaves no dim open.  # Shardy: ApplyShardingConstraints"""
    fixed = dict(annotations)
    for e in program.equations:
        out, src = e.outputs[0], e.inputs[0] if e.inputs else None
        if not entry_for(e).identity or out not in annotations or not isinstance(src, Value):
            continue
        if program.open_dims.get(out):
            continue
        if src in program.producer and len(program.consumers[src]) == 1 and src not in fixed:
            fixed[src] = annotations[out]
    return fixed


# --- the record ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PropagationStep:
    priority: int
    eqn: int
    primitive: str
    direction: str  # "forward" (an operand set a result) or "backward"
    value: Value
    before: Sharding
    after: Sharding
    factors: tuple[str, ...]  # the rule's factors that carried the axes
    sources: tuple[Value, ...]  # the tensors whose shardings the factors came from

    @property
    def pass_name(self) -> str:
        return PRIORITIES[self.priority]

    def __str__(self) -> str:
        v = self.value
        via = ",".join(self.factors) or "-"
        src = ",".join(s.name for s in self.sources) or "-"
        return (
            f"[{self.priority} {self.pass_name}] eqn {self.eqn} {self.primitive} {self.direction}: "
            f"{v.name} {v.type_text(self.before)} -> {v.type_text(self.after)}"
            f"  (factor {via} from {src})"
        )


@dataclass(frozen=True, eq=False)
class Propagation:
    """The result of `gv.propagate(prog)`: a sharding for every value, and how it got there."""

    program: Program
    mesh: Mesh
    annotations: dict  # Value -> Sharding the user fixed (mesh_split / propagate(annotations=))
    pinned: dict  # Value -> Sharding fixed by the annotation on its only use
    steps: tuple[PropagationStep, ...]
    conflicts: tuple[str, ...]
    unknown_primitives: tuple[str, ...]
    rules: tuple[FactorRule, ...]  # per equation
    settled: tuple[FactorAxes, ...]  # per equation: every factor -> its axes (maybe ())
    shardings: dict = field(repr=False)  # Value -> Sharding at the end

    def sharding(self, value) -> Sharding:
        if isinstance(value, str):
            value = self.program.value(value)
        if not isinstance(value, Value):  # a Literal: replicated
            return Sharding(self.mesh, ())
        return self.shardings[value]

    @property
    def inputs(self) -> tuple[Sharding, ...]:
        return tuple(self.sharding(v) for v in self.program.inputs)

    @property
    def outputs(self) -> tuple[Sharding, ...]:
        return tuple(self.sharding(v) for v in self.program.outputs)

    def rule(self, eqn) -> FactorRule:
        return self.rules[eqn if isinstance(eqn, int) else eqn.index]

    def factor_axes(self, eqn) -> dict[int, tuple[str, ...]]:
        """factor index -> mesh axes the factor is split by, as settled for this equation."""
        return dict(self.settled[eqn if isinstance(eqn, int) else eqn.index])

    def initial_sharding(self, value) -> Sharding:
        """What `value` held before the first step: its annotation, the annotation that pinned
        it, or replicated."""
        value = self.program.value(value) if isinstance(value, str) else value
        return self.annotations.get(value) or self.pinned.get(value) or Sharding(self.mesh, ())

    def steps_for(self, value) -> tuple[PropagationStep, ...]:
        value = self.program.value(value) if isinstance(value, str) else value
        return tuple(s for s in self.steps if s.value == value)

    def explain(self, value) -> str:
        """The chain of steps that gave `value` its sharding, back to the user's annotations."""
        value = self.program.value(value) if isinstance(value, str) else value
        lines, seen = [], set()

        def walk(v: Value, depth: int) -> None:
            pad = "  " * depth
            if v in self.annotations:
                lines.append(
                    f"{pad}{v.name}: {v.type_text(self.sharding(v))} annotated by the user"
                )
                return
            if v in self.pinned:
                lines.append(
                    f"{pad}{v.name}: {v.type_text(self.sharding(v))} fixed by the annotation "
                    "on its only use (Shardy applies a constraint to its operand's producer)"
                )
                return
            steps = self.steps_for(v)
            if not steps:
                lines.append(f"{pad}{v.name}: {v.type_text(self.sharding(v))} nothing reached it")
                return
            if v in seen:
                lines.append(f"{pad}{v.name}: (see above)")
                return
            seen.add(v)
            for s in steps:
                lines.append(f"{pad}{s}")
                for src in s.sources:
                    walk(src, depth + 1)

        walk(value, 0)
        return "\n".join(lines)

    def text(self) -> str:
        return self.program.pretty(self)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return (
            f"<Propagation of {len(self.program.equations)} equations on {self.mesh!r}: "
            f"{len(self.steps)} steps>"
        )
