"""`gv.trace`: a small frozen program form over a jaxpr.

A Program is a flat list of equations over Values (nested `jit` and custom-derivative calls
are inlined, their boundaries kept in `calls`), with the `mesh_split` annotations read back as
fixed shardings. Everything the propagation and the partitioner need, and a pretty-printer that
shows each value's sharding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jax
import jax.numpy as jnp

from gspmd_viz.core.program.jaxpr_walk import ProgramBuilder
from gspmd_viz.core.program.records import (
    CONSTRAINT,
    Call,
    Cond,
    Equation,
    Literal,
    Loop,
    Value,
    equation_key,
)
from gspmd_viz.core.sharding.mesh import Mesh

__all__ = ["Call", "Cond", "Equation", "Literal", "Loop", "Program", "Value", "trace"]


def _read(env: dict, v, typed: bool = False):
    """A value's array in `env`, or a Literal's value (typed: as an array of its dtype, since
    a loop carry must keep its type across iterations)."""
    if isinstance(v, Literal):
        return jnp.asarray(v.value, v.dtype) if typed else v.value
    return env[v]


@dataclass(frozen=True, eq=False)
class Program:
    inputs: tuple[Value, ...]
    outputs: tuple[Value | Literal, ...]
    equations: tuple[Equation, ...]
    annotations: dict  # Value -> Sharding, fixed by mesh_split / sharding_constraint
    mesh: Mesh | None
    in_tree: Any = field(repr=False)
    out_tree: Any = field(repr=False)
    calls: tuple[Call, ...] = ()  # the inlined calls, outermost first
    loops: tuple[Loop, ...] = ()  # scans and whiles kept as regions of `equations`
    conds: tuple[Cond, ...] = ()  # conds kept as regions of `equations`
    open_dims: dict = field(default_factory=dict, repr=False)  # Value -> P.UNCONSTRAINED dims

    # --- structure --------------------------------------------------------------------
    @cached_property
    def values(self) -> tuple[Value, ...]:
        """Every value, inputs first then equation outputs, in program order."""
        return self.inputs + tuple(v for e in self.equations for v in e.outputs)

    @cached_property
    def producer(self) -> dict[Value, Equation]:
        return {v: e for e in self.equations for v in e.outputs}

    @cached_property
    def consumers(self) -> dict[Value, tuple[tuple[Equation, int], ...]]:
        """value -> ((equation, operand position), ...) in program order."""
        uses: dict[Value, list] = {v: [] for v in self.values}
        for e in self.equations:
            for pos, v in enumerate(e.inputs):
                if isinstance(v, Value):
                    uses[v].append((e, pos))
        return {v: tuple(u) for v, u in uses.items()}

    def value(self, name: str) -> Value:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(f"no value named {name!r} in this program")

    # --- running ----------------------------------------------------------------------
    def flatten_args(self, *args) -> list:
        leaves, tree = jax.tree.flatten(args)
        if tree != self.in_tree:
            raise ValueError(
                f"arguments have structure {tree}, the program was traced with {self.in_tree}"
            )
        return leaves

    def evaluate(self, *flat_args, scope: bool = False, annotated: bool = True) -> list:
        """Run the equations one by one (under `named_scope(f"eqn{i}")` when scope=True;
        with annotated=False every annotation passes its operand through unconstrained)."""
        env: dict[Value, Any] = dict(zip(self.inputs, flat_args, strict=True))
        self._run(range(len(self.equations)), env, scope, annotated)
        return [_read(env, v) for v in self.outputs]

    @cached_property
    def kinds(self) -> dict[Equation, int]:
        """Equation -> a number shared by the equations that differ only in their values'
        names (records.equation_key): transformer layers repeat, and what is worked out for
        one equation from itself alone (its factor rule, a split's local op) is its twin's."""
        numbers: dict[tuple, int] = {}
        return {e: numbers.setdefault(equation_key(e), len(numbers)) for e in self.equations}

    @cached_property
    def region_at(self) -> dict[int, Loop | Cond]:
        """first equation index of a loop's or cond's region -> the loop or cond"""
        return {r.region.start: r for r in (*self.loops, *self.conds)}

    def _run(self, span: range, env: dict, scope: bool, annotated: bool) -> None:
        i = span.start
        while i < span.stop:
            region = self.region_at.get(i)
            if region is not None:
                run = self._run_loop if isinstance(region, Loop) else self._run_cond
                run(region, env, scope, annotated)
                i = region.region.stop
                continue
            e = self.equations[i]
            args = [_read(env, v) for v in e.inputs]
            if not annotated and e.primitive == CONSTRAINT:
                outs = args
            elif not annotated and e.primitive in FIRST_START:  # the oracle: XLA folds wrongly
                outs = e.bind(*clamped_starts(e.primitive, args, e.params))
            elif scope:
                with jax.named_scope(f"eqn{e.index}"):
                    outs = e.bind(*args)
            else:
                outs = e.bind(*args)
            env.update(zip(e.outputs, outs, strict=True))
            i += 1

    def _run_loop(self, loop: Loop, env: dict, scope: bool, annotated: bool) -> None:
        """One lax.scan (or lax.while_loop) whose step runs the body's equations."""

        def run(span, params, values) -> dict:
            inner = {**env, **{p: _read(env, o) for o, p in loop.consts}}
            inner.update(zip(params, values, strict=True))
            self._run(span, inner, scope, annotated)
            return inner

        carried = [c.param for c in loop.carries]
        init = [_read(env, c.init, typed=True) for c in loop.carries]
        if loop.primitive == "while":
            inner = lambda carry: run(loop.body, carried, carry)  # noqa: E731
            final = jax.lax.while_loop(
                lambda carry: _read(run(loop.cond, loop.cond_params, carry), loop.pred),
                lambda carry: [_read(inner(carry), c.result, typed=True) for c in loop.carries],
                init,
            )
            env.update(zip((c.final for c in loop.carries), final, strict=True))
            return

        def step(carry, x):
            inner = run(loop.body, carried + [p for _, p in loop.xs], [*carry, *x])
            carry = [_read(inner, c.result, typed=True) for c in loop.carries]
            return carry, [_read(inner, y, typed=True) for y, _ in loop.ys]

        xs = [_read(env, o) for o, _ in loop.xs]
        final, ys = jax.lax.scan(step, init, xs, length=loop.trips, reverse=loop.reverse)
        env.update(zip((c.final for c in loop.carries), final, strict=True))
        env.update(zip((s for _, s in loop.ys), ys, strict=True))

    def _run_cond(self, cond: Cond, env: dict, scope: bool, annotated: bool) -> None:
        """One lax.switch whose branches run their equations."""

        def branch(b: int):
            def run():
                inner = {**env, **{ps[b]: _read(env, op) for op, ps in cond.operands}}
                self._run(cond.branches[b], inner, scope, annotated)
                return [_read(inner, rs[b], typed=True) for rs, _ in cond.results]

            return run

        index = _read(env, cond.selector)
        outs = jax.lax.switch(index, [branch(b) for b in range(len(cond.branches))])
        env.update(zip((out for _, out in cond.results), outs, strict=True))

    def __call__(self, *args):
        flat = self.evaluate(*self.flatten_args(*args))
        return jax.tree.unflatten(self.out_tree, flat)

    def unpartitioned(self, *args):
        """f(*args) with every annotation dropped, on one device: what a partitioned run must
        equal (jax.jit of the annotated f is XLA's partitioner, which can be wrong too)."""
        one = jax.devices()[0]
        flat = [jax.device_put(x, one) for x in self.flatten_args(*args)]
        run = jax.jit(lambda *a: self.evaluate(*a, annotated=False))
        return jax.tree.unflatten(self.out_tree, run(*flat))

    # --- text -------------------------------------------------------------------------
    def pretty(self, prop=None) -> str:
        """The program with every value's type (and, given a propagation, its sharding)."""

        def typed(v) -> str:
            if isinstance(v, Literal):
                return repr(v)
            sharding = prop.sharding(v) if prop is not None else self.annotations.get(v)
            return f"{v.name}:{v.type_text(sharding)}"

        lines = ["{ lambda " + "; ".join(typed(v) for v in self.inputs) + ". let"]
        marks = self._region_marks()
        for e in self.equations:
            lines += marks.get(e.index, [])
            outs = " ".join(typed(v) for v in e.outputs)
            ins = " ".join(v.name if isinstance(v, Value) else repr(v) for v in e.inputs)
            fixed = "  # fixed" if any(v in self.annotations for v in e.outputs) else ""
            lines.append(f"  {outs} = {e.primitive}{_params_text(e)} {ins}{fixed}")
        lines += marks.get(len(self.equations), [])
        outs = ", ".join(v.name if isinstance(v, Value) else repr(v) for v in self.outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    def _region_marks(self) -> dict[int, list[str]]:
        """Comment lines before equation i: where each loop's body or condition and each
        cond's branch begins and ends."""
        marks: dict[int, list[str]] = {}
        spans = [(loop.body, f"{loop.primitive} body × {loop.trips}") for loop in self.loops]
        spans = [(b, "while body" if "while" in t else t) for b, t in spans]
        spans += [(loop.cond, "while condition") for loop in self.loops if loop.pred is not None]
        spans += [(b, f"cond branch {k}") for c in self.conds for k, b in enumerate(c.branches)]
        for span, title in sorted(spans, key=lambda s: (s[0].start, -s[0].stop)):
            marks.setdefault(span.start, []).append(f"  # {title} {{")
        for span, _ in sorted(spans, key=lambda s: (s[0].stop, -s[0].start)):
            marks.setdefault(span.stop, []).insert(0, "  # }")
        return marks

    def __str__(self) -> str:
        return self.pretty()


_SHOWN_PARAMS = {
    "broadcast_in_dim": ("broadcast_dimensions",),
    "reshape": ("new_sizes",),
    "transpose": ("permutation",),
    "reduce_sum": ("axes",),
    "reduce_max": ("axes",),
    "reduce_min": ("axes",),
    "argmax": ("axes",),
    "squeeze": ("dimensions",),
    "concatenate": ("dimension",),
}


def _params_text(e: Equation) -> str:
    if e.primitive == "dot_general":
        (lc, rc), (lb, rb) = e.params["dimension_numbers"]
        return f"[contract={tuple(lc)},{tuple(rc)} batch={tuple(lb)},{tuple(rb)}]"
    if e.primitive == CONSTRAINT:
        return ""
    keys = _SHOWN_PARAMS.get(e.primitive, ())
    shown = ", ".join(f"{k}={e.params[k]}" for k in keys if k in e.params)
    return f"[{shown}]" if shown else ""


# --- tracing ----------------------------------------------------------------------------
def _common_mesh(annotations: dict) -> Mesh | None:
    meshes = list(dict.fromkeys(s.mesh for s in annotations.values()))
    if len(meshes) > 1:
        raise ValueError(
            f"annotations use different meshes {meshes}: one program must use one mesh "
            "(build every mesh_split with the same gv.Mesh)"
        )
    return meshes[0] if meshes else None


def trace(f, *args) -> Program:
    """Trace `f(*args)` (arrays or jax.ShapeDtypeStruct) into a Program."""
    closed, out_shape = jax.make_jaxpr(f, return_shape=True)(*args)
    _, in_tree = jax.tree.flatten(args)
    out_tree = jax.tree.structure(out_shape)
    b = ProgramBuilder()
    inputs = [b.new_value(v.aval) for v in closed.jaxpr.invars]
    outputs = b.walk(closed.jaxpr, closed.consts, inputs)
    return Program(
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        equations=tuple(b.equations),
        annotations=b.annotations,
        mesh=_common_mesh(b.annotations),
        in_tree=in_tree,
        out_tree=out_tree,
        calls=tuple(b.calls),
        loops=tuple(b.loops),
        conds=tuple(b.conds),
        open_dims=b.open_dims,
    )


FIRST_START = {"dynamic_slice": 1, "dynamic_update_slice": 2}  # primitive -> its first start


def clamped_starts(primitive: str, args: list, params: dict) -> list:
    """A dynamic slice's (or update's) start indices clamped into range on the local buffers,
    as the primitive itself clamps them. Written out, the clamp survives XLA:CPU folding the
    slice into a later dynamic_slice (a reshard's, a gather's), which clamps with the later
    slice's bound: jax 0.10.2 compiles dynamic_slice(dynamic_slice(x[6], 5, 4), 0, 2) to
    x[4:6], not x[2:4]. The per-device runner and the unpartitioned oracle both clamp so."""
    first = FIRST_START[primitive]
    sizes = params["slice_sizes"] if primitive == "dynamic_slice" else args[1].shape
    starts = [jnp.asarray(start) for start in args[first:]]
    starts = [
        jnp.clip(start, 0, n - size).astype(start.dtype)
        for start, n, size in zip(starts, args[0].shape, sizes, strict=True)
    ]
    return [*args[:first], *starts]
