"""Random small programs from registry primitives, with random annotations on random meshes.

`programs()` is a hypothesis strategy giving a `FuzzProgram`: a function over a 2-D array `x`
(f32, bf16, s32 or bool) and the extra arguments its steps need (0-d scalars, dynamic offsets,
out-of-range gather indices, PRNG keys), built from a few steps: annotations, elementwise ops
with captured constants, reductions, dots, static and dynamic slices, updates, gathers under
every mode, pads, concatenations, reshapes, windows, iota, random bits, and `vmap`, `remat`,
`custom_vjp` wrappers; `programs(first=fsdp_dot)` starts with an FSDP + tensor-parallel
matmul. `check(program)` is the oracle shared by the CI test and
`benchmarks/fuzz.py`: the partitioned run equals `Program.unpartitioned`; wire bytes are compared
with XLA's own partitioner.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from strategies import meshes, specs

import gspmd_viz as gv

DTYPES = (jnp.float32, jnp.bfloat16, jnp.int32, jnp.bool_)
GATHER_MODES = ("clip", "fill", "promise_in_bounds", None)  # None: jnp.take's default (fill)
SCATTER_MODES = ("drop", "clip", "promise_in_bounds", None)  # None: .at[]'s default (drop)
# XLA:CPU aborts the process on some reduce_windows, so programs with one are not compiled by
# XLA (still true on jax 0.10.2: window 1, stride 2, padding (-1, -1), base dilation 2 on
# f32[7,3] split 4 ways fails "Check failed: get_first_valid_element_offset_on_dilated_shard(0)
# == swd->padding_low()" in spmd_partitioner.cc).
NO_XLA = {"reduce_window"}
# Steps whose bytes exceed XLA's for a reason measured and not fixed yet (issue 10), listed
# with their figures; every other step is held to 1.25x XLA + 64 B. None now: strided slices,
# segment_sum and scatters with split updates were fixed (tests/test_fuzz_regressions.py);
# dynamic_slice's gap (f32[16,3] split 4 ways, 144 B vs 60 B) no longer reproduces.
BYTES_GAPS: set[str] = set()


@dataclasses.dataclass
class FuzzProgram:
    mesh: gv.Mesh
    steps: list  # (name, text) per step
    fn: object
    args: list

    def __str__(self) -> str:
        x = self.args[0]
        head = f"x:{x.dtype}[{','.join(map(str, x.shape))}] on {self.mesh!r}"
        return head + "".join(f"\n  {text}" for _, text in self.steps)

    @property
    def bytes_gap(self) -> bool:
        return any(name in BYTES_GAPS for name, _ in self.steps)


class _Build:
    """Draws steps one at a time; each is a function h -> h plus the arguments it reads."""

    def __init__(self, draw, mesh, x):
        self.draw, self.mesh, self.args = draw, mesh, [x]
        self.steps: list = []
        self.ops: list = []

    def arg(self, value) -> int:
        self.args.append(value)
        return len(self.args) - 1

    def add(self, name, text, op):
        self.steps.append((name, text))
        self.ops.append(op)

    def spec(self, ndim):
        return self.draw(specs(self.mesh, ndim))


def _numeric(dtype) -> bool:
    return dtype != jnp.bool_


def _annotate(b: _Build, shape, dtype):
    spec = b.spec(2)
    b.add("annotate", f"mesh_split{spec}", lambda h, a: gv.mesh_split(h, b.mesh, spec))
    return shape


def _elementwise(b: _Build, shape, dtype):
    const = np.asarray((np.arange(np.prod(shape)) % 5 - 2).reshape(shape)).astype(dtype)
    if not _numeric(dtype):
        b.add("elementwise", "h ^ captured const", lambda h, a: h ^ const)
        return shape
    k = b.arg(jnp.asarray(3, dtype))  # a 0-d argument
    b.add("elementwise", "abs(h) * s + captured const", lambda h, a: jnp.abs(h) * a[k] + const)
    return shape


def _reduce(b: _Build, shape, dtype):
    axis, how = b.draw(st.integers(0, 1)), b.draw(st.sampled_from(["sum", "max", "min"]))
    if not _numeric(dtype):
        how = "max"
    b.add(
        "reduce",
        f"h + h.{how}({axis}, keepdims)",
        lambda h, a: (
            h + getattr(h, how)(axis, keepdims=True)
            if _numeric(dtype)
            else h | h.max(axis, keepdims=True)
        ),
    )
    return shape


def _weight(b: _Build, rows: int, n: int, dtype) -> int:
    """A [rows, n] weight argument (its position in the arguments)."""
    return b.arg(jnp.asarray((np.arange(rows * n) % 3 - 1).reshape(rows, n), dtype))


def _dot(b: _Build, shape, dtype):
    n, spec = b.draw(st.integers(1, 6)), b.spec(2)
    w = _weight(b, shape[1], n, dtype)
    b.add(
        "dot",
        f"h @ mesh_split(w[{shape[1]},{n}], {spec})",
        lambda h, a: h @ gv.mesh_split(a[w], b.mesh, spec),
    )
    return (shape[0], n)


def fsdp_dot(b: _Build, shape, dtype):
    """h's rows and w's contraction split over one mesh axis, w's columns over another (FSDP +
    tensor parallel): gather w, or reduce the partial product (core/choice/gather_or_reduce).
    A first step for `programs(first=fsdp_dot)`; numeric dtypes only."""
    n, axes = b.draw(st.integers(1, 6)), b.draw(st.permutations(b.mesh.axis_names))
    rows, spec = (axes[0], None), (axes[0], axes[1] if len(axes) > 1 else None)
    w = _weight(b, shape[1], n, dtype)
    b.add(
        "fsdp dot",
        f"mesh_split(h, {rows}) @ mesh_split(w[{shape[1]},{n}], {spec})",
        lambda h, a: gv.mesh_split(h, b.mesh, rows) @ gv.mesh_split(a[w], b.mesh, spec),
    )
    return (shape[0], n)


def _transpose(b: _Build, shape, dtype):
    b.add("transpose", "h.T", lambda h, a: h.T)
    return shape[::-1]


def _reshape(b: _Build, shape, dtype):
    b.add("reshape", f"reshape{shape[::-1]}", lambda h, a: h.reshape(shape[::-1]))
    return shape[::-1]


def _slice(b: _Build, shape, dtype):
    start, step = b.draw(st.integers(0, shape[0] - 1)), b.draw(st.integers(1, 2))
    b.add("slice", f"h[{start}::{step}]", lambda h, a: h[start::step])
    return (len(range(start, shape[0], step)), shape[1])


def _rev(b: _Build, shape, dtype):
    axis = b.draw(st.integers(0, 1))
    b.add("rev", f"flip({axis})", lambda h, a: jnp.flip(h, axis))
    return shape


def _roll(b: _Build, shape, dtype):
    axis = b.draw(st.integers(0, 1))
    shift = b.draw(st.integers(-shape[axis] - 1, shape[axis] + 1))
    b.add("roll", f"roll({shift}, {axis})", lambda h, a: jnp.roll(h, shift, axis))
    return shape


def _dynamic_slice(b: _Build, shape, dtype):
    size = b.draw(st.integers(1, shape[0]))
    i = b.arg(jnp.int32(b.draw(st.integers(-2, shape[0] + 2))))  # clamped like jax does
    b.add(
        "dynamic_slice",
        f"dynamic_slice(h, (i, 0), ({size}, ..))",
        lambda h, a: jax.lax.dynamic_slice(h, (a[i], 0), (size, shape[1])),
    )
    return (size, shape[1])


def _update(b: _Build, shape, dtype):
    rows, static = b.draw(st.integers(1, shape[0])), b.draw(st.booleans())
    u = b.arg(jnp.ones((rows, shape[1]), dtype))
    at = b.draw(st.integers(0, shape[0]))
    i = None if static else b.arg(jnp.int32(at))
    b.add(
        "dynamic_update_slice",
        f"update {rows} rows at {'static' if static else 'dynamic'} {at}",
        lambda h, a: jax.lax.dynamic_update_slice(h, a[u], (at if i is None else a[i], 0)),
    )
    return shape


def _gather(b: _Build, shape, dtype):
    mode, n = b.draw(st.sampled_from(GATHER_MODES)), b.draw(st.integers(1, 5))
    values = b.draw(st.lists(st.integers(-shape[0] - 3, shape[0] + 3), min_size=n, max_size=n))
    idx = b.arg(jnp.asarray(values, jnp.int32))
    b.add(
        "gather",
        f"h.at[{values}].get(mode={mode})",
        lambda h, a: h.at[a[idx]].get(mode=mode),
    )
    return (n, shape[1])


def _segment_sum(b: _Build, shape, dtype):
    k = b.draw(st.integers(1, 6))
    ids = b.draw(st.lists(st.integers(-2, k + 2), min_size=shape[0], max_size=shape[0]))
    i = b.arg(jnp.asarray(ids, jnp.int32))
    b.add(
        "segment_sum", f"segment_sum(h, {ids}, {k})", lambda h, a: jax.ops.segment_sum(h, a[i], k)
    )
    return (k, shape[1])


def _scatter(b: _Build, shape, dtype):
    """h.at[rows].add / max / min / mul / set (u) under every mode, u maybe annotated; or a
    segment_sum of h's rows."""
    hows = ("add", "max", "min", "mul", "set", "segment_sum") if _numeric(dtype) else ("max", "set")
    how, n = b.draw(st.sampled_from(hows)), b.draw(st.integers(1, 5))
    if how == "segment_sum":
        return _segment_sum(b, shape, dtype)
    mode, spec = b.draw(st.sampled_from(SCATTER_MODES)), b.draw(st.none() | specs(b.mesh, 2))
    if how == "set":  # distinct rows in range: a repeated row has no defined winner
        values = b.draw(st.permutations(range(shape[0])))[:n]
    else:  # out of range too, unless the program promises otherwise
        reach = 0 if mode == "promise_in_bounds" else 3
        row = st.integers(-shape[0] - reach, shape[0] - 1 + reach)
        values = b.draw(st.lists(row, min_size=n, max_size=n))
    idx = b.arg(jnp.asarray(values, jnp.int32))
    u = b.arg(jnp.asarray((np.arange(len(values) * shape[1]) % 3 - 1).reshape(len(values), -1)))
    u_text = "u" if spec is None else f"mesh_split(u, {spec})"

    def op(h, a):
        upd = a[u].astype(h.dtype)
        upd = upd if spec is None else gv.mesh_split(upd, b.mesh, spec)
        return getattr(h.at[a[idx]], how)(upd, mode=mode)

    name = "scatter" if spec is None or not spec or spec[0] is None else "scatter_split_updates"
    b.add(name, f"h.at[{values}].{how}({u_text}, mode={mode})", op)
    return shape


