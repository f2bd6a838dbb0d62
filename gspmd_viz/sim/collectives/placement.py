"""Logical mesh axes onto the physical dims of a pod, and collectives timed on those dims.

`place({"data": 64, "model": 16}, gv.sim.preset("tpu-v3-pod"))` gives each logical axis the
pieces of physical dims it occupies: the last logical axis gets the contiguous (minor) chips of
the last physical dim, the next one what is left of that dim and then the dim before, and so
on. A collective over some axes runs on the sub-torus of their pieces: a piece spanning a whole
wrapped dim keeps its wraparound, unless the dim is a twisted torus's short one (its wraparound
lands k chips along the long dims, outside the line); a piece smaller than its dim is a line
without wraparound.
A strided piece (every k-th chip of a dim) is modelled as that line too: its parallel rings
share each link once per direction, as a contiguous line does, but each ring edge really
crosses k links, so we undercount its hop latency.
"""

from __future__ import annotations

import math

import numpy as np

from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.presets import preset
from gspmd_viz.sim.collectives.registry import closed_form
from gspmd_viz.sim.collectives.topology import PRESETS, Topology, torus

Placement = dict  # logical axis -> tuple of (physical dim, size) pieces


def place(mesh: dict, topo: Topology) -> Placement:
    """Assign logical axes (name -> size, major first) to physical dims of `topo`."""
    sizes = {a: int(n) for a, n in mesh.items()}
    if any(n < 1 for n in sizes.values()):
        raise ValueError(f"mesh axis sizes must be positive, got {mesh}")
    if math.prod(sizes.values()) != topo.n_chips:
        raise ValueError(
            f"a mesh of {math.prod(sizes.values())} devices ({mesh}) does not fill "
            f"{topo.describe()}: the axis sizes must multiply to {topo.n_chips}"
        )
    free = list(topo.shape)
    dim, out = topo.ndim - 1, {}
    for axis in reversed(list(sizes)):
        need, pieces = sizes[axis], []
        while need > 1:
            while dim >= 0 and free[dim] == 1:
                dim -= 1
            g = math.gcd(need, free[dim]) if dim >= 0 else 1
            if g == 1:
                raise ValueError(
                    f"mesh axis {axis!r} of size {sizes[axis]} does not fit the pod's dims "
                    f"{topo.shape} in order; pick axis sizes that factor into them"
                )
            pieces.append((dim, g))
            free[dim] //= g
            need //= g
        out[axis] = tuple(pieces)
    return {a: out[a] for a in sizes}


def sub_torus(placement: Placement, axes, topo: Topology) -> Topology:
    """The chips of one group of a collective over `axes`, as a torus of their pieces."""
    per_dim: dict[int, int] = {}
    for a in axes:
        if a not in placement:
            raise ValueError(f"axis {a!r} is not placed; placed axes: {sorted(placement)}")
        for d, size in placement[a]:
            per_dim[d] = per_dim.get(d, 1) * size
    dims = sorted(per_dim)
    if not dims:
        return torus((1,), False)
    shape = [per_dim[d] for d in dims]
    wrap = [per_dim[d] == topo.shape[d] and topo.line_wrap[d] for d in dims]
    return torus(shape, wrap)


def pieces(placement: Placement) -> list[tuple[str, int, int, int]]:
    """(axis, physical dim, size, stride) of every piece: a dim's coordinate is the sum of
    digit x stride over its pieces, the piece placed first (the last axis's) the minor one."""
    used: dict[int, int] = {}
    out = []
    for axis in reversed(list(placement)):
        for d, size in placement[axis]:
            out.append((axis, d, size, used.get(d, 1)))
            used[d] = used.get(d, 1) * size
    return out


def group_chips(placement: Placement, axes, topo: Topology) -> np.ndarray:
    """[groups, chips per group] physical chip ids: row g is the g-th group of a collective
    over `axes`, column i its chip i of `sub_torus(placement, axes, topo)` (C order)."""
    sub = sub_torus(placement, axes, topo)
    dims = sorted({d for a in axes for d, _ in placement[a]})
    sub_coord = np.zeros((topo.n_chips, max(len(dims), 1)), np.int64)
    sub_stride = dict.fromkeys(dims, 1)
    group, n_groups = np.zeros(topo.n_chips, np.int64), 1
    for axis, d, size, stride in pieces(placement):
        digit = topo.coords[:, d] // stride % size
        if axis in axes:  # a digit of the chip's place inside its group, minor piece first
            sub_coord[:, dims.index(d)] += digit * sub_stride[d]
            sub_stride[d] *= size
        else:  # a digit of which group the chip is in
            group += digit * n_groups
            n_groups *= size
    index = np.ravel_multi_index(tuple(sub_coord.T), sub.shape)
    out = np.full((n_groups, sub.n_chips), -1, np.int64)
    out[group, index] = np.arange(topo.n_chips)
    return out


def collective_seconds(kind: str, nbytes: float, sub: Topology, chip="tpu-v3") -> float:
    """Alpha-beta time of one collective on `sub` (closed form, the simulator's own oracle).

    `nbytes` is the S of the wire formulas: all-reduce S, all-gather S_out, reduce-scatter S_in.
    """
    if sub.n_chips == 1 or nbytes <= 0:
        return 0.0
    if kind == "collective-permute":
        spec = get_chip(chip)
        return nbytes / spec.ici_link_bandwidth_Bps + spec.hop_latency_s
    return closed_form(sub, kind, float(nbytes), chip=chip)


def slice_for(n_chips: int) -> Topology:
    """The slice the lessons time an n-device mesh on: the first preset with n chips (2x4 for
    the 8 simulated devices, 4x4 for 16), else one ring of n chips."""
    for name, (shape, _, _) in PRESETS.items():
        if math.prod(shape) == n_chips:
            return preset(name)
    return torus((n_chips,), True, name=f"ring of {n_chips}")


def describe(placement: Placement, topo: Topology) -> str:
    """`data -> dim0:32 x dim1:2, model -> dim1:16` (pieces per logical axis)."""
    parts = []
    for a, pieces in placement.items():
        text = " x ".join(f"dim{d}:{n}" for d, n in pieces) or "one chip"
        parts.append(f"{a} -> {text}")
    return f"{'x'.join(map(str, topo.shape))}: " + ", ".join(parts)
