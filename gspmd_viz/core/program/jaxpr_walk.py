"""Walking a jaxpr into flat records: calls inlined (their boundary kept as a Call),
`mesh_split` annotations read back as fixed shardings, `scan`, `while` and `cond` kept as
regions (records.Loop, records.Cond) whose bodies are walked once.
"""

from __future__ import annotations

import itertools

import jax.extend.core as jex
import numpy as np

from gspmd_viz.core.program import slice_of_pad, split_as_slices
from gspmd_viz.core.program.records import (
    CONSTRAINT,
    Call,
    Carry,
    Cond,
    Equation,
    Literal,
    Loop,
    Value,
)
from gspmd_viz.core.sharding.mesh_split import read_annotation
from gspmd_viz.core.sharding.sharding import Sharding, as_dtype

# Call-like primitives whose body we inline, and the param holding the body. jax 0.10.2 names
# jax.checkpoint `remat2`; a custom_vjp under remat with optimize_remat binds `remat_opt`, whose
# forward body returns the outputs and residuals it declares.
INLINED = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",  # the primal body; the jvp rule is not needed here
    "custom_vjp_call": "call_jaxpr",
    "checkpoint": "jaxpr",
    "remat": "jaxpr",
    "remat2": "jaxpr",
    "remat_opt": "fwd_jaxpr",
}
# Primitives gv.trace writes as others (the way jax lowers them for XLA), and as what
TRACED_AS = {"split": "one slice per piece (split_as_slices)"}
# x op x for an integer or bool x: the constant it always is
_SELF_COMPARE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}
# Control flow we do not model (its body would need its own propagation), and what to do.
_PER_DEVICE = "it is already per-device code: trace the global function instead"
REJECTED = {
    "shard_map": _PER_DEVICE,
    "pmap": _PER_DEVICE,
    "xla_pmap": _PER_DEVICE,
}


def _names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


