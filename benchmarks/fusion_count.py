"""Why gv.xla_cost reads FLOPs off a program compiled with XLA:CPU's loop fusion off (prints;
never asserts).

A chain of elementwise ops on one [1024, 1024] array (48 multiply-adds an element), then cut
into n row blocks, as an all-to-all cuts its operand into one chunk per peer. XLA:CPU fuses the
chain into each block's slice. Its cost analysis charges every fusion for the whole chain, so
the n blocks count n times the FLOPs of computing the array once; compiled with `WORK`
(`xla_disable_hlo_passes=fusion`), each op counts once. The time says which is the work done:
the n fused blocks take about as long as the whole array once, not n times as long.

Run: .venv/bin/python benchmarks/fusion_count.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from timing import paired_times  # (benchmarks/ is the script's directory)

from gspmd_viz.xla import cost as xla_cost

ROWS = COLS = 1024
STEPS = 48  # multiply-adds an element: 5 FLOPs each


def chain(a):
    for _ in range(STEPS):
        a = a * a * 0.5 + a * 0.25 + 0.125
    return a


def blocks(n: int):
    """The chain's result cut into n row blocks: [ROWS, COLS] -> n x [ROWS / n, COLS]."""
    rows = ROWS // n

    def cut(a):
        whole = chain(a)
        return [whole[i * rows : (i + 1) * rows] for i in range(n)]

    return cut


def main() -> None:
    a = jnp.asarray(np.random.default_rng(0).normal(size=(ROWS, COLS)).astype(np.float32))
    once = jax.jit(chain).lower(a).compile()
    once_flops = xla_cost.flops(once)
    print(f"the chain once, [{ROWS}, {COLS}]: {once_flops:,.0f} FLOPs")
    print("  n blocks | FLOPs fused / once | FLOPs unfused / once | time fused / once (ms)")
    for n in (2, 4, 8):
        lowered = jax.jit(blocks(n)).lower(a)
        fused = lowered.compile()
        unfused = xla_cost.flops(lowered.compile(xla_cost.WORK))
        t_fused, t_once = paired_times(lambda f=fused: f(a), lambda: once(a))
        print(
            f"  {n:8d} | {xla_cost.flops(fused) / once_flops:19.2f} | "
            f"{unfused / once_flops:20.2f} | {t_fused / t_once:17.2f} "
            f"({1e3 * t_fused:.2f} / {1e3 * t_once:.2f})"
        )


if __name__ == "__main__":
    main()
