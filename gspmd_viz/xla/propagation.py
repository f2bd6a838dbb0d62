"""The oracle: what XLA itself (Shardy, its default propagation) decides for the same program.

`gv.xla.propagate(f, *args, mesh=mesh)` re-runs the traced program under jax.jit with every
equation in `jax.named_scope(f"eqn{i}")`, compiles once with an HLO dump, and reads the
sharding XLA propagated to each equation's result. `gv.xla.compare(prop)` sets ours beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax

from gspmd_viz.core.program.trace import Program, Value, trace
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.devices import require_devices
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding, short_dtype
from gspmd_viz.xla.dump import (
    entry_instructions,
    propagated_hlo,
    region_instructions,
    root_shardings,
)

__all__ = ["XlaPropagation", "Comparison", "propagate", "propagate_program", "compare"]


@dataclass(frozen=True, eq=False)
class XlaPropagation:
    program: Program
    mesh: Mesh
    hlo: str  # the module right after XLA's sharding propagation
    shardings: dict  # Value -> Sharding (values XLA kept; dead or folded ones are absent)
    # Value -> XLA's HloSharding text where our mesh has no spec for it (a sub-axis split)
    not_comparable: dict = field(default_factory=dict)

    def sharding(self, value) -> Sharding | None:
        value = self.program.value(value) if isinstance(value, str) else value
        return self.shardings.get(value)

    @property
    def inputs(self) -> tuple:
        return tuple(self.sharding(v) for v in self.program.inputs)

    @property
    def outputs(self) -> tuple:
        return tuple(self.sharding(v) for v in self.program.outputs if isinstance(v, Value))


def _match(program: Program, instrs) -> dict:
    """Each equation result -> the HloSharding text of the last instruction of its scope
    with the same type (program inputs -> their parameter's)."""
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
                found[v] = same[-1].sharding
    for ins in instrs:
        if ins.parameter is not None and ins.sharding and ins.parameter < len(program.inputs):
            found[program.inputs[ins.parameter]] = ins.sharding
    return found


def _unscoped_results(program: Program, hlo: str, found: dict) -> dict:
    """Program results no equation scope names (a loop's come out of the `while` tuple):
    their HloSharding text, read off the ENTRY's ROOT."""
    roots = root_shardings(hlo)
    if len(roots) != len(program.outputs):
        return {}
    return {
        v: text
        for v, text in zip(program.outputs, roots, strict=True)
        if isinstance(v, Value) and v not in found
    }


def _read(texts: dict, mesh: Mesh) -> tuple[dict, dict]:
    """(Value -> Sharding, Value -> text our mesh cannot express: not comparable)."""
    shardings, other = {}, {}
    for v, text in texts.items():
        try:
            shardings[v] = Sharding.from_hlo(mesh, text)
        except ValueError:  # e.g. {devices=[2,4]<=[8]} on Mesh(x=8): sub-axes of x
            other[v] = text
    return shardings, other


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
    texts = _match(program, entry_instructions(hlo) + region_instructions(hlo))
    texts |= _unscoped_results(program, hlo, texts)
    shardings, other = _read(texts, mesh)
    result = XlaPropagation(program, mesh, hlo, shardings, other)
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
    xla_hlo: str | None = None  # XLA's sharding, when our mesh cannot express it

    @property
    def status(self) -> str:
        if self.xla_hlo is not None:
            return "not comparable"
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
            xla = r.value.type_text(r.xla) if r.xla is not None else r.xla_hlo or "-"
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
    """Our propagated sharding next to XLA's, for every equation result (a loop's data-flow
    edges compute nothing XLA could name; the program's results are compared wherever they
    come from)."""
    extra = [v.name for v in prop.annotations if v not in prop.program.annotations]
    if extra:
        raise ValueError(
            f"annotations {extra} were given to gv.propagate, not in the function; "
            "XLA cannot see them (annotate with mesh_split instead)"
        )
    xla = xla or propagate_program(prop.program, prop.mesh)
    rows = tuple(
        Row(e.index, e.primitive, v, prop.sharding(v), xla.sharding(v), xla.not_comparable.get(v))
        for e in prop.program.equations
        for v in e.outputs
        if not entry_for(e).edge or v in prop.program.outputs
    )
    return Comparison(rows)
