"""Equations the chooser cannot tell apart: transformer layers repeat, so layer 2's equations
are costed as layer 1's were, and a choice made for one answers for its twin.

`signature(p, eqn)` holds everything choose_split.choose reads of an equation but the layouts
its values exist in: its primitive, params, shapes, rules and propagated splits, what decides
what its results' readers ask for (Partitioner.wanted: their rules and splits), its results'
only readers one step ahead (lookahead.handoff_cost: their rules, splits, propagated operands,
what decides what their results' readers ask for), which operands are made again from scalars
rather than moved (remake_scalars), and which of these values are the same value.
`roles(p, eqn)` lists the values whose layouts the choice may read, each named by its place
(an operand, a result, an operand of a result's only reader): a twin holding the values in
the same places in the same layouts gets the same choice.
# XLA has no counterpart: its partitioner walks every instruction; the cost model is ours
"""

from __future__ import annotations

from gspmd_viz.core.choice.choose_split import frozen
from gspmd_viz.core.partition.lookahead import sole_reader
from gspmd_viz.core.partition.partitioner_state import PartitionerState
from gspmd_viz.core.partition.remake_scalars import remade_from
from gspmd_viz.core.program.trace import Equation, Value

__all__ = ["follow_key", "placed", "roles", "signature", "static"]


def signature(p: PartitionerState, eqn: Equation) -> int:
    """The equation as the chooser sees it, layouts apart, as a number (one per distinct
    signature in the memo; made once per equation). Its parts are numbered alike (`_number`),
    so equal signatures are equal part by part."""
    known = p.memo.signatures
    found = known.get(eqn)
    if found is None:
        ids = list(map(id, roles(p, eqn)))
        same = tuple(map(ids.index, ids))  # which places hold one value: each one's first
        outs = tuple([_result_view(p, v) for v in eqn.outputs])
        found = known[eqn] = _number(p, (static(p, eqn), same, _remade_ins(p, eqn), outs))
    return found


def _number(p: PartitionerState, key: tuple) -> int:
    """key's number in the memo (a new one for a key not met before)."""
    numbers = p.memo.signature_numbers
    return numbers.setdefault(key, len(numbers))


def follow_key(p: PartitionerState, eqn: Equation) -> int:
    """All follow_xla.result_driven reads of an equation: the equation alone and the shardings
    its operands were propagated, as a number (made once per memo: the follow pass and the
    greedy pass's replay check both ask at every equation)."""
    known = p.memo.follow_keys
    found = known.get(eqn)
    if found is None:
        held = p.prop.shardings
        ins = tuple([held[x] if isinstance(x, Value) else None for x in eqn.inputs])
        found = known[eqn] = _number(p, ("follow", static(p, eqn), ins))
    return found


def roles(p: PartitionerState, eqn: Equation) -> list:
    """The equation's operands, its results, then each result's only reader's operands (made
    once per memo: every pass asks at every equation)."""
    known = p.memo.roles
    found = known.get(eqn)
    if found is None:
        found = [*eqn.inputs, *eqn.outputs]
        for v in eqn.outputs:
            reader = sole_reader(p, v)
            found += reader[0].eqn.inputs if reader else ()
        known[eqn] = found
    return found


def placed(values: list, read) -> tuple[int, ...] | None:
    """The (first) place of each value in `read` among `values` (roles), or None if one has
    none."""
    ids = list(map(id, values))
    try:
        return tuple([ids.index(id(v)) for v in read])
    except ValueError:  # a value read that holds no place
        return None


def static(p: PartitionerState, eqn: Equation) -> int:
    """The equation alone (its kind: primitive, params, operand and result types, which
    decide its rules; Program.kinds) with its splits, as a number (made once per memo: an
    equation is also its producer's reader and its readers' remade operand's producer).
    Equations of one number differ only in their values' names: a split's local op made for
    one is the other's (Partitioner.applied)."""
    known = p.memo.statics
    found = known.get(eqn)
    if found is None:
        found = known[eqn] = _number(p, ("static", *_made_static(p, eqn)))
    return found


def _made_static(p: PartitionerState, eqn: Equation) -> tuple:
    splits = p.splits(eqn)
    return (
        p.program.kinds[eqn],
        tuple([(frozen(q.settled), q.propagated) for q in splits]),
        eqn in p.live_set,
        eqn in p.deferred,
    )


def _result_view(p: PartitionerState, v: Value) -> tuple:
    """What a result's readers ask for, and its only reader as lookahead weighs it (where
    it reads v, and the reader)."""
    reader = sole_reader(p, v)
    return (_asked_view(p, v), reader and (reader[1], _reader_view(p, reader[0].eqn)))


def _asked_view(p: PartitionerState, v: Value) -> int:
    """What decides what v's readers ask for (Partitioner.wanted), without working it out:
    v's propagated sharding if it is an output, and per consumer its place and, for a
    rotation's slice, the sharding the rotation's result holds; for a live one, the consumer
    alone (its rules and splits give the operand it will likely read). Made once per memo,
    as a number."""
    known = p.memo.asked_views
    found = known.get(v)
    if found is None:
        found = known[v] = _number(p, _made_asked_view(p, v))
    return found


def _made_asked_view(p: PartitionerState, v: Value) -> tuple:
    found = [p.prop.sharding(v) if v in p.outputs else None]
    for eqn, pos in p.program.consumers.get(v, ()):
        if eqn in p.deferred:
            found.append((pos, p.prop.sharding(p.deferred[eqn].concat.outputs[0])))
        elif eqn in p.live_set:
            found.append((pos, static(p, eqn)))
    return tuple(found)


def _reader_view(p: PartitionerState, eqn: Equation) -> int:
    """An only reader as lookahead weighs it (itself, its operands' propagated shardings,
    which are made again from scalars, what its results' readers ask for), as a number:
    made once per memo."""
    known = p.memo.reader_views
    found = known.get(eqn)
    if found is None:
        held, ins = p.prop.shardings, eqn.inputs
        view = (
            "reader",
            static(p, eqn),
            tuple([held[u] if isinstance(u, Value) else None for u in ins]),
            _remade_ins(p, eqn),
            tuple([_asked_view(p, w) for w in eqn.outputs]),
        )
        found = known[eqn] = _number(p, view)
    return found


def _remade_ins(p: PartitionerState, eqn: Equation) -> tuple:
    """_remade_view of each operand (made once per memo: the equation's signature and its
    producers' read it)."""
    known = p.memo.remade_ins
    found = known.get(eqn)
    if found is None:
        found = known[eqn] = tuple([_remade_view(p, x) for x in eqn.inputs])
    return found


def _remade_view(p: PartitionerState, x) -> tuple | None:
    """For a value made again from scalars wherever it is asked for: its producer, alone."""
    producer = remade_from(p, x) if isinstance(x, Value) else None
    return producer and static(p, producer)
