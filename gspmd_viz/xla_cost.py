"""The oracle for compute and memory: XLA's own analysis of both compiled programs, per device.

`compare(f, args, spmd)` compiles ours (jax.jit of the partitioned runner) and XLA's (jax.jit of
the annotated function with the same input and output shardings) and reads each compiled
program's `cost_analysis()` FLOPs and `memory_analysis()` bytes (arguments + outputs + temporaries
- aliased), and each side's wire bytes (XLA's with its all-reduce + dynamic-slice counted as the
reduce-scatter it is).
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.xla_collectives import compiled, parse_hlo


@dataclasses.dataclass(frozen=True)
class Measured:
    flops: float
    memory: int
    wire_bytes: float


@dataclasses.dataclass(frozen=True)
class Side:
    ours: Measured
    xla: Measured

    def ratio(self, field: str) -> float:
        a, b = getattr(self.ours, field), getattr(self.xla, field)
        return a / b if b else (1.0 if a == b else float("inf"))

    def text(self) -> str:
        return ", ".join(
            f"{k} {getattr(self.ours, k):,.0f}/{getattr(self.xla, k):,.0f} = {self.ratio(k):.3f}x"
            for k in ("flops", "memory", "wire_bytes")
        )


def analysis(executable) -> tuple[float, int]:
    """(FLOPs, bytes) of one device's compiled program."""
    cost = executable.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    mem = executable.memory_analysis()
    total = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return float(cost.get("flops", 0.0)), int(total - mem.alias_size_in_bytes)


def compare(f, args, spmd) -> Side:
    """Ours next to XLA's for `f(*args)`, both with spmd's input and output shardings."""
    flat = spmd.program.flatten_args(*args)
    ours = analysis(spmd.jitted().lower(*flat).compile())
    prop = spmd.prop
    theirs = compiled(
        f, *args, mesh=spmd.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    xla_bytes = sum(c.wire_bytes for c in parse_hlo(theirs.as_text(), spmd.mesh))
    return Side(Measured(*ours, spmd.wire_bytes), Measured(*analysis(theirs), xla_bytes))


__all__ = ["Measured", "Side", "analysis", "compare"]
