"""`gv.explain(fn, *args, mesh=...)`: XLA's compiled program joined with the reference's.

Each collective of the compiled module is put on the line of the user's function its stack
frame points at (a boundary reshard without metadata inherits its operand's frame; one reading
an argument directly sits on the `def` line), matched to the jaxpr equation at that line with
the same primitive, and explained from the reference: the shardings meeting there, the factor
they split differently, and what our partitioner moves at the same place.
"""

from __future__ import annotations

import jax

from gspmd_viz import sim
from gspmd_viz.core.program.trace import Value, trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.explain.compiled import compile_program, inherited_frame, instructions
from gspmd_viz.explain.findings import findings
from gspmd_viz.explain.reference import ours_by_equation, reason
from gspmd_viz.explain.report import Entry, Report
from gspmd_viz.explain.source import equation_stack, user_code, user_line
from gspmd_viz.partition_on_chip import partition


def as_sharding(mesh: Mesh, pin) -> Sharding | None:
    """A boundary pin as a gv.Sharding: gv.Sharding, NamedSharding, PartitionSpec, spec tuple
    or None (unpinned)."""
    if pin is None or isinstance(pin, Sharding):
        return pin
    if isinstance(pin, jax.sharding.NamedSharding):
        return Sharding(mesh, tuple(pin.spec))
    if isinstance(pin, (tuple, list, jax.sharding.PartitionSpec)):
        return Sharding(mesh, tuple(pin))
    raise TypeError(f"cannot read {pin!r} as a sharding: give a gv.Sharding, spec or None")


def _pins(mesh: Mesh, pins, count: int, what: str, of: str) -> list | None:
    """One gv.Sharding (or None) per flat argument / result (`of`), from `what`."""
    if pins is None:
        return None
    flat = [pins] if not isinstance(pins, (tuple, list)) or _is_spec(pins) else list(pins)
    if len(flat) != count:
        raise ValueError(f"{what} has {len(flat)} entries for {count} flat {of}")
    return [as_sharding(mesh, p) for p in flat]


def _is_spec(pins) -> bool:
    """A bare spec tuple such as ("x", None) (one pin), not a tuple of pins."""
    return all(p is None or isinstance(p, str) for p in pins) and any(
        isinstance(p, str) for p in pins
    )


def jit_pins(fn, args) -> tuple[list | None, list | None]:
    """The in/out shardings a `jax.jit(f, in_shardings=..., out_shardings=...)` carries (one
    per flat argument / result; None where unspecified), or (None, None) for a plain function."""
    if not hasattr(fn, "lower"):
        return None, None
    eqns = jax.make_jaxpr(fn)(*args).jaxpr.eqns
    if len(eqns) != 1 or "in_shardings" not in eqns[0].params:
        return None, None

    def read(pins):
        named = [p if isinstance(p, jax.sharding.NamedSharding) else None for p in pins]
        return named if any(p is not None for p in named) else None

    return read(eqns[0].params["in_shardings"]), read(eqns[0].params["out_shardings"])


def _reference(fn, args, mesh, ins, outs, chip):
    program = trace(fn, *args)
    fixed = {}
    for v, s in zip(program.inputs, ins or [], strict=False):
        if s is not None:
            fixed[v] = s
    for v, s in zip(program.outputs, outs or [], strict=False):
        if s is not None and isinstance(v, Value) and v not in program.annotations:
            fixed[v] = s
    prop = propagate(program, mesh, fixed)
    return prop, partition(prop, chip=chip)


def _seconds(c, chip) -> float:
    size = c.operand_bytes * (c.group_size if c.kind == "all-gather" else 1)
    return c.trips * sim.collective_time(c.kind, size, c.group_size, chip=chip)


def _match(line: int, primitive: str, at_line: dict, ours: dict):
    """The equation at `line` an XLA op named `primitive` comes from (None: none there)."""
    eqns = at_line.get(line, [])
    ranked = sorted(eqns, key=lambda e: (e.primitive != primitive, e.index not in ours))
    return ranked[0] if ranked else None


def _locate(compiled, code, xc, defined) -> int:
    frame = xc.frame or inherited_frame(xc.hlo, defined)
    where = user_line(compiled.frames.chain(frame), code)
    return where.line if where is not None else code.first


def entries(compiled, code, prop, spmd, chip) -> list[Entry]:
    ours = ours_by_equation(spmd)
    at_line: dict[int, list] = {}
    for e in prop.program.equations:
        where = user_line(equation_stack(e.eqn), code)
        at_line.setdefault(where.line if where else code.first, []).append(e)
    defined = instructions(compiled.text)
    placed = []
    for xc in compiled.collectives:
        line = _locate(compiled, code, xc, defined)
        placed.append((xc, line, _match(line, xc.primitive, at_line, ours)))
    xla_at: dict = {}
    for xc, _, eqn in placed:
        key = eqn.index if eqn is not None else None
        xla_at[key] = xla_at.get(key, 0.0) + xc.collective.wire_bytes
    found = []
    for xc, line, eqn in placed:
        mine = ours.get(eqn.index, []) if eqn is not None else []
        why = reason(eqn, prop, xla_at[eqn.index if eqn is not None else None], mine)
        c = xc.collective
        found.append(Entry(c, xc.hlo, line, eqn, _seconds(c, chip), why, tuple(mine), code.file))
    return found


def explain(
    fn, *args, mesh: Mesh | dict, in_shardings=None, out_shardings=None, chip: str = "tpu-v3"
) -> Report:
    """Every collective in XLA's compiled program for `fn(*args)` on `mesh`, on the line of
    `fn` that caused it, with its bytes, time on `chip` and the reason; plus findings (uneven
    annotations, gathers repeated in a loop, involuntary rematerialization, memory).

    Annotations are the user's own: gv.mesh_split / with_sharding_constraint inside `fn`, the
    in/out shardings of `fn` when it is a `jax.jit(f, in_shardings=..., out_shardings=...)`,
    or `in_shardings` / `out_shardings` given here as jax.jit takes them (one per flat argument
    / result: gv.Sharding, NamedSharding, PartitionSpec, spec tuple or None)."""
    mesh = mesh if isinstance(mesh, Mesh) else Mesh(mesh)
    sim.chip(chip)  # an unknown chip fails here, naming the known ones
    code = user_code(fn)
    jit_ins, jit_outs = jit_pins(fn, args)
    ins = _pins(
        mesh, in_shardings or jit_ins, len(jax.tree.leaves(args)), "in_shardings", "arguments"
    )
    n_out = len(jax.tree.leaves(jax.eval_shape(fn, *args)))
    outs = _pins(mesh, out_shardings or jit_outs, n_out, "out_shardings", "results")
    compiled = compile_program(fn, *args, mesh=mesh, in_shardings=ins, out_shardings=outs)
    prop, spmd = _reference(fn, args, mesh, ins, outs, chip)
    listed = entries(compiled, code, prop, spmd, chip)
    notes = findings(compiled, code, prop, spmd, listed, chip)
    name = getattr(fn, "__name__", type(fn).__name__)
    return Report(
        name, mesh, chip, code, tuple(listed), tuple(notes), tuple(spmd.collectives), compiled
    )
