"""Compute and memory beside bytes: XLA's own analysis of both compiled programs, per device.

`gv.xla_cost.compare(f, args, spmd)` compiles ours (`spmd.compiled(*args)`: jax.jit of the
per-device program under shard_map, without the runner's padding of uneven inputs) and XLA's
(jax.jit of the annotated `f` with the same input and output shardings), and reads each
executable's `cost_analysis()` FLOPs and `memory_analysis()` bytes (arguments + outputs +
temporaries − aliased), with each side's wire bytes.
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.units import format_bytes
from gspmd_viz.xla_collectives import compiled, parse_hlo

__all__ = ["Measured", "Side", "analysis", "compare", "ours", "xlas"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One compiled program, per device."""

    flops: float
    memory: int  # bytes
    wire_bytes: float


@dataclasses.dataclass(frozen=True)
class Side:
    """Ours next to XLA's for one program."""

    ours: Measured
    xla: Measured

    def ratio(self, field: str) -> float:
        """Ours / XLA's for "flops", "memory" or "wire_bytes" (1.0 when both are 0)."""
        a, b = getattr(self.ours, field), getattr(self.xla, field)
        return a / b if b else (1.0 if a == b else float("inf"))

    def text(self) -> str:
        """`FLOPs ours / XLA, memory ours / XLA, wire ours / XLA` on one line."""
        o, x = self.ours, self.xla
        return (
            f"FLOPs {o.flops:>8,.0f} / {x.flops:<8,.0f}  "
            f"memory {format_bytes(o.memory):>9} / {format_bytes(x.memory):<9}  "
            f"wire {format_bytes(o.wire_bytes):>9} / {format_bytes(x.wire_bytes)}"
        )


def analysis(executable) -> tuple[float, int]:
    """(FLOPs, bytes) of one device's compiled program."""
    cost = executable.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost  # older jax: one dict per program
    mem = executable.memory_analysis()
    total = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return float(cost.get("flops", 0.0)), int(total - mem.alias_size_in_bytes)


def ours(spmd, args) -> Measured:
    """Our per-device program for `args`, compiled and measured."""
    return Measured(*analysis(spmd.compiled(*args)), spmd.wire_bytes)


def xlas(f, args, prop) -> Measured:
    """XLA's partitioning of `f(*args)` with `prop`'s input and output shardings (a
    gv.propagate result), compiled and measured: the same for every plan of `prop`."""
    theirs = compiled(
        f, *args, mesh=prop.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    xla_bytes = sum(c.wire_bytes for c in parse_hlo(theirs.as_text(), prop.mesh))
    return Measured(*analysis(theirs), xla_bytes)


def compare(f, args, spmd) -> Side:
    """Ours next to XLA's for `f(*args)`, both with `spmd`'s input and output shardings."""
    return Side(ours(spmd, args), xlas(f, args, spmd.prop))
