"""The oracle: what XLA's own partitioner does with the same program.

`gv.xla.propagate(f, *args, mesh=mesh)` reads the sharding XLA (Shardy) propagated to each
equation; `gv.xla.collectives(f, *args, mesh=mesh)` lists the collectives of XLA's partitioned
program. Modules: compiled (lower, compile, parse collectives), scatter (reduce-scatters XLA:CPU
writes as all-reduce + slice), dump (HLO dumps), propagation, cost (FLOPs and memory compiled).
Core never imports this package: the reference must not lean on XLA's answers.
"""

from gspmd_viz.xla.compiled import collectives
from gspmd_viz.xla.propagation import (
    Comparison,
    XlaPropagation,
    compare,
    propagate,
    propagate_program,
)

__all__ = [
    "Comparison",
    "XlaPropagation",
    "collectives",
    "compare",
    "propagate",
    "propagate_program",
]
