"""`PartitionerState`: what the helpers of the pass (lookahead.py, remake_scalars.py,
control_flow.py) read of the Partitioner and change in it, named and typed here so that the
coupling is visible: the instruction list they append to, the buffers each value exists in
(`versions`), and the few questions they ask. partitioner.Partitioner is the one implementation.
"""

from __future__ import annotations

from typing import Protocol

from gspmd_viz.core.choice.choose_split import Costs, EquationSplit
from gspmd_viz.core.program.trace import Equation, Program, Value
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding

__all__ = ["PartitionerState"]


class PartitionerState(Costs, Protocol):
    """The partitioner's state as its helper modules see it."""

    prop: object  # the gv.propagate record the pass partitions
    program: Program
    mesh: Mesh
    outputs: set[Value]  # the program's outputs
    live_set: set[Equation]  # equations whose results something reads
    deferred: dict  # equations a block move (roll, flip) computes instead
    instructions: list  # the per-device program so far; helpers append to it
    versions: dict  # value -> [(sharding, buffer name)], every copy made so far
    invariant: set[str]  # in a loop body: the buffers its constants live in
    trips: int  # in a loop body: its trip count (1 outside loops)
    held: float  # bytes of loop constants moved once, before their loop, and held
    memo: object  # what the passes over one prop share (partitioner.PassMemo)

    def split(self, eqn: Equation) -> EquationSplit:
        """The first rule of `eqn` with propagation's settled split."""

    def buffer(self, v: Value, target: Sharding, eqn: Equation | None) -> str:
        """The name of a buffer holding v in `target`, resharding if needed."""

    def fresh(self, base: str) -> str:
        """A new buffer name."""

    def partition_units(self, units) -> None:
        """Partition equations, loops and branches in order, appending instructions."""