class ProgramBuilder:
    """Walks a jaxpr, inlining calls, assigning Values in program order."""

    def __init__(self):
        self.names = _names()
        self.count = itertools.count()
        self.equations: list[Equation] = []
        self.annotations: dict[Value, Sharding] = {}
        self.open_dims: dict[Value, frozenset[int]] = {}  # P.UNCONSTRAINED dims, left open
        self.annotated: dict[Value, Value] = {}  # an annotation's output -> the value it annotates
        self.calls: list[Call] = []
        self.scope: list[int] = []  # the calls being inlined, outermost first
        self.loops: list[Loop] = []
        self.conds: list[Cond] = []
        self.body_start = 0  # first equation of the loop or branch body being walked

    def new_value(self, aval) -> Value:
        return Value(
            next(self.count),
            tuple(int(n) for n in aval.shape),
            as_dtype(aval.dtype),
            next(self.names),
        )

    def read(self, env, atom):
        if isinstance(atom, jex.Literal):
            value = atom.val
            return Literal(value, tuple(np.shape(value)), as_dtype(atom.aval.dtype))
        return env[atom]

    def walk(self, jaxpr, consts, args) -> list:
        env: dict = {}
        for var, c in zip(jaxpr.constvars, consts, strict=True):
            env[var] = Literal(c, tuple(np.shape(c)), as_dtype(var.aval.dtype))
        env.update(zip(jaxpr.invars, args, strict=True))
        for eqn in jaxpr.eqns:
            self.equation(env, eqn)
        return [self.read(env, v) for v in jaxpr.outvars]

    def equation(self, env, eqn) -> None:
        name = eqn.primitive.name
        ins = [self.read(env, v) for v in eqn.invars]
        if name in INLINED:
            env.update(zip(eqn.outvars, self.inline(eqn, ins), strict=True))
            return
        if name == "cond":
            env.update(zip(eqn.outvars, self.cond(eqn, ins), strict=True))
            return
        if name in ("scan", "while"):
            outs = self.scan(eqn, ins) if name == "scan" else self.while_loop(eqn, ins)
            env.update(zip(eqn.outvars, outs, strict=True))
            return
        if name in REJECTED:
            operands = ", ".join(repr(v) for v in ins) or "no operands"
            raise NotImplementedError(
                f"gv.trace does not model primitive {name!r} (here on {operands}): {REJECTED[name]}"
            )
        simpler = self.simplified(name, ins, eqn)
        if simpler is not None:
            env[eqn.outvars[0]] = simpler
            return
        if name in TRACED_AS:  # split: one slice per piece
            pieces = split_as_slices.as_slices(ins[0], eqn.params)
            env.update(zip(eqn.outvars, self.walk(pieces.jaxpr, pieces.consts, ins), strict=True))
            return
        found = slice_of_pad.rewrite(self.producer(ins[0]), eqn.params) if name == "slice" else None
        if found is not None:  # slice(pad(x)) -> pad(slice(x))
            env[eqn.outvars[0]] = self.walk(found[0].jaxpr, found[0].consts, found[1])[0]
            return
        outs = [self.new_value(v.aval) for v in eqn.outvars]
        env.update(zip(eqn.outvars, outs, strict=True))
        e = self.emit(name, ins, outs, dict(eqn.params), eqn)
        if name == CONSTRAINT:
            self.annotate(e)

    def simplified(self, name, ins, eqn):
        """What an equation is without computing it, or None (# XLA: AlgebraicSimplifier):
        an update that overwrites all is the result (its operand is never read); an integer
        or bool compared with itself (through annotations) is a constant."""
        if name == "dynamic_update_slice" and ins[1].shape == ins[0].shape:
            return ins[1]
        if name not in _SELF_COMPARE or not all(isinstance(v, Value) for v in ins):
            return None
        a, b = (self.annotated.get(v, v) for v in ins)
        if a is not b or np.issubdtype(a.dtype, np.inexact):  # a NaN is not equal to itself
            return None
        shape = tuple(int(n) for n in eqn.outvars[0].aval.shape)
        return Literal(np.full(shape, _SELF_COMPARE[name]), shape, np.dtype(bool))

    def body(self, jaxpr, consts, args) -> list:
        """Walk a loop's or a branch's body: a value from outside is no producer inside."""
        outer, self.body_start = self.body_start, len(self.equations)
        try:
            return self.walk(jaxpr, consts, args)
        finally:
            self.body_start = outer

    def producer(self, v) -> Equation | None:
        """The equation of this body whose result v is (None: an input, a constant, or a
        value from outside the loop or branch being walked)."""
        inside = self.equations[self.body_start :]
        return next((e for e in reversed(inside) if e is not None and v in e.outputs), None)

    def emit(self, name, ins, outs, params=None, eqn=None, at=None) -> Equation:
        """Append an equation (or fill the slot `at` reserved earlier)."""
        call = self.scope[-1] if self.scope else None
        index = len(self.equations) if at is None else at
        e = Equation(index, name, tuple(ins), tuple(outs), params or {}, eqn, call)
        if at is None:
            self.equations.append(e)
        else:
            self.equations[at] = e
        return e

    def scan(self, eqn, ins) -> list:
        """`scan` as one region: entry edges, the body once, exit edges (see records.Loop)."""
        p, body = eqn.params, eqn.params["jaxpr"]
        nc, nk = p["num_consts"], p["num_carry"]
        first = len(self.equations)
        params = [self.new_value(v.aval) for v in body.jaxpr.invars]
        for outer, param in zip(ins[:nc], params[:nc], strict=True):
            self.emit("loop_const", [outer], [param])
        finals = [self.new_value(v.aval) for v in eqn.outvars[:nk]]
        carry_slots = self.reserve(nk)
        for outer, param in zip(ins[nc + nk :], params[nc + nk :], strict=True):
            self.emit("loop_slice", [outer], [param])
        start = len(self.equations)
        results = self.body(body.jaxpr, body.consts, params)
        stop = len(self.equations)
        # ins[nc:] holds the carries then the xs: zip keeps the first nk
        carries = tuple(map(Carry._make, zip(ins[nc:], params[nc:], results, finals, strict=False)))
        for slot, (init, param, result, final) in zip(carry_slots, carries, strict=True):
            self.emit("loop_carry", [init, result], [param, final], at=slot)
        ys = [self.new_value(v.aval) for v in eqn.outvars[nk:]]
        for y, stacked in zip(results[nk:], ys, strict=True):
            self.emit("loop_stack", [y], [stacked], {"length": p["length"]})
        loop = Loop(
            len(self.loops), "scan", range(first, len(self.equations)), range(start, stop),
            p["length"], p["reverse"], tuple(zip(ins[:nc], params[:nc], strict=True)), carries,
            tuple(zip(ins[nc + nk :], params[nc + nk :], strict=True)),
            tuple(zip(results[nk:], ys, strict=True)),
        )  # fmt: skip
        self.loops.append(loop)
        return finals + ys

    def inline(self, eqn, ins) -> list:
        """Walk a call's body in place, recording its boundary as a Call."""
        name = eqn.primitive.name
        body = eqn.params[INLINED[name]]
        index, first = len(self.calls), len(self.equations)
        parent = self.scope[-1] if self.scope else None
        self.calls.append(None)  # reserved, so nested calls number after this one
        self.scope.append(index)
        outs = self.walk(getattr(body, "jaxpr", body), getattr(body, "consts", []), ins)
        self.scope.pop()
        label = str(eqn.params.get("name") or _function_name(body) or name)
        span = range(first, len(self.equations))
        fresh = bool(eqn.params.get("prevent_cse", False))
        self.calls[index] = Call(index, name, label, parent, span, tuple(ins), tuple(outs), fresh)
        return outs

    def reserve(self, n: int) -> list[int]:
        """n equation slots, filled once the loop's body results exist."""
        self.equations += [None] * n
        return list(range(len(self.equations) - n, len(self.equations)))

    def while_loop(self, eqn, ins) -> list:
        """`while` as one region: const and carry edges, the condition once, the body once."""
        p, cj, bj = eqn.params, eqn.params["cond_jaxpr"], eqn.params["body_jaxpr"]
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        first, init = len(self.equations), ins[cn + bn :]
        cparams = [self.new_value(v.aval) for v in cj.jaxpr.invars]
        bparams = [self.new_value(v.aval) for v in bj.jaxpr.invars]
        consts = list(zip(ins[:cn], cparams[:cn], strict=True))
        consts += zip(ins[cn : cn + bn], bparams[:bn], strict=True)
        for outer, param in consts:
            self.emit("loop_const", [outer], [param])
        finals = [self.new_value(v.aval) for v in eqn.outvars]
        slots = self.reserve(len(init))
        start = len(self.equations)
        (pred,) = self.body(cj.jaxpr, cj.consts, cparams)
        middle = len(self.equations)
        results = self.body(bj.jaxpr, bj.consts, bparams)
        carries = tuple(map(Carry._make, zip(init, bparams[bn:], results, finals, strict=True)))
        for slot, (i, b, r, f), c in zip(slots, carries, cparams[cn:], strict=True):
            self.emit("loop_carry", [i, r], [b, c, f], at=slot)
        loop = Loop(
            len(self.loops), "while", range(first, len(self.equations)),
            range(middle, len(self.equations)), 1, False, tuple(consts), carries, (), (),
            range(start, middle), tuple(cparams[cn:]), pred,
        )  # fmt: skip
        self.loops.append(loop)
        return finals

    def cond(self, eqn, ins) -> list:
        """`cond` as one region: operand edges, every branch once, result edges."""
        branches, (selector, *operands) = eqn.params["branches"], ins
        first = len(self.equations)
        params = [[self.new_value(v.aval) for v in b.jaxpr.invars] for b in branches]
        for k, op in enumerate(operands):
            self.emit("branch_operand", [op], [ps[k] for ps in params])
        spans, results = [], []
        for b, ps in zip(branches, params, strict=True):
            start = len(self.equations)
            results.append(self.body(b.jaxpr, b.consts, ps))
            spans.append(range(start, len(self.equations)))
        outs = [self.new_value(v.aval) for v in eqn.outvars]
        for j, out in enumerate(outs):
            self.emit("branch_result", [r[j] for r in results], [out])
        ops = tuple((op, tuple(ps[k] for ps in params)) for k, op in enumerate(operands))
        ress = tuple((tuple(r[j] for r in results), out) for j, out in enumerate(outs))
        span = range(first, len(self.equations))
        self.conds.append(Cond(len(self.conds), span, tuple(spans), selector, ops, ress))
        return outs

    def annotate(self, e: Equation) -> None:
        out = e.outputs[0]
        self.annotations[out], self.open_dims[out] = read_annotation(e.params["sharding"])
        if isinstance(e.inputs[0], Value):
            self.annotated[out] = self.annotated.get(e.inputs[0], e.inputs[0])
        self.annotations[out].check_rank(out.ndim)


def _function_name(body) -> str | None:
    """The name of the Python function a call's body was traced from, when jax kept it."""
    info = getattr(getattr(body, "jaxpr", body), "debug_info", None)
    return getattr(info, "func_name", None)
