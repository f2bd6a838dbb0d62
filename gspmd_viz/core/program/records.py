"""The records a traced Program is made of: Values, Literals, Equations, and the boundaries of
the calls (`jit`, `remat2`, custom derivatives) that tracing inlined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from gspmd_viz.core.sharding.sharding import Sharding, short_dtype

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
    call: int | None = None  # index into Program.calls of the innermost inlined call, if any

    def bind(self, *args):
        """Run the primitive on concrete or traced arguments; returns a list of outputs."""
        out = self.eqn.primitive.bind(*args, **self.params)
        return list(out) if self.eqn.primitive.multiple_results else [out]

    @property
    def value_inputs(self) -> tuple[Value, ...]:
        return tuple(v for v in self.inputs if isinstance(v, Value))


@dataclass(frozen=True)
class Call:
    """The boundary of one inlined call (`remat2`, `custom_vjp_call`, nested `jit`, ...): its
    equations are `equations` (a range of Program.equations), its operands and results are
    values of the flat program; `parent` is the enclosing call (None at top level). `fresh`:
    the call recomputes its body, never sharing it with an equal computation outside
    (jax.checkpoint's `prevent_cse`, which keeps the forward's buffers from living on)."""

    index: int
    primitive: str
    name: str
    parent: int | None
    equations: range
    inputs: tuple[Value | Literal, ...]
    outputs: tuple[Value | Literal, ...]
    fresh: bool = False

    def __str__(self) -> str:
        ins = " ".join(v.name if isinstance(v, Value) else repr(v) for v in self.inputs)
        outs = " ".join(v.name if isinstance(v, Value) else repr(v) for v in self.outputs)
        eqns = self.equations
        where = f"eqns {eqns.start}..{eqns.stop - 1}" if eqns else "no equations"
        return f"{outs} = {self.primitive}[{self.name}] {ins}  ({where})"


class Carry(NamedTuple):
    """One carried value of a loop: its initial operand, the body parameter it enters as, the
    body result that becomes the next trip's value, and the loop's final value."""

    init: object
    param: object
    result: object
    final: object


@dataclass(frozen=True)
class Loop:
    """A `scan` or `while` kept as one region of the flat program. Its body's equations appear
    once, in `body`; data-flow edges (equations whose entry is an `edge`) tie each carried value's
    initial value, body parameter, body result and final value to one sharding, each const to
    its body parameter, each stacked `xs` to its per-iteration slice and each per-iteration
    `y` to the stacked `ys` (leading dim not split). `region` spans edges and body. A `while`
    has no xs/ys; its condition's equations appear once too (`cond`, over `cond_params`, the
    carried values' second body parameters) and compute the scalar `pred`; its trip count is
    data-dependent, so `trips` is 1 and `counted` says so.
    # XLA: HandleWhile (operand, parameter, root and result share one sharding)"""

    index: int
    primitive: str
    region: range
    body: range
    trips: int
    reverse: bool
    consts: tuple  # (outer operand, body parameter)
    carries: tuple[Carry, ...]
    xs: tuple  # (stacked operand, body parameter)
    ys: tuple  # (body result, stacked value)
    cond: range = range(0)
    cond_params: tuple = ()
    pred: object = None

    @property
    def counted(self) -> str:
        """How `trips` was found ("" when the program states it)."""
        return "data-dependent trip count: one trip counted" if self.primitive == "while" else ""

    def __str__(self) -> str:
        names = lambda vs: " ".join(getattr(v, "name", repr(v)) for v in vs)  # noqa: E731
        carried, xs = names(c.param for c in self.carries), names(p for _, p in self.xs)
        ys, body = names(y for y, _ in self.ys), f"{self.body.start}..{self.body.stop - 1}"
        head = f"{self.primitive} × {self.trips}: carries [{carried}]"
        return f"{head}, xs [{xs}], ys [{ys}] (eqns {body})"


@dataclass(frozen=True)
class Cond:
    """A `cond` / `switch` kept as one region: every branch's equations appear once (`branches`,
    one range each). Edges tie each operand to its parameter in every branch, and every
    branch's result to the cond's result (one sharding: the branches agree on their outputs).
    `selector` picks the branch; it is a scalar, so every device takes the same branch.
    # XLA: SpmdPartitioningVisitor::HandleConditional"""

    index: int
    region: range
    branches: tuple[range, ...]
    selector: object  # Value or Literal: the branch index
    operands: tuple  # (outer operand, (its parameter in each branch))
    results: tuple  # ((the result of each branch), outer result)


# --- equations told apart by all but their values' names ----------------------------------------

_ATOMS = frozenset({int, str, type(None)})  # params that are their own key (not a float nor
# a bool: 1 == 1.0 == True and 0.0 == -0.0 as keys, and a twin's local op is its twin's)
_NUMBERS = float | bool | np.generic  # made once: `a | b` makes a new union at every call
_SEQUENCES = list | tuple


def equation_key(eqn: Equation) -> tuple:
    """The equation alone, its values' names apart: primitive, params, operand types (and
    literals' values), result types (Program.kinds numbers them)."""
    return (
        eqn.primitive,
        frozen_params(eqn.params),
        tuple([_operand_key(x) for x in eqn.inputs]),
        tuple([(v.shape, v.dtype) for v in eqn.outputs]),
    )


def _operand_key(x) -> tuple:
    """An operand's type, shape, dtype (and a literal's value)."""
    kind = (type(x).__name__, x.shape, x.dtype)
    return kind + (frozen_params(x.value),) if isinstance(x, Literal) else kind


def frozen_params(params) -> object:
    """params as a dict key: containers by content, arrays by bytes, the rest as they hash
    (or by identity when they do not: then no equation shares its key, which is safe). The
    commonest params first (atoms, tuples and dicts of atoms, dtypes); `frozen` the rest."""
    kind = type(params)
    if kind in _ATOMS:  # most params: as they are
        return params
    if kind is tuple and _ATOMS.issuperset(map(type, params)):  # shapes, dims: `frozen`'s
        return ("tuple", params)  # answer without a call per entry
    if kind is dict:  # most values atoms: as they are
        items = sorted(params.items())
        return tuple([(k, v if type(v) in _ATOMS else frozen_params(v)) for k, v in items])
    if isinstance(params, np.dtype):  # hashable, no number: as `frozen` has it
        return params
    return frozen(params, frozen_params)


def frozen(params, freeze) -> object:
    """frozen_params' general case, entries of containers frozen by `freeze`: numbers by
    type and repr (-0.0 by its sign), containers by content, arrays by bytes, the rest as
    they hash (or by identity)."""
    if type(params) in _ATOMS:
        return params
    if isinstance(params, _NUMBERS):
        return (type(params).__name__, repr(params))
    if isinstance(params, dict):
        return tuple([(k, freeze(v)) for k, v in sorted(params.items())])
    if isinstance(params, _SEQUENCES):
        return (type(params).__name__, tuple([freeze(v) for v in params]))
    if isinstance(params, np.ndarray) and params.dtype.kind in "biufc":
        return ("array", params.shape, params.dtype, params.tobytes())
    try:
        hash(params)
    except TypeError:
        return ("object", id(params))
    return params
