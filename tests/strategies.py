"""Hypothesis strategies shared by the test suite: meshes, specs, shapes, shardings.

`meshes(max_devices=8)` fits the 8 simulated CPU devices for comparisons with jax; pass a larger
`max_devices` for symbolic-only tests. `specs(mesh, ndim)` puts every mesh axis on at most one
tensor dim (axes named nowhere hold replicas); `shapes` includes uneven sides.
"""

import math

from hypothesis import strategies as st

import gspmd_viz as gv

AXIS_NAMES = ("x", "y", "z", "w")


@st.composite
def meshes(
    draw,
    max_axes: int = 3,
    max_devices: int = 8,
    min_size: int = 1,
    min_axes: int = 1,
    max_axis_size: int = 64,
):
    """A gv.Mesh of min_axes..max_axes axes (fewer if sizes >= min_size do not fit)."""
    n_axes = draw(st.integers(min_axes, max_axes))
    names = draw(st.permutations(AXIS_NAMES))[:n_axes]
    sizes: list[int] = []
    for _ in range(n_axes):
        room = min(max_devices // math.prod(sizes), max_axis_size)
        if room < min_size:
            break
        sizes.append(draw(st.integers(min_size, room)))
    return gv.Mesh(dict(zip(names, sizes, strict=False)))


@st.composite
def specs(draw, mesh: gv.Mesh, ndim: int, allow_unused: bool = True):
    """A spec tuple of length <= ndim: each mesh axis splits one tensor dim or none."""
    spec: list[list[str]] = [[] for _ in range(ndim)]
    for axis in draw(st.permutations(mesh.axis_names)):
        lowest = -1 if allow_unused or ndim == 0 else 0
        dim = draw(st.integers(lowest, ndim - 1))
        if dim >= 0:
            spec[dim].append(axis)
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in spec]
    keep = draw(st.integers(0, ndim))  # trailing entries that are None may be left out
    while len(entries) > keep and entries[-1] is None:
        entries.pop()
    return tuple(entries)


def shapes(ndim: int, max_side: int = 13, min_side: int = 1):
    """Array shapes of rank ndim; sides need not divide the shard counts."""
    return st.tuples(*[st.integers(min_side, max_side)] * ndim)


@st.composite
def sharded_shapes(draw, max_axes=3, max_devices=8, min_size=1, max_rank=4, max_side=13):
    """(sharding, shape): a random mesh, a random spec on it, and a shape of matching rank."""
    mesh = draw(meshes(max_axes=max_axes, max_devices=max_devices, min_size=min_size))
    ndim = draw(st.integers(1, max_rank))
    spec = draw(specs(mesh, ndim))
    shape = draw(shapes(ndim, max_side=max_side))
    return gv.Sharding(mesh, spec), shape
