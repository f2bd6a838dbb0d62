"""Oracles shared by tests: a program partitioned by us, checked against itself
run on one device, with XLA's collectives for the same input and output shardings."""

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

import gspmd_viz as gv
from gspmd_viz.xla import cost as xla_cost


def partitioned_and_xla(f, *args, mesh: gv.Mesh, tol: float = 0.0):
    """(our SPMDProgram, XLA's collectives) for f(*args); ours must equal f on one device
    (exactly, or within `tol` relative and absolute)."""
    prog = gv.trace(f, *args)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    np.testing.assert_allclose(
        np.asarray(spmd(*args)), np.asarray(prog.unpartitioned(*args)), rtol=tol, atol=tol
    )
    theirs = gv.xla.collectives(f, *args, mesh=mesh, in_shardings=prop.inputs,
                                out_shardings=prop.outputs)  # fmt: skip
    return spmd, theirs


def place_flops(mesh: gv.Mesh, axes) -> float:
    """FLOPs XLA counts for one device finding its place along mesh `axes` alone (jax's
    axis_index: the partition id shifted, masked and converted), compiled and measured."""
    axes = (axes,) if isinstance(axes, str) else tuple(axes)

    def place():
        return jax.lax.axis_index(axes).reshape(1)

    find = jax.shard_map(place, mesh=mesh.to_jax(), in_specs=(), out_specs=P(axes))
    return xla_cost.flops(jax.jit(find).lower().compile(xla_cost.WORK))
