"""Programs run by tests/test_distributed.py in 2 processes x 4 devices (and in one process).

    python -m gspmd_viz.launch --processes 2 --devices-per-process 4 \
        tests/distributed_programs.py OUT_DIR

Every process writes OUT_DIR/p<process index>.npz: each program's results, flattened.
"""

import sys
from pathlib import Path

import jax
import numpy as np

import gspmd_viz as gv
from gspmd_viz.zoo import examples
from gspmd_viz.zoo import training as tz

MESH = gv.Mesh(examples.DEFAULT_MESH)  # x=2 (crosses the processes), y=4 (inside each)
HALO_CONV = {"img": (None, "x", "y", None), "kernel": None}  # H over x, W over y: halos
TRAIN_STEPS = 3


def partitioned(fn, *args):
    return gv.partition(gv.propagate(gv.trace(fn, *args)))


def zoo_results(ex) -> list:
    return jax.tree.leaves(partitioned(ex.fn, *ex.args)(*ex.args))


def training_results() -> list:
    """Lesson 07's 2-D + weight-update-sharded Adam step, a few steps: losses, last params."""
    params, opt_state, batches = tz.init(layers=2)
    step = gv.weight_update_sharding(tz.make_step(MESH, examples.TRANSFORMER_SPECS), MESH, "x")
    spmd = partitioned(step, params, opt_state, batches(0))
    losses = []
    for i in range(TRAIN_STEPS):
        params, opt_state, loss = spmd(params, opt_state, batches(i))
        losses.append(loss)
    return [np.stack(losses), *jax.tree.leaves(params)]


def results() -> dict:
    """{program: its results as numpy arrays}, the same in one process or several."""
    out = {
        "transformer_block": zoo_results(examples.get("transformer_block", MESH)),
        "halo_conv": zoo_results(examples.get("conv_block", MESH, HALO_CONV)),
        "scanned_stack": zoo_results(examples.scanned_stack(2, MESH)),
        "training_2d": training_results(),
    }
    return {name: [np.asarray(a) for a in arrays] for name, arrays in out.items()}


def flat(found: dict) -> dict:
    return {f"{name}/{i}": a for name, arrays in found.items() for i, a in enumerate(arrays)}


if __name__ == "__main__":
    me = jax.process_index()
    print(f"process {me} of {jax.process_count()}: devices {[d.id for d in jax.local_devices()]}")
    np.savez(Path(sys.argv[1]) / f"p{me}.npz", **flat(results()))
    print(f"process {me}: done")
