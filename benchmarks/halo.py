"""Halo-exchange benchmark, measured side by side in one run (prints; never asserts).

A spatially partitioned conv net (3x3 convs, relu, a strided conv, max pooling) on an image
split 2x4 over 8 CPU devices, weights replicated; its gradient w.r.t. the image; and a 1-D
stencil of shifts (pad, slice, roll, concatenate) along a dim split 8 ways:
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


def image_grad(x, w1, w2, w3):
    # d loss / d image, split like the image: each backward conv exchanges halos too
    g = jax.grad(lambda x: jnp.sum(conv_net(x, w1, w2, w3) ** 2))(x)
    return gv.mesh_split(g, MESH, SPLIT)


LINE = gv.Mesh({"x": 8})


def stencil(x):
    # [B, N/x] -> shifted copies (permutes of the boundary elements only) -> [B, N/x]
    x = gv.mesh_split(x, LINE, (None, "x"))
    left = lax.pad(x[:, 1:], 0.0, ((0, 0, 0), (0, 1, 0)))  # x[j + 1]
    right = jnp.concatenate([jnp.zeros_like(x[:, :1]), x[:, :-1]], axis=1)  # x[j - 1]
    y = left - 2 * x + right + 0.1 * jnp.roll(x, 3, axis=1)
    return gv.mesh_split(y, LINE, (None, "x"))


def measure(fn, args, mesh):
    prop = gv.propagate(gv.trace(fn, *args))
    spmd = gv.partition(prop)
    theirs = gv.xla.collectives(
        fn, *args, mesh=mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    ours_b, xla_b = spmd.wire_bytes, sum(c.wire_bytes for c in theirs)
    named = [s.to_named_sharding() for s in prop.inputs]
    args = [jax.device_put(a, s) for a, s in zip(args, named, strict=True)]
    jitted = jax.jit(fn, in_shardings=named, out_shardings=prop.outputs[0].to_named_sharding())
    np.testing.assert_allclose(np.asarray(spmd(*args)), np.asarray(jitted(*args)), rtol=1e-3,
                               atol=1e-3)  # fmt: skip
    ours_t, jit_t = paired_times(lambda: spmd(*args), lambda: jitted(*args))
    kinds = sorted({c.kind for c in spmd.collectives})
    return ours_b, xla_b, ours_t, jit_t, kinds


def conv_args(image: int, channels: int):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, channels, image, image)), jnp.float32)
    ws = [jnp.asarray(rng.normal(size=(channels, channels, 3, 3)) * 0.1, jnp.float32)
          for _ in range(3)]  # fmt: skip
    return (x, *ws)


def row(name, ours_b, xla_b, ours_t, jit_t, kinds):
    cells = (name, format_bytes(ours_b), format_bytes(xla_b), f"{ours_b / xla_b:.2f}",
             format_time(ours_t), format_time(jit_t), f"{ours_t / jit_t:.2f}")  # fmt: skip
    print("".join(f"{c:>14}" for c in cells) + f"   ours: {', '.join(kinds)}")


def main():
    cols = ("program", "ours", "XLA", "bytes", "ours", "jax.jit", "time")
    print(f"conv net on an image split 2x4 over {MESH!r} (weights replicated)")
    print("".join(f"{c:>14}" for c in cols))
    for image, channels in ((64, 16), (128, 32), (256, 32)):
        row(f"{image}x{image}x{channels}", *measure(conv_net, conv_args(image, channels), MESH))
    print(f"gradient w.r.t. the image, split 2x4 over {MESH!r}")
    for image, channels in ((64, 16), (128, 32)):
        args = conv_args(image, channels)
        row(f"d{image}x{image}x{channels}", *measure(image_grad, args, MESH))
    print(f"1-D stencil of shifts (pad, slice, concatenate, roll) split over {LINE!r}")
    for n in (1 << 12, 1 << 16, 1 << 18):
        x = jnp.asarray(np.random.default_rng(1).normal(size=(4, n)), jnp.float32)
        row(f"4x{n}", *measure(stencil, (x,), LINE))


if __name__ == "__main__":
    main()
