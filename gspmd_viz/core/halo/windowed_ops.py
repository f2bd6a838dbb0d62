"""Windowed primitives seen per operand dim.

`window_of(eqn)` reads a `conv_general_dilated` / `reduce_window_*` equation as
{operand-0 dim: Window} plus the output dim each one becomes; `windowed_params` rewrites the
equation's parameters for the per-device op that runs on window-ready input (no padding and no
base dilation on the sharded dims: `window_ready` did both); `splits_for` plans the halos.

Shifts are windows too: output j of `pad`, `slice` or a `dynamic_slice` at a constant offset
reads input position j·stride − low, i.e. a window of 1 with padding (low, high) (negative:
trim) and, for pad's interior padding, base dilation. Their halos are exactly the elements that
cross a shard boundary.  # XLA: HandlePad / HandleSlice / HandleDynamicSlice via
ReshardAsWindowedInput
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.extend.core import Literal

from gspmd_viz.core.halo.arithmetic import halo_plan
from gspmd_viz.core.halo.exchange import SpatialSplit
from gspmd_viz.core.sharding.mesh import Mesh


@dataclasses.dataclass(frozen=True)
class Window:
    """One operand dim of a windowed op (window 1, stride 1, no padding: a plain dim)."""

    window: int = 1
    stride: int = 1
    dilation: int = 1
    base_dilation: int = 1
    padding: tuple[int, int] = (0, 0)
    out_dim: int = 0  # -1: a contracted dim seen from its taps (the output is summed)
    param_index: int | None = None  # position in the primitive's per-spatial-dim params


def _conv_windows(eqn, operand: int = 0, taps=frozenset()) -> dict[int, Window]:
    """Per lhs dim; the lhs dims in `taps` (windowed-sums) seen from the window taps."""
    p, rhs, out = eqn.params, eqn.invars[1].aval.shape, eqn.outvars[0].aval.shape
    dn = p["dimension_numbers"]
    dims = {dn.lhs_spec[0]: Window(out_dim=dn.out_spec[0])}  # batch passes through
    for k, d in enumerate(dn.lhs_spec[2:]):
        taps_k, size = rhs[dn.rhs_spec[2 + k]], out[dn.out_spec[2 + k]]
        stride, dilation = p["window_strides"][k], p["rhs_dilation"][k]
        base, pad = p["lhs_dilation"][k], tuple(p["padding"][k])
        if d in taps:
            n = eqn.invars[0].aval.shape[d]
            dims[d] = _swapped(n, taps_k, size, stride, dilation, base, pad, k)
        else:
            dims[d] = Window(taps_k, stride, dilation, base, pad, dn.out_spec[2 + k], k)
    return dims


def _swapped(n: int, taps: int, size: int, stride: int, dilation: int, base: int, pad, k: int):
    """A contracted dim seen from the taps: tap t reads output j's input at j·stride + t·dilation,
    so the taps are windows (stride `dilation`) of `size` elements (dilation `stride`). The high
    padding is cut to the span the real outputs read, so there are exactly `taps` windows."""
    used = (taps - 1) * dilation + 1 + (size - 1) * stride
    padded = n + (base - 1) * (n - 1) + pad[0] + pad[1]
    return Window(size, dilation, stride, base, (pad[0], pad[1] - (padded - used)), -1, k)


def _reduce_windows(eqn, operand: int = 0) -> dict[int, Window]:
    p = eqn.params
    keys = ("window_dimensions", "window_strides", "window_dilation", "base_dilation", "padding")
    return {
        d: Window(*(p[k][d] for k in keys[:4]), tuple(p["padding"][d]), d, d)
        for d in range(eqn.invars[0].aval.ndim)
    }


def _shift(d: int, low: int, high: int, stride: int = 1, base: int = 1) -> Window:
    """Dim d read by 1-wide windows: output j is input position j·stride − low."""
    return Window(1, int(stride), 1, int(base), (int(low), int(high)), d, d)


def _pad_windows(eqn, operand: int = 0) -> dict[int, Window]:
    cfg = eqn.params["padding_config"]
    return {d: _shift(d, lo, hi, base=mid + 1) for d, (lo, hi, mid) in enumerate(cfg)}


def _slice_windows(eqn, operand: int = 0) -> dict[int, Window]:
    p, shape = eqn.params, eqn.invars[0].aval.shape
    strides = p["strides"] or (1,) * len(shape)
    bounds = zip(shape, p["start_indices"], p["limit_indices"], strides, strict=True)
    return {d: _shift(d, -a, b - n, s) for d, (n, a, b, s) in enumerate(bounds)}


def _dynamic_slice_windows(eqn, operand: int = 0) -> dict[int, Window]:
    """Dims sliced at a constant start (clamped into range, as jax does); a data-dependent
    start is no window: that dim stays whole."""
    shape, sizes = eqn.invars[0].aval.shape, eqn.params["slice_sizes"]
    out = {}
    for d, (n, k, start) in enumerate(zip(shape, sizes, eqn.invars[1:], strict=True)):
        if k == n:
            out[d] = Window(out_dim=d)
        elif isinstance(start, Literal):
            a = min(max(int(start.val), 0), n - k)
            out[d] = _shift(d, -a, a + k - n)
    return out


def _concat_windows(eqn, operand: int = 0) -> dict[int, Window]:
    """Operand k of a concatenation lands at offset n_0 + … + n_(k−1): a shift of its own.
    (Complex numbers have no order to pick the real element with: that dim stays whole.)"""
    d, shapes = eqn.params["dimension"], [v.aval.shape for v in eqn.invars]
    out = {k: Window(out_dim=k) for k in range(len(shapes[0])) if k != d}
    if not np.issubdtype(eqn.outvars[0].aval.dtype, np.complexfloating):
        low = sum(s[d] for s in shapes[:operand])
        out[d] = _shift(d, low, sum(s[d] for s in shapes) - low - shapes[operand][d])
    return out


def _pick_real(*shifted, **params):
    """Concatenation of operands shifted into place over the dtype's lowest value: at every
    position one operand holds a real element, the others the lowest value (XLA: HandleConcatenate
    pads every operand to the output and selects)."""
    return functools.reduce(jnp.maximum, [s for s in shifted if s.size])  # empty: no element


def _scatter_windows(eqn, operand: int = 0) -> dict[int, Window]:
    """select_and_scatter_add (a max-pooling gradient): the operand's dims, windowed as the
    pooling whose windows the source has one value for."""
    p = eqn.params
    keys = zip(p["window_dimensions"], p["window_strides"], p["padding"], strict=True)
    return {d: Window(w, s, 1, 1, tuple(pad), d, d) for d, (w, s, pad) in enumerate(keys)}


class Windowed(NamedTuple):
    reader: Callable  # (eqn, operand) -> {dim: Window}
    fill: object  # what a window reads where there is no data (XLA: the init value)
    every_operand: bool = False  # every operand is shifted (concatenate), not operand 0 only
    local_op: Callable | None = None  # runs instead of the primitive on window-ready input
    # halos that cover the dim: gather instead (XLA's rule for convs, HaloPlan.gather_instead);
    # a shift's rounds carry only what crosses a boundary, and the cost model compares
    wide_halos_gather: bool = True
    halo_operand: int = 0  # the operand whose halos are exchanged (when not every operand)
    returns: bool = False  # the result is window-ready too: its halo goes back to its owners


OPERAND_1, LOWEST = "operand 1", "lowest"  # fills: pad's operand 1; the dtype's lowest value
HIGHEST, SELECTED = "highest", "never selected"  # the dtype's highest; LOWEST for ge, else HIGHEST
SHIFTS = {
    "pad": Windowed(_pad_windows, OPERAND_1, wide_halos_gather=False),
    "slice": Windowed(_slice_windows, 0, wide_halos_gather=False),
    "dynamic_slice": Windowed(_dynamic_slice_windows, 0, wide_halos_gather=False),
    "concatenate": Windowed(_concat_windows, LOWEST, True, _pick_real, False),
}
WINDOWED = {
    "conv_general_dilated": Windowed(_conv_windows, 0.0),
    "reduce_window_sum": Windowed(_reduce_windows, 0.0),
    "reduce_window_max": Windowed(_reduce_windows, -np.inf),
    "reduce_window_min": Windowed(_reduce_windows, np.inf),
}


SCATTERED = {
    "select_and_scatter_add": Windowed(_scatter_windows, SELECTED, False, None, True, 1, True)
}
READERS = WINDOWED | SHIFTS | SCATTERED


def _reader(eqn):
    name = eqn.primitive.name
    if name not in READERS:
        raise ValueError(
            f"{name} is not a windowed op; halo exchange partitions {', '.join(READERS)}"
        )
    return READERS[name]


def window_of(eqn, operand: int = 0) -> dict[int, Window]:
    """{operand dim: Window} for the dims a spatial split may cut."""
    return _reader(eqn).reader(eqn, operand)


def pad_value(eqn):
    """What windows read outside the input: a constant, OPERAND_1 (pad's), LOWEST or HIGHEST
    (what a select never picks)."""
    fill = _reader(eqn).fill
    if fill == SELECTED:
        return LOWEST if eqn.params["select_prim"].name in ("ge", "gt") else HIGHEST
    return fill


def fill_key(fill):
    """A resolved pad value to compare: a buffer name, the number, or a literal's text."""
    if isinstance(fill, str):
        return fill
    try:
        return float(fill)
    except TypeError:
        return repr(fill)


def halo_operands(eqn) -> tuple[int, ...]:
    """The operands whose halos are exchanged (one, or every non-empty one of a
    concatenation: `jnp.roll(x, 0)` concatenates x with an empty slice)."""
    reader = _reader(eqn)
    if not reader.every_operand:
        return (reader.halo_operand,)
    return tuple(k for k, v in enumerate(eqn.invars) if v.aval.size)


def returns_halo(eqn) -> bool:
    """Is the result window-ready too (halo contributions to send back and add)?"""
    return _reader(eqn).returns


def wide_halos_gather(eqn) -> bool:
    return _reader(eqn).wide_halos_gather


def local_op(eqn) -> Callable | None:
    """What runs on window-ready operands instead of the primitive (None: the primitive)."""
    return _reader(eqn).local_op


def _replace(seq, d: int, value) -> tuple:
    return tuple(value if i == d else x for i, x in enumerate(seq))


def _no_padding(p: dict, eqn, split) -> None:
    """conv / reduce_window: padding (0, 0) and base dilation 1 on the split dim."""
    conv = eqn.primitive.name == "conv_general_dilated"
    pad_key, dil_key = ("padding", "lhs_dilation") if conv else ("padding", "base_dilation")
    k = window_of(eqn)[split.dim].param_index
    if k is not None:
        p[pad_key] = _replace(tuple(map(tuple, p[pad_key])), k, (0, 0))
        p[dil_key] = _replace(p[dil_key], k, 1)


def _local_pad(p: dict, eqn, split) -> None:
    p["padding_config"] = _replace(p["padding_config"], split.dim, (0, 0, 0))


def _local_slice(p: dict, eqn, split) -> None:
    # [.., span, ..] -> every stride-th position -> [.., windows per shard, ..]
    p["start_indices"] = _replace(p["start_indices"], split.dim, 0)
    p["limit_indices"] = _replace(p["limit_indices"], split.dim, split.plan.ready_span)


def _local_dynamic_slice(p: dict, eqn, split) -> None:
    # the whole window-ready input: the constant start clamps to 0 on it
    p["slice_sizes"] = _replace(p["slice_sizes"], split.dim, split.plan.windows_per_shard)


def _local_scatter(p: dict, eqn, split) -> None:
    p["padding"] = _replace(tuple(map(tuple, p["padding"])), split.dim, (0, 0))


LOCAL = {name: _no_padding for name in WINDOWED} | {
    "select_and_scatter_add": _local_scatter,
    "pad": _local_pad,
    "slice": _local_slice,
    "dynamic_slice": _local_dynamic_slice,
    "concatenate": lambda p, eqn, split: None,  # _pick_real reads no params
}


def windowed_params(eqn, splits, params=None) -> dict:
    """`params` (default: the equation's) rewritten for the op on window-ready input: on the
    split dims no padding and no base dilation (window_ready did both), slices from 0."""
    p = dict(eqn.params if params is None else params)
    for split in splits:
        LOCAL[eqn.primitive.name](p, eqn, split)
    return p


def split_of(eqn, dim: int, axis, shards: int, operand: int = 0, taps=False) -> SpatialSplit:
    """Operand `dim` split into `shards` over mesh `axis` (a name or a tuple of names); `taps`:
    a conv's contracted dim, split with its window taps (partial sums), not its output."""
    windows = _conv_windows(eqn, operand, taps={dim}) if taps else window_of(eqn, operand)
    if dim not in windows:
        raise ValueError(
            f"dim {dim} of {eqn.primitive.name}'s input is neither spatial nor batch: "
            f"split one of dims {sorted(windows)}"
        )
    w = windows[dim]
    size = eqn.invars[operand].aval.shape[dim]
    plan = halo_plan(size, shards, w.window, w.stride, w.dilation, w.base_dilation, w.padding)
    return SpatialSplit(dim, axis, plan)


def splits_for(eqn, axes: Mapping[int, str], mesh: Mesh) -> list[SpatialSplit]:
    """One SpatialSplit per operand-0 dim in `axes`, with its halo plan."""
    return [split_of(eqn, dim, axis, mesh.axis_size(axis)) for dim, axis in axes.items()]
