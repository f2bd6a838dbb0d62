"""Loops in the partitioner: a loop's region of the flat program becomes one RunLoop whose
body is partitioned once (so partitioning time does not grow with the trip count).

The carried values keep one sharding on entry, in the body and on exit (propagation settled
it on the loop's data-flow edges): the initial value is resharded to it before the loop, the
body's result back to it at the end of the body (inside the loop: per trip). Stacked `xs`
enter with their scanned dim whole and the body's sharding on the others; each iteration's
`y` leaves in its propagated sharding and is stacked the same way. A reshard of a loop
constant (a weight the body reads) is the same every trip: it runs once, before the loop.
# XLA: SpmdPartitioningVisitor::HandleWhile (operand, parameter, root and result share one
#      sharding; the body is partitioned once); WhileLoopInvariantCodeMotion hoists gathers
"""

from collections.abc import Iterator

from gspmd_viz.core.partition.partitioner_state import PartitionerState
from gspmd_viz.core.program.trace import Cond, Equation, Loop, Program, Value
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd.instructions import Compute, Reshard
from gspmd_viz.core.spmd.loops_branches import RunCond, RunLoop, defines


def units(program: Program, span: range) -> Iterator[Equation | Loop | Cond]:
    """The equations of `span` in order, each outermost loop or cond region as one unit."""
    i = span.start
    while i < span.stop:
        region = program.region_at.get(i)
        yield region if region is not None else program.equations[i]
        i = region.region.stop if region is not None else i + 1


def unit_outputs(unit) -> set:
    if isinstance(unit, Loop):
        return {c.final for c in unit.carries} | {s for _, s in unit.ys}
    if isinstance(unit, Cond):
        return {out for _, out in unit.results}
    return set(unit.outputs)


def unit_inputs(unit) -> set:
    if isinstance(unit, Loop):
        operands = [o for o, _ in unit.consts] + [c.init for c in unit.carries]
        operands += [o for o, _ in unit.xs]
    elif isinstance(unit, Cond):
        operands = [unit.selector] + [o for o, _ in unit.operands]
    else:
        return set(unit.value_inputs)
    return {v for v in operands if isinstance(v, Value)}


def live_units(program: Program, span: range, needed: set) -> list:
    """The units some needed value depends on (dead code would still cost collectives)."""
    needed, keep = set(needed), []
    for unit in reversed(list(units(program, span))):
        if isinstance(unit, Equation):  # most units: no sets made of their values
            if not needed.isdisjoint(unit.outputs):
                keep.append(unit)
                needed.update([v for v in unit.inputs if isinstance(v, Value)])
        elif needed & unit_outputs(unit):
            keep.append(unit)
            needed |= unit_inputs(unit)
    return keep[::-1]


def _stacked(s: Sharding) -> Sharding:
    """The sharding of a stacked value whose slices have sharding s (scanned dim whole)."""
    return Sharding(s.mesh, ((), *s.spec))


def _propagated(p: PartitionerState, v) -> Sharding:
    return Sharding(p.mesh, p.prop.sharding(v).spec)


def _inside(p: PartitionerState, span: range, params, needed) -> list:
    """Partition `span` as its own instruction list (the body or condition of a loop): each
    parameter enters in its own buffer and sharding; returns the instructions and buffers."""
    outer, p.instructions = p.instructions, []
    for v, s in params:
        p.versions[v] = [(s, v.name)]
    p.partition_units(live_units(p.program, span, {v for v, _ in needed if isinstance(v, Value)}))
    edge = p.program.producer
    names = [p.buffer(v, s, edge.get(v)) for v, s in needed]
    inner, p.instructions = p.instructions, outer
    return inner, names


def hoisted(p: PartitionerState, instructions: list, invariant: set[str]) -> tuple:
    """`instructions` without the reshards (and annotations) of loop-invariant buffers
    (`invariant`, and what those make), which go to `p.instructions`, before the loop: once,
    not per trip.  # [64@x, 32] -> all-gather(x) -> [64, 32]: outside the loop"""
    kept = []
    for ins in instructions:
        if _moves_out(ins, invariant.__contains__):
            p.held += ins.plan.wire_bytes if isinstance(ins, Reshard) else 0
            p.instructions.append(ins)
            invariant.update(defines(ins))
        else:
            kept.append(ins)
    return tuple(kept)


def _moves_out(ins, before) -> bool:
    """Does `ins` run before the loop: a reshard, or an annotation, of buffers `before` says
    are made there?"""
    if isinstance(ins, Reshard):
        return before(ins.src)
    return _annotation(ins) and all(isinstance(n, str) and before(n) for n in ins.ins)


def runs_once(p: PartitionerState, name: str) -> bool:
    """Is buffer `name` made before the loop whose body `p` is partitioning: a loop constant,
    or what `hoisted` will move out? Then a reshard of it costs its bytes once, not once per
    trip."""
    if name in p.invariant:
        return True
    made = next((ins for ins in reversed(p.instructions) if name in defines(ins)), None)
    return made is not None and _moves_out(made, lambda n: runs_once(p, n))


