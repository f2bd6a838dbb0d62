"""Windowed primitives seen per operand dim.

`window_of(eqn)` reads a `conv_general_dilated` / `reduce_window_*` equation as
{operand-0 dim: Window} plus the output dim each one becomes; `local_params` rewrites the
equation's parameters for the per-device op that runs on window-ready input (no padding and no
base dilation on the sharded dims: `window_ready` did both); `splits_for` plans the halos.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from gspmd_viz.core.halo import halo_plan
from gspmd_viz.core.halo_exchange import SpatialSplit
from gspmd_viz.core.mesh import Mesh


@dataclasses.dataclass(frozen=True)
class Window:
    """One operand dim of a windowed op (window 1, stride 1, no padding: a plain dim)."""

    window: int = 1
    stride: int = 1
    dilation: int = 1
    base_dilation: int = 1
    padding: tuple[int, int] = (0, 0)
    out_dim: int = 0
    param_index: int | None = None  # position in the primitive's per-spatial-dim params


def _conv_windows(eqn) -> dict[int, Window]:
    p, rhs = eqn.params, eqn.invars[1]
    dn = p["dimension_numbers"]
    dims = {dn.lhs_spec[0]: Window(out_dim=dn.out_spec[0])}  # batch passes through
    for k, d in enumerate(dn.lhs_spec[2:]):
        dims[d] = Window(
            rhs.aval.shape[dn.rhs_spec[2 + k]],
            p["window_strides"][k],
            p["rhs_dilation"][k],
            p["lhs_dilation"][k],
            tuple(p["padding"][k]),
            dn.out_spec[2 + k],
            k,
        )
    return dims


def _reduce_windows(eqn) -> dict[int, Window]:
    p = eqn.params
    keys = ("window_dimensions", "window_strides", "window_dilation", "base_dilation", "padding")
    return {
        d: Window(*(p[k][d] for k in keys[:4]), tuple(p["padding"][d]), d, d)
        for d in range(eqn.invars[0].aval.ndim)
    }


# pad value per primitive: what a window reads where there is no data (XLA: the init value)
WINDOWED = {
    "conv_general_dilated": (_conv_windows, 0.0),
    "reduce_window_sum": (_reduce_windows, 0.0),
    "reduce_window_max": (_reduce_windows, -np.inf),
    "reduce_window_min": (_reduce_windows, np.inf),
}


def window_of(eqn) -> dict[int, Window]:
    """{operand-0 dim: Window} for the dims a spatial split may cut."""
    if eqn.primitive.name not in WINDOWED:
        raise ValueError(
            f"{eqn.primitive.name} is not a windowed op; halo exchange partitions "
            f"{', '.join(WINDOWED)}"
        )
    return WINDOWED[eqn.primitive.name][0](eqn)


def pad_value(eqn):
    return WINDOWED[eqn.primitive.name][1]


def local_params(eqn, dims, params=None) -> dict:
    """`params` (default: the equation's) with padding (0, 0) and base dilation 1 on the split
    `dims`: the op then runs on window-ready input."""
    p, windows = dict(eqn.params if params is None else params), window_of(eqn)
    conv = eqn.primitive.name == "conv_general_dilated"
    pad_key, dil_key = ("padding", "lhs_dilation") if conv else ("padding", "base_dilation")
    padding, base = list(p[pad_key]), list(p[dil_key])
    for d in dims:
        k = windows[d].param_index
        if k is not None:
            padding[k], base[k] = (0, 0), 1
    p[pad_key], p[dil_key] = tuple(tuple(x) for x in padding), tuple(base)
    return p


def split_of(eqn, dim: int, axis, shards: int) -> SpatialSplit:
    """Operand-0 `dim` split into `shards` over mesh `axis` (a name or a tuple of names)."""
    windows = window_of(eqn)
    if dim not in windows:
        raise ValueError(
            f"dim {dim} of {eqn.primitive.name}'s input is neither spatial nor batch: "
            f"split one of dims {sorted(windows)}"
        )
    w = windows[dim]
    size = eqn.invars[0].aval.shape[dim]
    plan = halo_plan(size, shards, w.window, w.stride, w.dilation, w.base_dilation, w.padding)
    return SpatialSplit(dim, axis, plan)


def splits_for(eqn, axes: Mapping[int, str], mesh: Mesh) -> list[SpatialSplit]:
    """One SpatialSplit per operand-0 dim in `axes`, with its halo plan."""
    return [split_of(eqn, dim, axis, mesh.axis_size(axis)) for dim, axis in axes.items()]
