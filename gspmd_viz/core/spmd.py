"""The per-device program `gv.partition` builds, as data: instructions, their text, their
collectives. Running them is execute.py's job (a table keyed by instruction type).

Four kinds of instruction, each a plain record that prints itself:
  Compute   one equation on local shards          `c:f32[8,16] = dot_general a b`
  Reshard   a resharding plan between two buffers `c.1:f32[16,16] = all-gather(x) c`
  Combine   all-reduce of partial max/min results `m.1:f32[8] = all-reduce-max(y) m`
  Const     a closed-over constant, whole on every device
"""

import dataclasses

from gspmd_viz.core.collective import Collective
from gspmd_viz.core.program import Equation, Literal, Value
from gspmd_viz.core.sharding import Sharding, short_dtype
from gspmd_viz.units import format_bytes


def _comment(code: str, comment: str) -> str:
    """`code   # comment`, comments aligned at column 48 (or one space after long code)."""
    return f"{code:<47} # {comment}"


def _local_type(sharding: Sharding, v) -> str:
    dims = ",".join(str(n) for n in sharding.shard_shape(v.shape))
    pending = f"{{sum over {','.join(sorted(sharding.unreduced))}}}" if sharding.unreduced else ""
    return f"{short_dtype(v.dtype)}[{dims}]{pending}"


# --- instructions of the per-device program -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Compute:
    eqn: Equation
    ins: tuple  # local buffer names, or Literals
    outs: tuple[str, ...]
    params: dict
    shardings: tuple[Sharding, ...]  # of the results, as computed (maybe pending sums)
    operand_shardings: tuple
    masks: tuple = ()
    offsets: tuple = ()
    lookup: object = None
    flops: float = 0.0  # per device, under the chosen split (cost.py)
    hbm_bytes: float = 0.0  # local operands read plus results written
    partial: tuple = ()  # ("max", axes): results hold partial maxima until a Combine

    def out_type(self, sharding: Sharding, v) -> str:
        how = f"{{{self.partial[0]} over {','.join(self.partial[1])}}}" if self.partial else ""
        return _local_type(sharding, v) + how

    def text(self) -> str:
        e = self.eqn
        outs = " ".join(
            f"{n}:{self.out_type(s, v)}"
            for n, s, v in zip(self.outs, self.shardings, e.outputs, strict=True)
        )
        ins = " ".join(a if isinstance(a, str) else repr(a) for a in self.ins)
        ops = ", ".join(
            v.type_text(s) if isinstance(v, Value) else repr(v)
            for v, s in zip(e.inputs, self.operand_shardings, strict=True)
        )
        res = ", ".join(v.type_text(s) for v, s in zip(e.outputs, self.shardings, strict=True))
        return _comment(f"{outs} = {e.primitive} {ins}", f"{ops} -> {res}")


@dataclasses.dataclass(frozen=True)
class Reshard:
    """Move value `value` from buffer `src` to buffer `dst` for equation `consumer`."""

    value: Value
    src: str
    dst: str
    plan: object
    consumer: Equation | None  # None: a program output

    @property
    def source(self) -> str:
        where = f"eqn {self.consumer.index} {self.consumer.primitive}" if self.consumer else "out"
        return f"{self.value.name} -> {where}"

    @property
    def collectives(self) -> list[Collective]:
        return [dataclasses.replace(c, source=self.source) for c in self.plan.collectives]

    def text(self) -> str:
        if not self.plan.steps:
            return f"{self.dst} = {self.src}"
        ops = " -> ".join(
            f"{s.kind}({','.join(s.axes)})" for s in self.plan.steps if s.kind != "slice"
        )
        ops = ops or "slice"
        v, p = self.value, self.plan
        head = f"{self.dst}:{_local_type(p.dst, v)} = {ops} {self.src}"
        cost = f"   {format_bytes(p.wire_bytes)}" if p.wire_bytes else "   free"
        return _comment(head, f"{v.type_text(p.src)} -> {v.type_text(p.dst)}{cost}")


@dataclasses.dataclass(frozen=True)
class Combine:
    """All-reduce partial max/min results over the split reduction axes right away."""

    value: Value
    src: str
    dst: str
    combine: str
    axes: tuple[str, ...]
    sharding: Sharding
    collective: Collective

    @property
    def collectives(self):
        return [self.collective]

    def text(self) -> str:
        head = f"{self.dst}:{_local_type(self.sharding, self.value)} = "
        head += f"all-reduce-{self.combine}({','.join(self.axes)}) {self.src}"
        return _comment(head, format_bytes(self.collective.wire_bytes))


@dataclasses.dataclass(frozen=True)
class Const:
    """A closed-over constant array, whole on every device (resharding slices it)."""

    name: str
    literal: Literal

    collectives = ()

    def text(self) -> str:
        return f"{self.name} = {self.literal!r}"


class PerDeviceProgram:
    """What every device runs, as data and text: `.per_device_text()`, `.collectives`
    (execute.SPMDProgram adds running it: `spmd(*args)`)."""

    def __init__(self, prop, instructions, outputs, notes):
        self.prop, self.program, self.mesh = prop, prop.program, prop.mesh
        self.instructions = tuple(instructions)
        self.outputs = tuple(outputs)  # local buffer names (or Literals)
        self.notes = tuple(notes)
        self.cost = None  # a cost.PlanCost, set by gv.partition

    # --- communication ---------------------------------------------------------------------
    @property
    def collectives(self) -> list[Collective]:
        return [c for ins in self.instructions for c in getattr(ins, "collectives", ())]

    @property
    def wire_bytes(self) -> float:
        return float(sum(c.wire_bytes for c in self.collectives))

    def computed_sharding(self, value: Value) -> Sharding:
        """The sharding a value has where it is computed (pending sums included)."""
        for ins in self.instructions:
            if isinstance(ins, Compute) and value in ins.eqn.outputs:
                return ins.shardings[ins.eqn.outputs.index(value)]
        return self.prop.sharding(value)

    # --- text ------------------------------------------------------------------------------
    def per_device_text(self) -> str:
        """The per-device program, local shapes and collectives inline (like partitioned HLO)."""
        ins = " ".join(
            f"{v.name}:{_local_type(self.prop.sharding(v), v)}" for v in self.program.inputs
        )
        head = f"# every device of {self.mesh!r} runs this on its own shard"
        lines = [head, f"{{ lambda {ins}. let"]
        lines += ["  " + ins.text() for ins in self.instructions]
        outs = ", ".join(o if isinstance(o, str) else repr(o) for o in self.outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for c in self.collectives:
            kinds[c.kind] = kinds.get(c.kind, 0) + 1
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "no collectives"
        return f"{counts}; {format_bytes(self.wire_bytes)} per device on the wire"

    def __str__(self) -> str:
        return self.per_device_text()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.mesh!r}: {self.summary()}>"