def _annotation(ins) -> bool:
    """A local op that computes nothing (sharding_constraint and the like)."""
    return isinstance(ins, Compute) and entry_for(ins.eqn).identity


def partition_loop(p: PartitionerState, loop: Loop) -> RunLoop:
    """The RunLoop for `loop`; `p` is the Partitioner (its buffers, versions, instructions)."""
    edge, carried = p.program.producer, [_propagated(p, c.param) for c in loop.carries]
    for outer, param in loop.consts:
        p.versions[param] = [(_propagated(p, param), p.buffer(outer, _propagated(p, param), None))]
    invariant = {p.versions[param][0][1] for _, param in loop.consts}
    init = [p.buffer(c.init, s, edge[c.param]) for c, s in zip(loop.carries, carried, strict=True)]
    sliced = [_propagated(p, x) for _, x in loop.xs]
    xs = [p.buffer(o, _stacked(s), edge[x]) for (o, x), s in zip(loop.xs, sliced, strict=True)]
    ys_sh = [Sharding(p.mesh, p.prop.sharding(s).spec[1:]) for _, s in loop.ys]
    params = [(c.param, s) for c, s in zip(loop.carries, carried, strict=True)]
    params += [(x, s) for (_, x), s in zip(loop.xs, sliced, strict=True)]
    needed = [(c.result, s) for c, s in zip(loop.carries, carried, strict=True)]
    needed += [(y, s) for (y, _), s in zip(loop.ys, ys_sh, strict=True)]
    outer = p.invariant, p.trips
    p.invariant, p.trips = set(invariant), loop.trips
    body, names = _inside(p, loop.body, params, needed)
    cond, pred = (), None
    if loop.pred is not None:  # the predicate is replicated: every device takes the same branch
        cparams = list(zip(loop.cond_params, carried, strict=True))
        cond, (pred,) = _inside(p, loop.cond, cparams, [(loop.pred, Sharding(p.mesh, ()))])
    p.invariant, p.trips = outer
    body = hoisted(p, body, invariant)
    cond = hoisted(p, cond, invariant)
    for c, s in zip(loop.carries, carried, strict=True):
        p.versions[c.final] = [(s, c.final.name)]
    for (_, st), s in zip(loop.ys, ys_sh, strict=True):
        p.versions[st] = [(_stacked(s), st.name)]
    return _run_loop(loop, init, xs, body, names, carried, cond, pred)


def _run_loop(loop: Loop, init, xs, body, names, carried, cond, pred) -> RunLoop:
    """The RunLoop record: the loop's buffers by name (`names`: the body's results, the carried
    ones first), its partitioned body and condition."""
    nk = len(loop.carries)
    return RunLoop(
        loop=loop,
        init=tuple(init),
        xs=tuple(xs),
        carried=tuple(c.param.name for c in loop.carries),
        sliced=tuple(x.name for _, x in loop.xs),
        body=tuple(body),
        carry_out=tuple(names[:nk]),
        y_out=tuple(names[nk:]),
        final=tuple(c.final.name for c in loop.carries),
        ys=tuple(st.name for _, st in loop.ys),
        carry_shardings=tuple(carried),
        cond=tuple(cond),
        cond_carried=tuple(v.name for v in loop.cond_params),
        pred=pred,
    )


def partition_cond(p: PartitionerState, cond: Cond) -> RunCond:
    """The RunCond for `cond`: each branch partitioned once; a branch parameter is its operand
    (every version of it already made), so a branch reshards only what it uses, inside the
    branch; its results leave in the cond result's propagated sharding (every branch hands
    back the same layout)."""
    selector = p.buffer(cond.selector, Sharding(p.mesh, ()), None)
    operands = []
    for op, _ in cond.operands:
        if not isinstance(op, Value):  # a literal operand: one replicated buffer
            op_buffer = p.buffer(op, Sharding(p.mesh, ()), None)
            op = Value(-1, op.shape, op.dtype, op_buffer)
            p.versions[op] = [(Sharding(p.mesh, ()), op_buffer)]
        operands.append(op)
    outs = [_propagated(p, out) for _, out in cond.results]
    branches, results = [], []
    for b, span in enumerate(cond.branches):
        for op, (_, ps) in zip(operands, cond.operands, strict=True):
            p.versions[ps[b]] = list(p.versions[op])
        needed = [(rs[b], s) for (rs, _), s in zip(cond.results, outs, strict=True)]
        body, names = _inside(p, span, [], needed)
        branches.append(tuple(body))
        results.append(tuple(names))
    for (_, out), s in zip(cond.results, outs, strict=True):
        p.versions[out] = [(s, out.name)]
    final = tuple(out.name for _, out in cond.results)
    return RunCond(cond, selector, tuple(branches), tuple(results), final, tuple(outs))
