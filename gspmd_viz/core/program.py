"""`gv.trace`: a small frozen program form over a jaxpr.

A Program is a flat list of equations over Values (nested `jit` and custom-derivative calls
are inlined), with the `mesh_split` annotations read back as fixed shardings. Everything the
propagation and the partitioner need, and a pretty-printer that shows each value's sharding.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jax
import jax.extend.core as jex
import numpy as np

from gspmd_viz.core.annotate import read_annotation
from gspmd_viz.core.mesh import Mesh
from gspmd_viz.core.sharding import Sharding, as_dtype, short_dtype

# Call-like primitives whose body we inline, and the param holding the body.
INLINED = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",  # the primal body; the jvp rule is not needed here
    "custom_vjp_call": "call_jaxpr",
    "checkpoint": "jaxpr",
    "remat": "jaxpr",
}
# Control flow we do not model (its body would need its own propagation), and what to do.
_LOOP = "unroll the loop in Python, or keep it outside the traced function"
_PER_DEVICE = "it is already per-device code: trace the global function instead"
REJECTED = {
    "scan": _LOOP,
    "while": _LOOP,
    "cond": "compute both branches and pick with jnp.where, or keep it outside the function",
    "shard_map": _PER_DEVICE,
    "pmap": _PER_DEVICE,
    "xla_pmap": _PER_DEVICE,
}
CONSTRAINT = "sharding_constraint"


@dataclass(frozen=True)
class Value:
    """One SSA value of the program (a jaxpr variable after inlining)."""

    id: int
    shape: tuple[int, ...]
    dtype: np.dtype
    name: str

    def __hash__(self) -> int:  # ids are unique within a program; hashing is on the hot path
        return self.id

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def type_text(self, sharding: Sharding | None = None) -> str:
        if sharding is not None:
            return sharding.describe(self.shape, self.dtype)
        return f"{short_dtype(self.dtype)}[{', '.join(str(n) for n in self.shape)}]"

    def __repr__(self) -> str:
        return f"{self.name}:{self.type_text()}"


@dataclass(frozen=True, eq=False)
class Literal:
    """A constant operand (a jaxpr literal or a closed-over constant)."""

    value: Any
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        if not self.shape:
            return f"{np.asarray(self.value).item()!r}:{short_dtype(self.dtype)}"
        return f"const:{short_dtype(self.dtype)}[{', '.join(str(n) for n in self.shape)}]"


@dataclass(frozen=True, eq=False)
class Equation:
    """`outputs = primitive[params](*inputs)`; `eqn` is the original JaxprEqn (for re-binding)."""

    index: int
    primitive: str
    inputs: tuple[Value | Literal, ...]
    outputs: tuple[Value, ...]
    params: dict
    eqn: Any = field(repr=False)

    def bind(self, *args):
        """Run the primitive on concrete or traced arguments; returns a list of outputs."""
        out = self.eqn.primitive.bind(*args, **self.params)
        return list(out) if self.eqn.primitive.multiple_results else [out]

    @property
    def value_inputs(self) -> tuple[Value, ...]:
        return tuple(v for v in self.inputs if isinstance(v, Value))


@dataclass(frozen=True, eq=False)
class Program:
    inputs: tuple[Value, ...]
    outputs: tuple[Value | Literal, ...]
    equations: tuple[Equation, ...]
    annotations: dict  # Value -> Sharding, fixed by mesh_split / sharding_constraint
    mesh: Mesh | None
    in_tree: Any = field(repr=False)
    out_tree: Any = field(repr=False)
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
        read = lambda v: v.value if isinstance(v, Literal) else env[v]  # noqa: E731
        for e in self.equations:
            args = [read(v) for v in e.inputs]
            if not annotated and e.primitive == CONSTRAINT:
                outs = args
            elif scope:
                with jax.named_scope(f"eqn{e.index}"):
                    outs = e.bind(*args)
            else:
                outs = e.bind(*args)
            env.update(zip(e.outputs, outs, strict=True))
        return [read(v) for v in self.outputs]

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
        for e in self.equations:
            outs = " ".join(typed(v) for v in e.outputs)
            ins = " ".join(v.name if isinstance(v, Value) else repr(v) for v in e.inputs)
            fixed = "  # fixed" if any(v in self.annotations for v in e.outputs) else ""
            lines.append(f"  {outs} = {e.primitive}{_params_text(e)} {ins}{fixed}")
        outs = ", ".join(v.name if isinstance(v, Value) else repr(v) for v in self.outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

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
def _names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


class _Builder:
    """Walks a jaxpr, inlining calls, assigning Values in program order."""

    def __init__(self):
        self.names = _names()
        self.count = itertools.count()
        self.equations: list[Equation] = []
        self.annotations: dict[Value, Sharding] = {}
        self.open_dims: dict[Value, frozenset[int]] = {}

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
            body = eqn.params[INLINED[name]]
            consts = getattr(body, "consts", [])
            outs = self.walk(getattr(body, "jaxpr", body), consts, ins)
            env.update(zip(eqn.outvars, outs, strict=True))
            return
        if name in REJECTED:
            raise NotImplementedError(
                f"gv.trace does not model control flow: primitive {name!r} ({REJECTED[name]})"
            )
        outs = [self.new_value(v.aval) for v in eqn.outvars]
        env.update(zip(eqn.outvars, outs, strict=True))
        e = Equation(len(self.equations), name, tuple(ins), tuple(outs), dict(eqn.params), eqn)
        self.equations.append(e)
        if name == CONSTRAINT:
            self.annotate(e)

    def annotate(self, e: Equation) -> None:
        out = e.outputs[0]
        self.annotations[out], self.open_dims[out] = read_annotation(e.params["sharding"])
        self.annotations[out].check_rank(out.ndim)


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
    b = _Builder()
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
        open_dims=b.open_dims,
    )
