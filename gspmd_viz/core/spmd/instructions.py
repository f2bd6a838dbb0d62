"""The per-device program `gv.partition` builds, as data: instructions, their text, their
collectives. Running them is spmd/run.py's job (a table keyed by instruction type).

Instructions, each a plain record that prints itself (loops and branches: RunLoop, RunCond):
  Compute    one equation on local shards          `c:f32[8,16] = dot_general a b`
  Reshard    a resharding plan between two buffers `c.1:f32[16,16] = all-gather(x) c`
  Combine    all-reduce of partial max/min results `m.1:f32[8] = all-reduce-max(y) m`
  Halo       a windowed op's halos, exchanged      `x.1:f32[6,8] = halo-exchange(x) x`
  MoveBlocks a roll or flip along a split dim      `e:f32[1,8] = rotate(stage) b`
  Const      a closed-over constant, whole on every device
"""

import collections
import dataclasses
import math

from gspmd_viz.core.halo.exchange import halo_permutes
from gspmd_viz.core.program.trace import Equation, Literal, Value
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.sharding import Sharding, short_dtype
from gspmd_viz.units import format_bytes


def _comment(code: str, comment: str) -> str:
    """`code   # comment`, comments aligned at column 48 (or one space after long code)."""
    return f"{code:<47} # {comment}"


def local_type(sharding: Sharding, v) -> str:
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
    local_op: object = None  # runs instead of the primitive (windowed_ops.local_op)
    partial: str = ""  # "{max over x}": its results hold partial maxima until a Combine
    ready: tuple = ()  # a window-ready result's local shape (its halo goes back after)
    flops: float | None = dataclasses.field(default=None, compare=False, repr=False)  # its
    # FLOPs, worked out where the partitioner made the op (plan_cost.compute_flops), or None
    result_bytes: tuple | None = dataclasses.field(default=None, compare=False, repr=False)
    # bytes of each result's local shard, likewise (plan_cost.peak_bytes), or None

    def text(self) -> str:
        e = self.eqn
        outs = " ".join(
            f"{n}:{local_type(s, v)}{self.partial}"
            for n, s, v in zip(self.outs, self.shardings, e.outputs, strict=True)
        )
        if self.ready:
            dims = ",".join(map(str, self.ready))
            outs = f"{self.outs[0]}:{short_dtype(e.outputs[0].dtype)}[{dims}]"
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
        moves = [f"{s.kind}({','.join(s.axes)})" for s in self.plan.steps if s.kind != "slice"]
        ops = " -> ".join(moves) or "slice"
        v, p = self.value, self.plan
        head = f"{self.dst}:{local_type(p.dst, v)} = {ops} {self.src}"
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
        head = f"{self.dst}:{local_type(self.sharding, self.value)} = "
        head += f"all-reduce-{self.combine}({','.join(self.axes)}) {self.src}"
        whole = self.value.type_text(self.sharding)
        move = f"{whole}{{{self.combine} over {','.join(self.axes)}}} -> {whole}"
        return _comment(head, f"{move}   {format_bytes(self.collective.wire_bytes)}")


@dataclasses.dataclass(frozen=True)
class Halo:
    """Exchange `value`'s halos for the windowed equation `source`: buffer `dst` holds the
    window-ready input (one collective-permute per split dim, side and distance)."""

    value: Value
    src: str
    dst: str
    splits: tuple  # SpatialSplits
    sharding: Sharding  # of `src`
    fill: object  # what windows read outside the input (the op's pad value)
    source: str
    consumer: Equation | None = None  # the windowed equation
    returned: bool = False  # the exchange backwards: a window-ready result's halo added home

    @property
    def permutes(self):
        local = self.sharding.shard_shape(self.value.shape)
        return halo_permutes(self.splits, local, self.value.dtype, self.source)

    @property
    def collectives(self):
        sizes = self.sharding.mesh.shape
        return [p.collective(math.prod(sizes[a] for a in p.split.axis)) for p in self.permutes]

    def text(self) -> str:
        shape = list(self.sharding.shard_shape(self.value.shape))
        for s in self.splits:
            shape[s.dim] = s.plan.ready_span
        axes = ",".join(a for s in self.splits for a in s.split_axes)
        if self.returned:
            shape = list(self.sharding.shard_shape(self.value.shape))
        head = f"{self.dst}:{short_dtype(self.value.dtype)}[{','.join(map(str, shape))}]"
        sent = format_bytes(sum(p.bytes_per_sender for p in self.permutes))
        cost = f"{len(self.permutes)} collective-permutes, {sent}"
        op = "halo-return" if self.returned else "halo-exchange"
        return _comment(f"{head} = {op}({axes}) {self.src}", cost)


