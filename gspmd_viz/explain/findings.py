"""Findings beyond collectives, each on a line of the user's function:

- an annotation on a dim its axes do not divide (jax-ml/jax#26946): what XLA did with it
  (padded, replicated or dropped), read from the per-device shapes of the instructions on that
  line, and what it costs;
- an all-gather that runs on every trip of a loop although its operand never changes there;
- XLA's "Involuntary full rematerialization" warning (captured from the compiler's stderr), tied
  to its instruction's line, with the reshard the reference would make instead;
- the largest buffers per device against the chip's HBM;
- a contraction where XLA gathers a weight split for FSDP and the reference reduces the partial
  product for fewer bytes (core/choice/gather_or_reduce.py), with the annotation that makes
  XLA do the same.
"""

from __future__ import annotations

import math
import re

from gspmd_viz import sim
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.explain.compiled import frame_of, operands
from gspmd_viz.explain.hlo_lines import (
    buffer_bytes,
    buffers,
    loop_invariant,
    user_lines,
)
from gspmd_viz.explain.report import Finding
from gspmd_viz.explain.source import equation_stack, user_line
from gspmd_viz.units import format_bytes
from gspmd_viz.xla.compiled import computations

_REMAT = re.compile(
    r"Involuntary full rematerialization.*?from sharding (\{.*?\}) to (\{.*?\}).*?"
    r"HLO operation (%[\w.\-]+ = [^ ]+)"
)


def _line_of(value, prop, code) -> int:
    producer = prop.program.producer.get(value)
    where = user_line(equation_stack(producer.eqn), code) if producer is not None else None
    return where.line if where is not None else code.first


