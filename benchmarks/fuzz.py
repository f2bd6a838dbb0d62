"""The long profile of the program generator (tests/fuzz_programs.py): random small programs,
partitioned and run, each compared with the same program unannotated on one device and with
XLA's wire bytes. Prints every wrong, crashed or over-bytes program (known ones, whose steps are
in fuzz_programs.BYTES_GAPS, marked so), then the summary.

    PYTHONPATH=$PWD python benchmarks/fuzz.py --seconds 300
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import gspmd_viz as gv

gv.use_cpu_devices(8)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_programs import check, programs  # noqa: E402
from hypothesis.errors import NonInteractiveExampleWarning  # noqa: E402


def main(seconds: float, with_xla: bool) -> None:
    warnings.simplefilter("ignore", NonInteractiveExampleWarning)
    counts = {"programs": 0, "wrong": 0, "crashed": 0, "over-bytes": 0, "over-bytes (known)": 0}
    strategy, end = programs(), time.monotonic() + seconds
    while time.monotonic() < end:
        p = strategy.example()
        out = check(p, with_xla)
        counts["programs"] += 1
        for kind, what in (("wrong", out.wrong), ("crashed", out.crashed)):
            if what:
                counts[kind] += 1
                print(f"--- {kind}: {what}\n{p}")
        if out.over_bytes:
            known = p.bytes_gap
            counts["over-bytes (known)" if known else "over-bytes"] += 1
            kind = "over-bytes (known: BYTES_GAPS)" if known else "over-bytes"
            print(f"--- {kind}: ours {out.ours:.0f} B, XLA {out.xla:.0f} B\n{p}")
    print(", ".join(f"{k}: {n}" for k, n in counts.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--no-xla", action="store_true")
    args = parser.parse_args()
    main(args.seconds, not args.no_xla)