@dataclasses.dataclass(frozen=True)
class MoveBlocks:
    """Buffer `dst` holds `value` rotated (`jnp.roll`) or reversed (`jnp.flip`) along dims it
    splits: whole blocks of every shard move where `plan` (block_moves) sends them."""

    value: Value
    src: str
    dst: str
    plan: object  # block_moves.RotatePlan, PaddedRotatePlan or ReversePlan
    sharding: Sharding  # of `src` and `dst`
    source: str
    consumer: Equation | None = None  # the concatenate or rev it computes

    @property
    def collectives(self):
        return self.plan.collectives(self.source)

    def text(self) -> str:
        head = f"{self.dst}:{local_type(self.sharding, self.value)} = "
        head += f"{self.plan.name}({','.join(self.plan.axes)}) {self.src}"
        sent = format_bytes(sum(c.wire_bytes for c in self.collectives))
        n = len(self.collectives)
        moves = f"{n} collective-permute{'' if n == 1 else 's'}, {sent}"
        return _comment(head, f"{self.plan.describe()}: {moves}")


@dataclasses.dataclass(frozen=True)
class Const:
    """A closed-over constant array, whole on every device (resharding slices it)."""

    name: str
    literal: Literal

    collectives = ()

    def text(self) -> str:
        return f"{self.name} = {self.literal!r}"


def instruction_collectives(instructions) -> list[tuple[object, list[Collective]]]:
    """(innermost instruction, its collectives counted over every trip around it), in program
    order: what a ledger lists, one row per collective, loops and branches opened up."""
    out = []
    for ins in instructions:
        inner = getattr(ins, "inner_collectives", None)
        out += inner() if inner else [(ins, list(getattr(ins, "collectives", ())))]
    return out


def wire_bytes_of(collectives) -> float:
    """Bytes a device sends in `collectives` (a list made once: plan_cost asks for more)."""
    return float(sum(c.wire_bytes for c in collectives))


class PerDeviceProgram:
    """What every device runs, as data and text: `.per_device_text()`, `.collectives`
    (execute.SPMDProgram adds running it: `spmd(*args)`)."""

    def __init__(self, prop, instructions, outputs, notes):
        self.prop, self.program, self.mesh = prop, prop.program, prop.mesh
        self.instructions = tuple(instructions)
        self.outputs = tuple(outputs)  # local buffer names (or Literals)
        self.notes = tuple(notes)
        self.cost = None  # what the plan costs per device (plan_cost.PlanCost), if known
        self.choices = ()  # where the partitioner weighed gathering against reducing (its record)

    @property
    def choices(self) -> tuple:
        """Where the partitioner weighed gathering against reducing (its records). A record
        may be given as the call that makes it (one that reads nothing of the pass's state):
        made when first asked, so only for the plan kept."""
        if any(map(callable, self._choices)):
            self._choices = tuple([c() if callable(c) else c for c in self._choices])
        return self._choices

    @choices.setter
    def choices(self, records) -> None:
        self._choices = tuple(records)

    # --- communication ---------------------------------------------------------------------
    @property
    def collectives(self) -> list[Collective]:
        return [c for ins in self.instructions for c in getattr(ins, "collectives", ())]

    @property
    def wire_bytes(self) -> float:
        return wire_bytes_of(self.collectives)

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
            f"{v.name}:{local_type(self.prop.sharding(v), v)}" for v in self.program.inputs
        )
        head = f"# every device of {self.mesh!r} runs this on its own shard"
        lines = [head, f"{{ lambda {ins}. let"]
        lines += ["  " + ins.text() for ins in self.instructions]
        outs = ", ".join(o if isinstance(o, str) else repr(o) for o in self.outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    def summary(self) -> str:
        kinds = collections.Counter(c.kind for c in self.collectives)  # in first-seen order
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "no collectives"
        return f"{counts}; {format_bytes(self.wire_bytes)} per device on the wire"

    def __str__(self) -> str:
        return self.per_device_text()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.mesh!r}: {self.summary()}>"
