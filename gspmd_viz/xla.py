"""The oracle: what XLA itself (Shardy, its default propagation) decides for the same program.

`gv.xla.propagate(f, *args, mesh=mesh)` re-runs the traced program under jax.jit with every
equation in `jax.named_scope(f"eqn{i}")`, compiles once with an HLO dump, and reads the
sharding XLA propagated to each equation's result. `gv.xla.compare(prop)` sets ours beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax

from gspmd_viz.core.devices import require_devices
from gspmd_viz.core.mesh import Mesh
from gspmd_viz.core.program import Program, Value, trace
from gspmd_viz.core.sharding import Sharding, short_dtype
from gspmd_viz.xla_collectives import collectives as collectives
from gspmd_viz.xla_cost import compare as compare_cost
from gspmd_viz.xla_dump import entry_instructions, propagated_hlo

__all__ = [
    "XlaPropagation",
    "Comparison",
    "propagate",
    "propagate_program",
    "compare",
    "compare_cost",
]


@dataclass(frozen=True, eq=False)
class XlaPropagation:
    program: Program
    mesh: Mesh
    hlo: str  # the module right after XLA's sharding propagation
    shardings: dict  # Value -> Sharding (values XLA kept; dead or folded ones are absent)

    def sharding(self, value) -> Sharding | None:
        value = self.program.value(value) if isinstance(value, str) else value
        return self.shardings.get(value)

    @property
    def inputs(self) -> tuple:
        return tuple(self.sharding(v) for v in self.program.inputs)

    @property
    def outputs(self) -> tuple:
        return tuple(self.sharding(v) for v in self.program.outputs if isinstance(v, Value))


def _match(program: Program, instrs, mesh: Mesh) -> dict:
    """Each equation result -> the last instruction of its scope with the same type."""
    by_eqn: dict[int, list] = {}
    for ins in instrs:
        if ins.eqn is not None and ins.sharding is not None and ins.dtype != "tuple":
            by_eqn.setdefault(ins.eqn, []).append(ins)
    found = {}
    for e in program.equations:
        pool = list(by_eqn.get(e.index, []))
        for v in e.outputs:
            same = [i for i in pool if i.shape == v.shape and i.dtype == short_dtype(v.dtype)]
            if same:
                pool.remove(same[-1])
                found[v] = Sharding.from_hlo(mesh, same[-1].sharding)
    for ins in instrs:
        if ins.parameter is not None and ins.sharding and ins.parameter < len(program.inputs):
            found[program.inputs[ins.parameter]] = Sharding.from_hlo(mesh, ins.sharding)
    return found


_CACHE: dict[int, tuple[Program, XlaPropagation]] = {}


def propagate_program(program: Program, mesh: Mesh | None = None) -> XlaPropagation:
    """XLA's propagation for an already traced program (cached per program)."""
    if id(program) in _CACHE and _CACHE[id(program)][0] is program:
        return _CACHE[id(program)][1]
    mesh = mesh or program.mesh
    if mesh is None:
        raise ValueError("the program has no mesh_split annotations: XLA would not partition it")
    if program.mesh is not None and program.mesh != mesh:
        raise ValueError(f"the function's annotations use {program.mesh!r}, not {mesh!r}")
    require_devices(
        mesh.size,
        "XLA's propagation (trace with the devices present too, or jit ignores the annotations)",
    )
    args = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in program.inputs]
    lowered = jax.jit(lambda *flat: program.evaluate(*flat, scope=True)).lower(*args)
    hlo = propagated_hlo(lowered)
    result = XlaPropagation(program, mesh, hlo, _match(program, entry_instructions(hlo), mesh))
    _CACHE[id(program)] = (program, result)
    return result


def propagate(f, *args, mesh: Mesh | None = None) -> XlaPropagation:
    """XLA's propagated sharding for every jaxpr equation of `f(*args)`."""
    return propagate_program(trace(f, *args), mesh)


@dataclass(frozen=True)
class Row:
    eqn: int
    primitive: str
    value: Value
    ours: Sharding
    xla: Sharding | None

    @property
    def status(self) -> str:
        return (
            "no XLA result" if self.xla is None else "agree" if self.ours == self.xla else "DIFFER"
        )


@dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]

    @property
    def compared(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.xla is not None)

    @property
    def differ(self) -> tuple[Row, ...]:
        return tuple(r for r in self.compared if r.status == "DIFFER")

    @property
    def agreement(self) -> float:
        return 1 - len(self.differ) / max(1, len(self.compared))

    def text(self, only_differences: bool = False) -> str:
        rows = self.differ if only_differences else self.rows
        header = f"{'eqn':>4}  {'primitive':<20} {'value':<6} {'ours':<28} {'XLA':<28} status"
        lines = [header] if rows else []
        for r in rows:
            xla = r.value.type_text(r.xla) if r.xla is not None else "-"
            lines.append(
                f"{r.eqn:>4}  {r.primitive:<20} {r.value.name:<6} "
                f"{r.value.type_text(r.ours):<28} {xla:<28} {r.status}"
            )
        lines.append(
            f"agree on {len(self.compared) - len(self.differ)} of {len(self.compared)} "
            f"equation results ({100 * self.agreement:.1f}%)"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def compare(prop, xla: XlaPropagation | None = None) -> Comparison:
    """Our propagated sharding next to XLA's, for every equation result."""
    extra = [v.name for v in prop.annotations if v not in prop.program.annotations]
    if extra:
        raise ValueError(
            f"annotations {extra} were given to gv.propagate, not in the function; "
            "XLA cannot see them (annotate with mesh_split instead)"
        )
    xla = xla or propagate_program(prop.program, prop.mesh)
    rows = tuple(
        Row(e.index, e.primitive, v, prop.sharding(v), xla.sharding(v))
        for e in prop.program.equations
        for v in e.outputs
    )
    return Comparison(rows)