def _pad_concat(b: _Build, shape, dtype):
    axis = b.draw(st.integers(0, 1))
    if b.draw(st.booleans()):
        lo, hi = b.draw(st.integers(0, 2)), b.draw(st.integers(0, 2))
        pads = [(0, 0), (0, 0)]
        pads[axis] = (lo, hi)
        b.add("pad", f"pad {pads}", lambda h, a: jnp.pad(h, pads))
        return tuple(n + lo + hi if d == axis else n for d, n in enumerate(shape))
    b.add("concatenate", f"concatenate([h, h], {axis})", lambda h, a: jnp.concatenate([h, h], axis))
    return tuple(2 * n if d == axis else n for d, n in enumerate(shape))


def _window(b: _Build, shape, dtype):
    w, s = b.draw(st.integers(1, 3)), b.draw(st.integers(1, 2))
    pad = (b.draw(st.integers(-1, 2)), b.draw(st.integers(-1, 2)))
    dil = b.draw(st.integers(1, 2))
    if (w, s) == (1, 1):  # XLA:CPU aborts the process on such windows with negative padding
        pad = (max(pad[0], 0), max(pad[1], 0))
    if (shape[0] - 1) * dil + 1 + sum(pad) < w:
        pad = (0, w)  # the window must fit at least once
    text = f"reduce_window sum rows w={w} s={s} pad={pad} base_dilation={dil}"

    def op(h, a):
        zero = jnp.zeros((), h.dtype)
        return jax.lax.reduce_window(h, zero, jax.lax.add, (w, 1), (s, 1), [pad, (0, 0)], (dil, 1))

    b.add("reduce_window", text, op)
    return (((shape[0] - 1) * dil + 1 + sum(pad) - w) // s + 1, shape[1])


def _iota(b: _Build, shape, dtype):
    b.add("iota", "h + arange(cols)", lambda h, a: h + jnp.arange(shape[1], dtype=h.dtype))
    return shape


def _scan_like(b: _Build, shape, dtype):
    names = ["cumsum", "sort", "argmax", "argmin"]
    name, axis = b.draw(st.sampled_from(names)), b.draw(st.integers(0, 1))
    if name in ("argmax", "argmin"):
        arg = getattr(jnp, name)
        b.add(
            name,
            f"{name}(h, {axis}) broadcast",
            lambda h, a: h + arg(h, axis, keepdims=True).astype(h.dtype),
        )
    else:
        b.add(name, f"{name}(h, {axis})", lambda h, a: getattr(jnp, name)(h, axis=axis))
    return shape


def _dropout(b: _Build, shape, dtype):
    key = b.arg(jax.random.key(b.draw(st.integers(0, 9))))

    def op(h, a):
        keep = jax.random.bernoulli(a[key], 0.5, h.shape)
        return jnp.where(keep, h * 2, jnp.zeros((), h.dtype))

    b.add("random", "dropout(key)", op)
    return shape


def _vmap(b: _Build, shape, dtype):
    spec = b.spec(1)
    b.add(
        "vmap",
        f"vmap(row -> mesh_split(row, {spec}) == row)",
        lambda h, a: jax.vmap(lambda r: gv.mesh_split(r, b.mesh, spec) == r)(h).astype(h.dtype),
    )
    return shape


def _remat(b: _Build, shape, dtype):
    b.add("remat", "checkpoint(h -> h * h)", lambda h, a: jax.checkpoint(lambda r: r * r)(h))
    return shape


@jax.custom_vjp
def _triple(h):
    return h * 3


_triple.defvjp(lambda h: (h * 3, None), lambda _, g: (g * 3,))


def _custom_vjp(b: _Build, shape, dtype):
    b.add("custom_vjp", "custom_vjp(h -> 3 h)", lambda h, a: _triple(h))
    return shape


def _pieces(b: _Build, shape, dtype):
    """split / stack / unstack / tile, as rotary embeddings and model code use them."""
    kind, axis = b.draw(st.sampled_from(("split", "stack", "unstack", "tile"))), 1
    if kind == "split" and shape[axis] > 1:
        k = b.draw(st.integers(1, shape[axis] - 1))
        b.add("split", f"split(h, [{k}], 1)[1]", lambda h, a: jnp.split(h, [k], axis)[1])
        return (shape[0], shape[1] - k)
    if kind == "stack":
        text = "stack([h, -h], 2).reshape(n, 2 m)"
        b.add("stack", text, lambda h, a: jnp.stack([h, -h], 2).reshape(shape[0], -1))
        return (shape[0], 2 * shape[1])
    if kind == "unstack":
        text = "stack(unstack(h, 0)[::-1], 0)"
        b.add("unstack", text, lambda h, a: jnp.stack(jnp.unstack(h, axis=0)[::-1], 0))
        return shape
    b.add("tile", "tile(h, (1, 2))", lambda h, a: jnp.tile(h, (1, 2)))
    return (shape[0], 2 * shape[1])


ANY_DTYPE = (
    _annotate,
    _elementwise,
    _reduce,
    _transpose,
    _reshape,
    _slice,
    _rev,
    _roll,
    _dynamic_slice,
    _update,
    _gather,
    _scatter,
    _pad_concat,
    _pieces,
    _vmap,
)
NUMERIC = (_dot, _window, _iota, _scan_like, _dropout, _remat, _custom_vjp)


@st.composite
def programs(draw, max_steps: int = 4, first=_annotate):
    """A FuzzProgram on a random mesh of up to 8 devices (3-D and size-1 axes included),
    starting with `first` (an annotation; `fsdp_dot` draws numeric dtypes only)."""
    mesh = draw(meshes(max_axes=3, max_devices=8, min_size=1))
    dtype = draw(st.sampled_from(DTYPES if first is _annotate else DTYPES[:3]))
    shape = (draw(st.integers(1, 8)), draw(st.integers(1, 8)))
    x = jnp.asarray((np.arange(np.prod(shape)) % 7 - 3).reshape(shape)).astype(dtype)
    b = _Build(draw, mesh, x)
    shape = first(b, shape, dtype)
    choices = ANY_DTYPE + (NUMERIC if dtype != jnp.bool_ else ())
    for _ in range(draw(st.integers(1, max_steps))):
        shape = draw(st.sampled_from(choices))(b, shape, dtype)
        if 0 in shape or max(shape) > 64:
            break

    def fn(*args):
        h = args[0]
        for op in b.ops:
            h = op(h, args)
        return h

    return FuzzProgram(mesh, b.steps, fn, b.args)


# --- the oracle --------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    wrong: str = ""  # what differs
    crashed: str = ""  # the exception
    ours: float = 0.0  # wire bytes
    xla: float | None = None  # XLA's wire bytes (None: XLA failed or not asked)

    @property
    def over_bytes(self) -> bool:
        return self.xla is not None and self.ours > 1.25 * self.xla + 64


def _same(got, want, dtype) -> str:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    tol = 2e-2 if dtype == jnp.bfloat16 else 1e-5
    if not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        return f"max difference {np.nanmax(np.abs(got - want))}"
    return ""


def check(p: FuzzProgram, with_xla: bool = True) -> Outcome:
    """Run p partitioned and on one device; with_xla: XLA's wire bytes for the same shardings."""
    try:
        prop = gv.propagate(gv.trace(p.fn, *p.args))
        spmd = gv.partition(prop)
        out = Outcome(
            wrong=_same(spmd(*p.args), spmd.program.unpartitioned(*p.args), p.args[0].dtype)
        )
        out.ours = spmd.wire_bytes
    except Exception as err:  # noqa: BLE001 - every crash is a finding
        return Outcome(crashed=f"{type(err).__name__}: {str(err)[:300]}")
    if with_xla and not any(name in NO_XLA for name, _ in p.steps):
        try:
            theirs = gv.xla.collectives(
                p.fn, *p.args, mesh=p.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
            )
            out.xla = float(sum(c.wire_bytes for c in theirs))
        except Exception:  # noqa: BLE001, S110 - XLA is the oracle here, not under test
            pass
    return out
