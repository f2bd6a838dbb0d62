"""A value made from scalars alone (a broadcast constant, an iota) is made again in whatever
sharding a consumer asks for, by running its equation on that sharding's local shape: no
collective ever moves it.
# XLA: broadcasts and iotas are cheaper to recompute than to move (the partitioner reshards
#      a broadcast by broadcasting again)
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.core.partition.partitioner_state import PartitionerState
from gspmd_viz.core.program.trace import Equation, Literal, Value
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd import local_ops


def remade_from(partitioner: PartitionerState, v: Value) -> Equation | None:
    """The equation that makes v again wherever it is asked for: v's (through annotations),
    when it has one result, is known and live and reads only scalars; else None. It depends
    on the program alone: the passes' memo keeps it."""
    known = partitioner.memo.remade
    found = known.get(v, ())  # () never kept: an equation or None
    if found == ():
        found = known[v] = _remade_from(partitioner, v)
    return found


def _remade_from(partitioner: PartitionerState, v: Value) -> Equation | None:
    producer = partitioner.program.producer
    eqn = producer.get(v)
    while eqn is not None and entry_for(eqn).identity and isinstance(eqn.inputs[0], Value):
        eqn = producer.get(eqn.inputs[0])  # an annotated constant: the constant
    if eqn is None or len(eqn.outputs) != 1 or not entry_for(eqn).known:
        return None
    if any(x.shape for x in eqn.inputs) or eqn not in partitioner.live_set:
        return None
    return eqn


def remade_split(partitioner: PartitionerState, v: Value, target: Sharding):
    """(the producer's EquationSplit, its split) that computes v directly in `target`, for a
    value whose equation (through annotations) reads only scalars; None otherwise (or for
    pending sums)."""
    eqn = None if target.unreduced else remade_from(partitioner, v)
    if eqn is None:
        return None
    q = partitioner.split(eqn)
    fa = q.sanitize(q.from_tensor(q.rule.results[0], target))
    return (q, fa) if q.result_sharding(fa, 0) == target else None


def remake(partitioner: PartitionerState, v: Value, target: Sharding, how) -> str:
    """A new buffer of v in `target`, its equation run again there (`how`: remade_split's)."""
    p, (q, fa) = partitioner, how
    eqn = q.eqn
    shardings = tuple(q.operand_sharding(fa, i) for i in range(len(eqn.inputs)))
    ins = [
        x if isinstance(x, Literal) else p.buffer(x, s, eqn)
        for x, s in zip(eqn.inputs, shardings, strict=True)
    ]
    compute = local_ops.local_compute(q, ins, shardings, (target,), ())
    dst = p.fresh(v.name)
    p.instructions.append(dataclasses.replace(compute, outs=(dst,)))
    p.versions[v].append((target, dst))
    return dst
