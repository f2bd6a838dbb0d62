"""Oracles shared by tests: a program partitioned by us, checked against itself
run on one device, with XLA's collectives for the same input and output shardings."""

import numpy as np

import gspmd_viz as gv


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
