"""Our reference partitioner at the same place: which of its collectives serve an equation, the
shardings that meet there, the factor they disagree on, and the reason paragraph.

Each of our collectives names what it moves (`e -> eqn 3 tanh`: value e, for equation 3; `g ->
out`: the result); it serves both the equation that made the value and the one that reads it,
as XLA names a collective after either (a dot's all-reduce carries the dot's op_name).
"""

from __future__ import annotations

import re

from gspmd_viz.core.program.trace import Equation, Value
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.units import format_bytes

_CONSEQUENCE = {  # what a split factor of this kind costs at the equation
    "reduction": "each device holds partial sums",
    "need_replication": "the op needs it whole: it must be gathered",
    "permutation": "data moves between shards",
    "windowed": "neighbours' halos are exchanged",
    "windowed-sum": "halos, then partial sums",
}
_MOVED = re.compile(r"^([\w.]+) -> ")
_EQN = re.compile(r"eqn (\d+)")


def places(c: Collective, program) -> set[int]:
    """The equations one of our collectives serves: the consumer it names and the producer
    of the value it moves."""
    found = {int(n) for n in _EQN.findall(c.source)}
    moved = _MOVED.match(c.source)
    if moved:
        try:
            producer = program.producer.get(program.value(moved.group(1)))
        except KeyError:  # a buffer name (v.1), not a program value
            producer = None
        if producer is not None:
            found.add(producer.index)
    return found


def ours_by_equation(spmd) -> dict[int, list[Collective]]:
    """equation index -> our collectives serving it."""
    found: dict[int, list[Collective]] = {}
    for c in spmd.collectives:
        for i in places(c, spmd.program):
            found.setdefault(i, []).append(c)
    return found


def _held(tensors, values, shardings) -> dict[int, list[tuple[str, tuple]]]:
    """factor -> [(tensor name, mesh axes that tensor splits it by)] (a compound dim's axes
    are put on its major factor; literals hold nothing)."""
    held: dict[int, list[tuple[str, tuple]]] = {}
    for factors, value, sharding in zip(tensors, values, shardings, strict=False):
        if not isinstance(value, Value):
            continue
        for dim, fs in enumerate(factors):
            if fs:
                held.setdefault(fs[0], []).append((value.name, sharding.dim_axes(dim)))
    return held


def conflicts(eqn: Equation, prop) -> list[str]:
    """One sentence per factor the tensors meeting at `eqn` split differently (a split
    reduction factor leaves partial sums)."""
    rule = prop.rule(eqn)
    held = _held(rule.operands, eqn.inputs, [prop.sharding(v) for v in eqn.inputs])
    outs = _held(rule.results, eqn.outputs, [prop.sharding(v) for v in eqn.outputs])
    for f, pairs in outs.items():
        held.setdefault(f, []).extend(pairs)
    said = []
    for f, pairs in sorted(held.items()):
        factor = rule.factors[f]
        special = factor.kind in _CONSEQUENCE and any(axes for _, axes in pairs)
        if len({axes for _, axes in pairs}) < 2 and not special:
            continue
        splits = ", ".join(f"{name} by {','.join(axes) or 'nothing'}" for name, axes in pairs)
        kind = f" ({factor.kind})" if factor.kind != "pass" else ""
        then = f" ({_CONSEQUENCE[factor.kind]})" if special else ""
        said.append(f"factor {factor.name}{kind} of size {factor.size} is split {splits}{then}")
    return said


def meeting(eqn: Equation, prop) -> str:
    """`dot_general c: f32[8@x, 16], d: f32[16@y, 8] -> e: f32[8@x, 8]` (our shardings)."""
    ins = ", ".join(
        f"{v.name}: {v.type_text(prop.sharding(v))}" for v in eqn.inputs if isinstance(v, Value)
    )
    outs = ", ".join(f"{v.name}: {v.type_text(prop.sharding(v))}" for v in eqn.outputs)
    return f"{eqn.primitive} {ins} -> {outs}"


def verdict(xla_bytes: float, ours: list[Collective]) -> str:
    """What the reference does at the same place, and who moves fewer bytes."""
    our_bytes = sum(c.wire_bytes for c in ours)
    moves = "; ".join(c.describe() for c in ours) if ours else "no collective"
    head = f"The reference partitioner emits {moves} here"
    if abs(our_bytes - xla_bytes) < 0.5:
        return f"{head}: the same bytes as XLA ({format_bytes(xla_bytes)})."
    fewer = "the reference" if our_bytes < xla_bytes else "XLA"
    return (
        f"{head}: {fewer} moves fewer bytes (XLA {format_bytes(xla_bytes)}, "
        f"reference {format_bytes(our_bytes)})."
    )


def reason(eqn: Equation | None, prop, xla_bytes: float, ours: list[Collective]) -> str:
    """The one-paragraph reason for XLA's collectives at `eqn` (None: no equation matched)."""
    if eqn is None:
        return "No jaxpr equation of the function matches this line and op; " + verdict(
            xla_bytes, ours
        )
    why = conflicts(eqn, prop)
    clash = "; ".join(why) if why else "the shardings agree on every factor"
    return f"At eqn {eqn.index} ({meeting(eqn, prop)}): {clash}. " + verdict(xla_bytes, ours)
