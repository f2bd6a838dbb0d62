"""The per-device program `gv.partition` builds: instructions, their text, their collectives.

Three kinds of instruction, each knowing how to run itself inside shard_map and print itself:
  Compute   one equation on local shards          `c:f32[8,16] = dot_general a b`
  Reshard   a resharding plan between two buffers `c.1:f32[16,16] = all-gather(x) c`
  Combine   all-reduce of partial max/min results `m.1:f32[8] = all-reduce-max(y) m`
"""

import dataclasses

from gspmd_viz.core import lower
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

    def run(self, env):
        args = [a.value if isinstance(a, Literal) else env[a] for a in self.ins]
        outs = lower.run_local(self.eqn, self.params, args, self.masks, self.offsets, self.lookup)
        env.update(zip(self.outs, outs, strict=True))

    def text(self) -> str:
        e = self.eqn
        outs = " ".join(
            f"{n}:{_local_type(s, v)}"
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

    def run(self, env):
        from gspmd_viz.core.execute import apply_plan

        env[self.dst] = apply_plan(self.plan, env[self.src])

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

    def run(self, env):
        env[self.dst] = lower.all_reduce(env[self.src], self.combine, self.axes)

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

    def run(self, env):
        import jax.numpy as jnp

        env[self.name] = jnp.asarray(self.literal.value)

    def text(self) -> str:
        return f"{self.name} = {self.literal!r}"


class SPMDProgram:
    """What every device runs: `spmd.per_device_text()`, `spmd.collectives`, `spmd(*args)`."""

    def __init__(self, prop, instructions, outputs, notes):
        self.prop, self.program, self.mesh = prop, prop.program, prop.mesh
        self.instructions = tuple(instructions)
        self.outputs = tuple(outputs)  # local buffer names (or Literals)
        self.notes = tuple(notes)
        self._runner = None

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
        return f"<SPMDProgram on {self.mesh!r}: {self.summary()}>"

    # --- running ---------------------------------------------------------------------------
    def __call__(self, *args):
        from gspmd_viz.core.execute import run_spmd

        return run_spmd(self, *args)
