"""Spatial partitioning in one call: `spatial_program(fn, x, *weights, mesh=, axes=)` splits
`x`'s dims in `axes` over mesh axes (the weights replicated, as spatial partitioning does),
and partitions `fn` with the reference partitioner taking propagation's split everywhere, as
GSPMD does: every windowed equation (convolution, pooling, their gradients) exchanges halos
with collective-permutes, and activations stay split from the first layer to the last.

It is `gv.partition` with the annotation written for you, plus the halo exchanges listed
(`permutes`), which lesson 04 prints and its widget draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from gspmd_viz.core.halo.exchange import HaloPermute
from gspmd_viz.core.partition.partitioner import Partitioner
from gspmd_viz.core.program.trace import trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split
from gspmd_viz.core.spmd.instructions import Halo

__all__ = ["SpatialProgram", "spatial_program"]


@dataclasses.dataclass(frozen=True)
class SpatialProgram:
    """`spmd` is the per-device program (gv.partition's record: instructions, collectives;
    `spmd(*inputs)` runs it); `permutes` are its halo exchanges."""

    spmd: object
    inputs: tuple
    permutes: tuple[HaloPermute, ...]

    @property
    def program(self) -> Callable:
        """The partitioned function, called on `inputs`."""
        return self.spmd

    def __call__(self):
        return self.spmd(*self.inputs)

    @property
    def collectives(self):
        """Every collective of the per-device program (`gv.Collective`, source = the equation):
        the halo exchanges' collective-permutes, and whatever else the program needs."""
        return self.spmd.collectives


def spatial_program(fn, x, *weights, mesh: Mesh, axes: Mapping[int, str]) -> SpatialProgram:
    """Partition `fn(x, *weights)` with `x`'s `axes` dims ({dim: mesh axis}) split (see the
    module docstring)."""
    unknown = sorted(set(axes.values()) - set(mesh.axis_names))
    if unknown:
        raise ValueError(f"axes {unknown} are not axes of {mesh!r}")
    spec = tuple(axes.get(d) for d in range(x.ndim))

    def annotated(x, *weights):
        return fn(mesh_split(x, mesh, spec), *weights)

    spmd = Partitioner(propagate(trace(annotated, x, *weights)), None, follow=True).run()
    permutes = tuple(p for ins in spmd.instructions if isinstance(ins, Halo) for p in ins.permutes)
    return SpatialProgram(spmd, (x, *weights), permutes)
