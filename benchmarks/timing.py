"""Timing both sides of a comparison under the same machine load (shared by the benchmarks)."""

import statistics
import sys
import time

import jax

import gspmd_viz as gv


def paired_times(fn_a, fn_b, repeats: int = 41, warmup: int = 3) -> tuple[float, float]:
    """Median seconds of two functions, run alternately so both see the same machine load."""
    for _ in range(warmup):
        jax.block_until_ready(fn_a())
        jax.block_until_ready(fn_b())
    times_a, times_b = [], []
    for _ in range(repeats):
        for fn, times in ((fn_a, times_a), (fn_b, times_b)):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times.append(time.perf_counter() - start)
    return statistics.median(times_a), statistics.median(times_b)


def median_ms(fn, repeat: int = 7) -> float:
    """Median milliseconds of `fn()` over `repeat` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def first_call(f, args):
    """f traced afresh, with the package's caches emptied: what a user's first gv.partition of
    a model meets. Re-partitioning one program would time answers the caches kept from the
    last run (the module-level reshard-plan cache above all)."""
    empty_caches()
    return gv.trace(f, *args)


def empty_caches() -> None:
    """Empty every functools cache in gspmd_viz (`first_call`)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("gspmd_viz"):
            for obj in vars(module).values():
                mine = str(getattr(obj, "__module__", "")).startswith("gspmd_viz")
                if mine and callable(getattr(obj, "cache_clear", None)):  # not jax's (XLA's side)
                    obj.cache_clear()
