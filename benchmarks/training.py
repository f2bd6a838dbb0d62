"""Training-step benchmarks, measured side by side in one run (prints; never asserts).

For the zoo transformer's Adam step (2 layers) under DP, DP + weight-update sharding and 2-D:
1. our partitioned step's runtime / jax.jit's with the same input and output shardings on 8 CPU
   devices (medians of alternating runs; goal <= 1.15);
2. our wire bytes / XLA's (gv.xla.collectives, same boundary shardings; goal <= 1.0).

Run: PYTHONPATH=. .venv/bin/python benchmarks/training.py
"""

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
from timing import paired_times  # noqa: E402

from gspmd_viz.zoo import examples  # noqa: E402
from gspmd_viz.zoo import training as tz  # noqa: E402

DP_MESH = gv.Mesh({"x": 8})
MESH_2D = gv.Mesh({"x": 2, "y": 4})


def strategies():
    dp = tz.make_step(DP_MESH, tz.DP_SPECS)
    two_d = tz.make_step(MESH_2D, examples.TRANSFORMER_SPECS)
    return {
        "DP (x=8)": (dp, DP_MESH),
        "DP + WUS (x=8)": (gv.weight_update_sharding(dp, DP_MESH, "x"), DP_MESH),
        "2-D + WUS (x=2, y=4)": (gv.weight_update_sharding(two_d, MESH_2D, "x"), MESH_2D),
    }


def _tree(like, flat):
    return jax.tree.unflatten(jax.tree.structure(like), flat)


def measure(step, mesh, args):
    prop = gv.propagate(gv.trace(step, *args))
    spmd = gv.partition(prop)
    theirs = gv.xla.collectives(
        step, *args, mesh=mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    leaves = zip(jax.tree.leaves(args), prop.inputs, strict=True)
    placed = _tree(args, [jax.device_put(x, s.to_named_sharding()) for x, s in leaves])
    outs = jax.eval_shape(step, *args)
    jitted = jax.jit(
        step,
        in_shardings=_tree(args, [s.to_named_sharding() for s in prop.inputs]),
        out_shardings=_tree(outs, [s.to_named_sharding() for s in prop.outputs]),
    )
    ours_t, jit_t = paired_times(lambda: spmd(*placed), lambda: jitted(*placed), repeats=21)
    return spmd.wire_bytes, sum(c.wire_bytes for c in theirs), ours_t, jit_t, spmd.summary()


def main() -> None:
    params, opt, batches = tz.init(layers=2, batch=16)
    args = (params, opt, batches(0))
    print(
        f"{'strategy':<22} {'ours B':>9} {'XLA B':>9} {'bytes':>6}   {'ours':>9} {'jit':>9} "
        f"{'time':>6}"
    )
    for name, (step, mesh) in strategies().items():
        ours_b, xla_b, ours_t, jit_t, summary = measure(step, mesh, args)
        print(
            f"{name:<22} {ours_b:>9.0f} {xla_b:>9.0f} {ours_b / xla_b:>6.2f}   "
            f"{ours_t * 1e3:>7.2f}ms {jit_t * 1e3:>7.2f}ms {ours_t / jit_t:>6.2f}   ({summary})"
        )


if __name__ == "__main__":
    main()
