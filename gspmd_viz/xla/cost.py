"""Compute and memory beside bytes: XLA's own analysis of both compiled programs, per device.

`gv.xla_cost.compare(f, args, spmd)` compiles ours (`spmd.lowered(*args)`: jax.jit of the
per-device program under shard_map, without the runner's padding of uneven inputs) and XLA's
(jax.jit of the annotated `f` with the same input and output shardings), and reads each
executable's `memory_analysis()` bytes (arguments + outputs + temporaries − aliased) and
`cost_analysis()` FLOPs, with each side's wire bytes.

The FLOPs are read off the same program compiled again with XLA:CPU's loop fusion off
(`WORK`). XLA's cost analysis charges a fused op at the shape it has inside the fusion, so a
fusion that ends in a slice pays for the whole operand though its loop computes only the
slice's elements: the n chunks an all-to-all sends from a fused `a * a + a` count n times its
work, in the time one takes (benchmarks/fusion_count.py). Unfused, every op counts once, at its
own shape. The fused program's own count is kept beside (`Measured.fused_flops`).
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.units import format_bytes
from gspmd_viz.xla.compiled import lowered, parse_hlo

__all__ = ["WORK", "Measured", "Side", "analysis", "compare", "flops", "memory", "ours", "xlas"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One compiled program, per device."""

    flops: float  # each op once (compiled with WORK)
    memory: int  # bytes
    wire_bytes: float
    fused_flops: float = 0.0  # as the fused program's cost analysis charges them


@dataclasses.dataclass(frozen=True)
class Side:
    """Ours next to XLA's for one program."""

    ours: Measured
    xla: Measured

    def ratio(self, field: str) -> float:
        """Ours / XLA's for "flops", "memory", "wire_bytes" or "fused_flops" (1.0 when both
        are 0)."""
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


WORK = {  # compiler options: each op counted once; the code is never run, so built fast
    "xla_disable_hlo_passes": "fusion",  # no loop fusion
    "xla_cpu_use_fusion_emitters": False,  # nor one fusion wrapped around each op to emit it
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
}


def analysis(lowered, fused=None) -> tuple[float, int, float]:
    """(FLOPs, bytes, fused FLOPs) of one device's program, lowered (jax's Lowered): the FLOPs
    of every op once (compiled with `WORK`); the bytes of the program as XLA compiles it
    (`fused`, when the caller has compiled it already), and the FLOPs its cost analysis
    charges that program."""
    fused = fused or lowered.compile()
    return flops(lowered.compile(WORK)), memory(fused), flops(fused)


def flops(executable) -> float:
    """FLOPs of one device's compiled program, by XLA's cost analysis."""
    cost = executable.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost  # older jax: one dict per program
    return float(cost.get("flops", 0.0))


def memory(executable) -> int:
    """Bytes one device's compiled program holds: arguments, outputs and temporaries, less
    the outputs that reuse an argument's buffer."""
    mem = executable.memory_analysis()
    total = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return int(total - mem.alias_size_in_bytes)


def ours(spmd, args) -> Measured:
    """Our per-device program for `args`, compiled and measured."""
    work, held, fused = analysis(spmd.lowered(*args))
    return Measured(work, held, spmd.wire_bytes, fused)


def xlas(f, args, prop) -> Measured:
    """XLA's partitioning of `f(*args)` with `prop`'s input and output shardings (a
    gv.propagate result), compiled and measured: the same for every plan of `prop`."""
    theirs = lowered(f, *args, mesh=prop.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs)
    fused = theirs.compile()
    work, held, charged = analysis(theirs, fused)
    xla_bytes = sum(c.wire_bytes for c in parse_hlo(fused.as_text(), prop.mesh))
    return Measured(work, held, xla_bytes, charged)


def compare(f, args, spmd) -> Side:
    """Ours next to XLA's for `f(*args)`, both with `spmd`'s input and output shardings."""
    return Side(ours(spmd, args), xlas(f, args, spmd.prop))