def _what_xla_did(shapes: list, dim: int, n: int, shards: int) -> str:
    sizes = {s[dim] for s in shapes if len(s) > dim}
    if -(-n // shards) in sizes:
        return "padded"
    if sizes and sizes <= {n}:
        return "replicated"
    return "dropped"


def uneven(compiled, code, prop, entries) -> list[Finding]:
    """Annotated dims their mesh axes do not divide."""
    on_line: dict[int, list] = {}
    for line, hlo in user_lines(compiled.text, compiled.frames, code):
        m = re.search(r"=\s*\w+\[([\d,]*)\]", hlo)
        if m:
            on_line.setdefault(line, []).append(tuple(int(n) for n in m.group(1).split(",") if n))
    boundary = sum(e.wire_bytes for e in entries if not frame_of(e.hlo))
    found = []
    for value, sharding in prop.annotations.items():
        for dim, n in enumerate(value.shape):
            shards = sharding.dim_shards(dim)
            if shards <= 1 or n % shards == 0:
                continue
            line = _line_of(value, prop, code)
            shapes = [s for s in on_line.get(line, []) if len(s) == value.ndim]
            did = _what_xla_did(shapes, dim, n, shards)
            if did == "dropped" and value in prop.program.outputs:
                did = "replicated"  # a jit result must split evenly: XLA returns it whole
            moved = (sum(e.wire_bytes for e in entries if e.line == line), boundary)
            found.append(_uneven_finding(value, sharding, dim, shards, did, moved, line))
    return found


def _uneven_finding(value, sharding, dim, shards, did, moved, line) -> Finding:
    """`moved`: (bytes of the collectives on the line, bytes of XLA's boundary reshards)."""
    n = value.shape[dim]
    row = value.dtype.itemsize * math.prod(value.shape) // n
    axes = ",".join(sharding.dim_axes(dim))
    head = f"dim {dim} of {value.name} (size {n}) is split {shards} ways over {axes}"
    head += ", which does not divide it"
    per = -(-n // shards)
    if did == "padded":
        waste = (per * shards - n) * row
        cost = f"XLA padded it to {per} per device ({format_bytes(waste)} of padding in all)"
    elif did == "replicated":
        waste = (n - per) * row
        cost = f"XLA replicated it: every device holds all {n} (+{format_bytes(waste)} each)"
    else:
        waste = 0
        cost = "XLA dropped it: no instruction on this line keeps the split"
    here, boundary = moved
    said = f"{head}; {cost}; collectives on this line move {format_bytes(here)}"
    if boundary:
        said += (
            f"; reshards XLA adds at the program's boundary (a jit argument or result must "
            f"split evenly) move {format_bytes(boundary)}"
        )
    return Finding("uneven annotation", line, said, float(waste + here + boundary))


def loop_gathers(compiled, entries) -> list[Finding]:
    """All-gathers repeated on every trip of a loop whose operand the loop never changes."""
    comps, _ = computations(compiled.text)
    owner = {line: lines for lines in comps.values() for line in lines}
    found = []
    for e in entries:
        c = e.collective
        if c.kind != "all-gather" or c.trips <= 1 or e.hlo not in owner:
            continue
        reads = operands(e.hlo)
        if reads and all(loop_invariant(owner[e.hlo], r) for r in reads):
            once = c.wire_bytes / c.trips
            found.append(
                Finding(
                    "gather in loop",
                    e.line,
                    f"{c.describe()} runs on each of {c.trips} trips, but its operand does not "
                    f"change in the loop: gathering it once before the loop moves "
                    f"{format_bytes(once)} instead of {format_bytes(c.wire_bytes)}",
                    float(c.wire_bytes - once),
                )
            )
    return found


def _suggest(mesh, src_text, dst_text, eqn) -> str:
    """The reference's reshard between the two shardings of the warning ('' if none)."""
    if eqn is None or not eqn.outputs:
        return ""
    v = eqn.outputs[0]
    try:
        src, dst = Sharding.from_hlo(mesh, src_text), Sharding.from_hlo(mesh, dst_text)
        plan = reshard_plan(src, dst, v.shape, v.dtype)
    except ValueError:  # a sharding our mesh cannot express (sub-axes)
        return ""
    steps = " -> ".join(f"{s.kind}({','.join(s.axes)})" for s in plan.steps) or "nothing"
    move = f"{v.type_text(src)} -> {v.type_text(dst)}"
    text = (
        f"the reshard {move} costs {format_bytes(plan.wire_bytes)} as {steps}; constrain "
        f"{v.name} (or what it is computed from) to {dst.to_partition_spec()} so no step "
        "needs the whole tensor"
    )
    return text


def rematerializations(compiled, code, prop, entries) -> list[Finding]:
    """XLA's "Involuntary full rematerialization" warnings, each on its instruction's line."""
    found = []
    for said in compiled.stderr.splitlines():
        m = _REMAT.search(said)
        if not m:
            continue
        src, dst, op = m.groups()
        where = user_line(compiled.frames.chain(frame_of(said)), code)
        line = where.line if where is not None else code.first
        eqn = next((e.equation for e in entries if e.line == line and e.equation), None)
        eqn = eqn or _equation_at(prop, code, line)
        fix = _suggest(prop.mesh, src, dst, eqn)
        lost = sum(e.wire_bytes for e in entries if e.line == line)
        message = (
            f"XLA could not go from {src} to {dst} for {op} without gathering the whole "
            f"tensor (collectives on this line move {format_bytes(lost)})"
        )
        found.append(
            Finding(
                "involuntary rematerialization",
                line,
                f"{message}; {fix}" if fix else message,
                float(lost),
            )
        )
    return found


def _equation_at(prop, code, line: int):
    for e in prop.program.equations:
        where = user_line(equation_stack(e.eqn), code)
        if where is not None and where.line == line and e.outputs:
            return e
    return None


def _total(memory) -> str:
    """XLA's own count of the device's arguments, results and temporaries ('' without one)."""
    if memory is None:
        return ""
    parts = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")
    total = sum(getattr(memory, p, 0) for p in parts) - getattr(memory, "alias_size_in_bytes", 0)
    return f"; arguments, results and temporaries: {format_bytes(total)}"


def largest_buffers(compiled, code, chip: str, top: int = 3) -> list[Finding]:
    """One finding on the line of the largest buffer each device holds: the `top` largest
    (each with its line) against the chip's HBM."""
    hbm, text = sim.chip(chip).hbm_bytes, compiled.text
    sized = sorted(
        (
            (buffer_bytes(hlo), line, hlo)
            for line, hlo in user_lines(text, compiled.frames, code, buffers(text))
        ),
        key=lambda t: -t[0],
    )
    listed, seen = [], set()
    for size, line, hlo in sized:
        if len(listed) == top or size == 0:
            break
        if (line, size) not in seen:
            seen.add((line, size))
            typed = hlo.split("=", 1)[1].split()[0].split("{")[0]
            listed.append((size, line, f"{typed} {format_bytes(size)} (line {line})"))
    if not listed:
        return []
    size, line, _ = listed[0]
    biggest = "; ".join(text for _, _, text in listed)
    message = (
        f"largest buffers per device: {biggest}; the largest is {100 * size / hbm:.2g}% of "
        f"{chip}'s {format_bytes(hbm)} HBM{_total(compiled.memory)}"
    )
    return [Finding("memory", line, message, float(size))]


def gathered_weights(code, prop, spmd, entries) -> list[Finding]:
    """Contractions where the reference reduces the partial product (spmd.choices) and XLA's
    program moves more bytes there: it gathers the weight, as at a training batch."""
    found = []
    for choice in spmd.choices:
        at = [e for e in entries if e.equation is not None and e.equation.index == choice.eqn]
        xla_here = sum(e.wire_bytes for e in at)
        if choice.kept != "reduce" or xla_here <= choice.reduce.wire_bytes:
            continue
        eqn = prop.program.equations[choice.eqn]
        where = user_line(equation_stack(eqn.eqn), code)
        message = (
            f"XLA's program moves {format_bytes(xla_here)} at this {choice.primitive} (it "
            f"gathers {choice.gathered} over {choice.axis}); the reference reduces the partial "
            f"product instead, {format_bytes(choice.reduce.wire_bytes)} "
            f"({choice.moved_to_text()}): annotating it so before this line makes XLA reduce too"
        )
        line = where.line if where is not None else code.first
        found.append(Finding("gather or reduce", line, message, xla_here))
    return found


def findings(compiled, code, prop, spmd, entries, chip: str) -> list[Finding]:
    return (
        uneven(compiled, code, prop, entries)
        + loop_gathers(compiled, entries)
        + rematerializations(compiled, code, prop, entries)
        + gathered_weights(code, prop, spmd, entries)
        + largest_buffers(compiled, code, chip)
    )
