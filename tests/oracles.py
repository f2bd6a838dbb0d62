"""Oracles shared by tests: a one-argument program partitioned by us, checked against itself
run on one device, with XLA's collectives for the same input and output shardings."""

import numpy as np

import gspmd_viz as gv


def partitioned_and_xla(f, x, mesh: gv.Mesh):
    """(our SPMDProgram, XLA's collectives) for f(x); ours must equal f on one device exactly."""
    prog = gv.trace(f, x)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    np.testing.assert_array_equal(np.asarray(spmd(x)), np.asarray(prog.unpartitioned(x)))
    theirs = gv.xla.collectives(f, x, mesh=mesh, in_shardings=prop.inputs,
                                out_shardings=prop.outputs)  # fmt: skip
    return spmd, theirs
