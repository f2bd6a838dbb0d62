"""Our propagation against XLA's (Shardy's) on the zoo and the seeded random annotations of
benchmarks/annotations.py: how many programs agree on every equation result XLA reports, and how
many results differ, per program.

    PYTHONPATH=$PWD python benchmarks/propagation_xla.py [--seed 1 --tries 320] [--part 0/2]

Seed 1 with 320 tries and the 12 zoo programs give the 319 programs the issue notes count.
"""

import collections

import gspmd_viz as gv

gv.use_cpu_devices(8)

from annotations import draw_parser, draws, share  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.zoo import examples  # noqa: E402


def main(seed: int, tries: int, part: str) -> None:
    zoo = [examples.get(name) for name in sorted(examples.ZOO)]
    mine = share(zoo + draws(seed, tries), part)
    differing, values, parted = 0, 0, collections.Counter()
    for ex in mine:
        table = gv.xla.compare(gv.propagate(gv.trace(ex.fn, *ex.args)))
        values += len(table.compared)
        differing += len(table.differ)
        if table.differ:
            parted[ex.name] += 1
    agree = len(mine) - sum(parted.values())
    print(f"{agree} of {len(mine)} programs agree with XLA on every result it reports")
    by_program = dict(sorted(parted.items()))
    print(f"{differing} of {values} results differ; programs that differ: {by_program}")


if __name__ == "__main__":
    args = draw_parser().parse_args()
    main(args.seed, args.tries, args.part)
