"""Halo-exchange benchmark, measured side by side in one run (prints; never asserts).

A spatially partitioned conv net (3x3 convs, relu, a strided conv, max pooling) on an image
split 2x4 over 8 CPU devices, weights replicated:
1. Our wire bytes / XLA's for the same input and output shardings (goal <= 1.0).
2. Our partitioned runtime (gv.partition, halo exchanges) / jax.jit with the same shardings
   (medians of alternating runs; goal <= 1.15).

Run: .venv/bin/python benchmarks/halo.py
"""

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from timing import paired_times  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.units import format_bytes, format_time  # noqa: E402

MESH = gv.Mesh({"rows": 2, "cols": 4})
SPLIT = (None, None, "rows", "cols")


def conv_net(x, w1, w2, w3):
    # [B, C, H/rows, W/cols] all the way: every conv and pool exchanges halos
    x = gv.mesh_split(x, MESH, SPLIT)
    y = jnp.maximum(lax.conv_general_dilated(x, w1, (1, 1), "SAME"), 0.0)
    y = jnp.maximum(lax.conv_general_dilated(y, w2, (2, 2), "SAME"), 0.0)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")
    return jnp.maximum(lax.conv_general_dilated(y, w3, (1, 1), "SAME"), 0.0)


def measure(image: int, channels: int):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, channels, image, image)), jnp.float32)
    ws = [jnp.asarray(rng.normal(size=(channels, channels, 3, 3)) * 0.1, jnp.float32)
          for _ in range(3)]  # fmt: skip
    prop = gv.propagate(gv.trace(conv_net, x, *ws))
    spmd = gv.partition(prop)
    theirs = gv.xla.collectives(
        conv_net, x, *ws, mesh=MESH, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    ours_b, xla_b = spmd.wire_bytes, sum(c.wire_bytes for c in theirs)
    named = [s.to_named_sharding() for s in prop.inputs]
    args = [jax.device_put(a, s) for a, s in zip((x, *ws), named, strict=True)]
    jitted = jax.jit(
        conv_net, in_shardings=named, out_shardings=prop.outputs[0].to_named_sharding()
    )
    np.testing.assert_allclose(np.asarray(spmd(*args)), np.asarray(jitted(*args)), rtol=1e-3,
                               atol=1e-3)  # fmt: skip
    ours_t, jit_t = paired_times(lambda: spmd(*args), lambda: jitted(*args))
    kinds = sorted({c.kind for c in spmd.collectives})
    return ours_b, xla_b, ours_t, jit_t, kinds


def main():
    print(f"conv net on an image split 2x4 over {MESH!r} (weights replicated)")
    cols = ("image", "ours", "XLA", "bytes", "ours", "jax.jit", "time")
    print("".join(f"{c:>11}" for c in cols))
    for image, channels in ((64, 16), (128, 32), (256, 32)):
        ours_b, xla_b, ours_t, jit_t, kinds = measure(image, channels)
        row = (f"{image}x{image}x{channels}", format_bytes(ours_b), format_bytes(xla_b),
               f"{ours_b / xla_b:.2f}", format_time(ours_t), format_time(jit_t),
               f"{ours_t / jit_t:.2f}")  # fmt: skip
        print("".join(f"{c:>11}" for c in row) + f"   ours: {', '.join(kinds)}")


if __name__ == "__main__":
    main()
