"""Cold resharding plans on the library models (prints; never asserts).

gv.partition asks `cached_plan(src, dst, shape, dtype)` for every resharding it weighs; a
user's first call on a model pays each plan cold. Per model (tests/library_models.py):
propagate + partition CPU ms on a first call (timing.first_call: a fresh trace, the
package's caches emptied; cold) and with the caches kept from the previous run (warm),
medians of 7, their ratio; the distinct plans asked for and the cold CPU microseconds per
plan (`reshard_plan` on those arguments, median of 5 passes: the search and its wire bytes; a
plan's steps are made only when read, for the few reshardings a partition keeps, and are
counted in the cold ms, not here).

Run: .venv/bin/python benchmarks/reshard_plans.py [llama llama_kh mixtral gpt_neox]
"""

import statistics
import sys
import time
from pathlib import Path

import gspmd_viz as gv

gv.use_cpu_devices(8)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from library_models import MODELS, build  # noqa: E402
from timing import first_call  # noqa: E402

from gspmd_viz.core.choice import choose_split  # noqa: E402
from gspmd_viz.core.reshard.planner import reshard_plan  # noqa: E402


def partition_ms(f, args, cold: bool, repeats: int = 7) -> float:
    """Median CPU ms of propagate + partition on a fresh trace."""
    times = []
    for _ in range(repeats):
        prog = first_call(f, args) if cold else gv.trace(f, *args)
        start = time.process_time()
        gv.partition(gv.propagate(prog))
        times.append(time.process_time() - start)
    return 1e3 * statistics.median(times)


def asked_plans(f, args) -> list[tuple]:
    """The (src, dst, shape, dtype) of every distinct plan one cold partition asks for."""
    asked, plan = [], choose_split.reshard_plan

    def record(*arguments):
        asked.append(arguments)
        return plan(*arguments)

    choose_split.reshard_plan = record
    try:
        gv.partition(gv.propagate(first_call(f, args)))
    finally:
        choose_split.reshard_plan = plan
    return asked


def plan_us(asked, repeats: int = 5) -> float:
    passes = []
    for _ in range(repeats):
        start = time.process_time()
        for arguments in asked:
            reshard_plan(*arguments)
        passes.append(time.process_time() - start)
    return 1e6 * statistics.median(passes) / len(asked)


if __name__ == "__main__":
    print(f"{'model':<10}{'cold ms':>9}{'warm ms':>9}{'cold/warm':>11}{'plans':>7}{'us/plan':>9}")
    for name in [a for a in sys.argv[1:] if a in MODELS] or MODELS:
        f, args = build(name)
        cold, warm = partition_ms(f, args, True), partition_ms(f, args, False)
        asked = asked_plans(f, args)
        row = f"{name:<10}{cold:>9.1f}{warm:>9.1f}{cold / warm:>11.2f}{len(asked):>7}"
        print(f"{row}{plan_us(asked):>9.0f}", flush=True)
