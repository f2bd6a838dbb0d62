"""Control flow: propagate + partition time of a scanned transformer stack must not grow with
the trip count (GSPMD partitions a loop body once), next to XLA's compile time for the same.

PYTHONPATH=$PWD .venv/bin/python benchmarks/control_flow.py
"""

import statistics

import gspmd_viz as gv

gv.use_cpu_devices(8)

import jax  # noqa: E402
from timing import first_call, median_ms  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.zoo import examples  # noqa: E402

LAYERS = (4, 16, 64)


def main() -> None:
    stacks = {n: examples.scanned_stack(n) for n in LAYERS}
    programs = {n: gv.trace(ex.fn, *ex.args) for n, ex in stacks.items()}
    ours, xla = {}, {}
    for _ in range(5):  # alternate, so machine noise hits every size alike
        for n, ex in stacks.items():  # a first call: a fresh trace, the caches empty
            prog = first_call(ex.fn, ex.args)
            run = lambda p=prog: gv.partition(gv.propagate(p))  # noqa: E731
            ours.setdefault(n, []).append(median_ms(run, 1))
    for n, ex in stacks.items():
        # a fresh function each time, so jax's caches cannot skip the lowering or the compile
        fresh = lambda ex=ex: jax.jit(lambda *a: ex.fn(*a)).lower(*ex.args).compile()  # noqa: E731
        xla[n] = median_ms(fresh, 3)
    for n in LAYERS:
        spmd = gv.partition(gv.propagate(programs[n]))
        print(
            f"{n:3d} scanned layers ({len(programs[n].equations)} eqns): ours propagate+partition "
            f"{statistics.median(ours[n]):7.1f} ms   XLA lower+compile {xla[n]:7.1f} ms   "
            f"wire {spmd.wire_bytes / 2**20:6.2f} MiB"
        )
    ratio = statistics.median(ours[64]) / statistics.median(ours[4])
    print(f"ours 64 / 4 layers: {ratio:5.2f}  (goal <= 1.2)")
    print(f"XLA  64 / 4 layers: {xla[64] / xla[4]:5.2f}")


if __name__ == "__main__":
    main()
