"""`gv.partition(prop)`: one per-device program, with every collective explicit.

Per equation, from the propagated shardings and the equation's factor rule:
  1. choose how to split the equation's factors, by the time each choice costs on the chip
     (split.py: what propagation settled, or what an operand or result already holds;
     cost.py: compute, communication and an HBM penalty, from gv.sim's chip table);
  2. reshard every operand to the sharding the local op needs (gv.reshard_plan);
  3. run the primitive on local shapes (lower.py rewrites shape params, masks padding);
  4. a split reduction factor leaves pending sums (resolved where a consumer needs them:
     all-reduce, or reduce-scatter when the consumer wants the dim split) or, for max/min,
     an all-reduce right away. need_replication / permutation factors stay whole, and so do
     windowed ones unless their windows tile the dim (halo exchange is another lesson).
Partitioning is symbolic: it never touches devices, so 4096-device meshes work. `spmd.cost`
records what the plan costs per device (FLOPs, bytes, estimated time, peak live memory).
# XLA: SpmdPartitioner / SpmdPartitioningVisitor, PartitionedHlo::Reshard
"""

import functools
import math
from dataclasses import replace

from gspmd_viz import sim
from gspmd_viz.core import lower
from gspmd_viz.core.collective import Collective
from gspmd_viz.core.cost import ChipCost, PlanCost, plan_cost
from gspmd_viz.core.execute import SPMDProgram
from gspmd_viz.core.program import Equation, Literal, Value
from gspmd_viz.core.registry import entry_for
from gspmd_viz.core.sharding import Sharding
from gspmd_viz.core.split import EquationSplit, FactorAxes, cached_plan
from gspmd_viz.core.spmd import Combine, Compute, Const, Reshard

# --- the pass ---------------------------------------------------------------------------------


def chip_cost(chip) -> ChipCost:
    """The partitioner's view of a chip: a gv.sim chip name (or gv.sim.Chip), or a ChipCost."""
    if isinstance(chip, ChipCost):
        return chip
    spec = sim.chip(chip)  # a clear error naming the known chips
    seconds = functools.partial(sim.collective_time, chip=spec)
    return ChipCost(
        spec.name, spec.peak_bf16_flops, spec.hbm_bytes, spec.hbm_bandwidth_Bps, seconds
    )


class Partitioner:
    def __init__(self, prop, chip: ChipCost):
        self.prop, self.mesh, self.program = prop, prop.mesh, prop.program
        self.chip = chip
        self.sizes = prop.mesh.shape
        self.versions: dict[Value, list[tuple[Sharding, str]]] = {}
        self.instructions: list = []
        self.notes: list[str] = []
        self._count: dict[str, int] = {}
        for v in self.program.inputs:
            self.versions[v] = [(prop.sharding(v), v.name)]
        self.outputs = {v for v in self.program.outputs if isinstance(v, Value)}
        self.live_set = set(self.live())
        self._wanted: dict[Value, list[Sharding]] = {}

    def split(self, eqn: Equation) -> EquationSplit:
        """The equation's rule and propagation's settled split, ready to be costed."""
        propagated = tuple(self.prop.sharding(v) for v in eqn.outputs)
        settled = self.prop.factor_axes(eqn)
        return EquationSplit(eqn, self.prop.rule(eqn), settled, propagated, self.mesh)

    # --- the cost interface EquationSplit asks for (split.Costs) ---------------------------
    def available(self, v: Value) -> list[Sharding]:
        return [s for s, _ in self.versions[v]]

    def wanted(self, v: Value) -> list[Sharding]:
        """The shardings v's consumers will likely ask for: what each live consumer's
        propagated split needs (and the propagated sharding, for a program output)."""
        if v not in self._wanted:
            targets = [self.prop.sharding(v)] if v in self.outputs else []
            for eqn, pos in self.program.consumers.get(v, ()):
                if eqn in self.live_set:
                    q = self.split(eqn)
                    targets.append(q.operand_sharding(q.sanitize(q.settled), pos))
            self._wanted[v] = list(dict.fromkeys(targets))
        return self._wanted[v]

    def fresh(self, base: str) -> str:
        self._count[base] = self._count.get(base, 0) + 1
        return f"{base}.{self._count[base]}"

    # --- getting a value into the sharding a consumer needs -------------------------------
    def plan_seconds(self, v: Value, src: Sharding, target: Sharding) -> float:
        return self.chip.comm_seconds(cached_plan(src, target, v.shape, v.dtype).collectives)

    def fetch_cost(self, v: Value, target: Sharding) -> float:
        return min(self.plan_seconds(v, s, target) for s, _ in self.versions[v])

    def fetch(self, v: Value, target: Sharding, consumer: Equation | None) -> str:
        src, name = min(self.versions[v], key=lambda sv: self.plan_seconds(v, sv[0], target))
        plan = cached_plan(src, target, v.shape, v.dtype)
        if not plan.steps:  # the same data on every device (at most size-1 axes differ)
            return name
        dst = self.fresh(v.name)
        self.instructions.append(Reshard(v, name, dst, plan, consumer))
        self.versions[v].append((target, dst))
        return dst

    def literal(self, lit: Literal, target: Sharding, consumer: Equation):
        if not lit.shape or target.is_replicated:
            return lit
        v = Value(-1, lit.shape, lit.dtype, self.fresh("const"))
        self.instructions.append(Const(v.name, lit))
        self.versions[v] = [(Sharding(self.mesh, ()), v.name)]
        return self.fetch(v, target, consumer)

    # --- one equation ----------------------------------------------------------------------
    def equation(self, eqn: Equation) -> None:
        q = self.split(eqn)
        fa = q.choose(self)
        if not entry_for(eqn).known:
            self.notes.append(
                f"eqn {eqn.index}: no factor rule for {eqn.primitive!r}, so it runs replicated "
                "(its operands are all-gathered first)"
            )
        ins, op_shardings, masks = [], [], []
        for i, v in enumerate(eqn.inputs):
            target = q.operand_sharding(fa, i)
            op_shardings.append(target)
            fetch = self.fetch if isinstance(v, Value) else self.literal
            ins.append(fetch(v, target, eqn))
            masks += self.masks(q, fa, i, target)
        results = tuple(q.result_sharding(fa, j) for j in range(len(eqn.outputs)))
        work = q.flops(fa), q.hbm_bytes(fa)
        local = self.compute(q, ins, tuple(op_shardings), results, masks, work)
        for v, s in zip(eqn.outputs, results, strict=True):
            self.versions[v] = [(s, v.name)]
        red = q.reduction_axes(fa)
        partial = q.combine in ("max", "min") and red
        self.instructions.append(replace(local, partial=(q.combine, red)) if partial else local)
        if partial:
            for v, s in zip(eqn.outputs, results, strict=True):
                self.combine(v, s, q.combine, red, eqn)

    @staticmethod
    def compute(q: EquationSplit, ins, op_shardings, results, masks, work) -> Compute:
        """The local op: params rewritten for local shapes, offsets, a split lookup."""
        eqn = q.eqn
        params = lower.local_params(
            eqn,
            [s.shard_shape(v.shape) for s, v in zip(op_shardings, eqn.inputs, strict=True)],
            [s.shard_shape(v.shape) for s, v in zip(results, eqn.outputs, strict=True)],
        )
        offsets = lower.counting_offsets(eqn, [s.spec for s in results])
        lookup = None
        if q.lookup:
            local = op_shardings[0].shard_shape(eqn.inputs[0].shape)
            lookup = lower.lookup_of(eqn, op_shardings[0], local)
        outs = tuple(v.name for v in eqn.outputs)
        return Compute(
            eqn,
            tuple(ins),
            outs,
            params,
            results,
            op_shardings,
            tuple(masks),
            offsets,
            lookup,
            *work,
        )

    def masks(self, q: EquationSplit, fa: FactorAxes, i: int, target: Sharding):
        v, out = q.eqn.inputs[i], []
        for d, fs in enumerate(q.rule.operands[i]):
            axes = target.dim_axes(d)
            reduced = any(q.rule.factors[f].kind == "reduction" for f in fs)  # not lookups
            if axes and reduced and v.shape[d] % target.dim_shards(d):
                fill = lower.identity_element(q.combine, v.dtype)
                out.append(lower.Mask(i, d, v.shape[d], axes, fill))
        return out

    def combine(self, v: Value, s: Sharding, how: str, axes, eqn: Equation) -> None:
        dst = self.fresh(v.name)
        n = math.prod(self.sizes[a] for a in axes)
        coll = Collective(
            "all-reduce",
            axes,
            s.shard_shape(v.shape),
            v.dtype,
            n,
            f"eqn {eqn.index} {eqn.primitive}",
        )
        self.instructions.append(Combine(v, v.name, dst, how, axes, s, coll))
        self.versions[v] = [(s, dst)]

    def live(self) -> list[Equation]:
        """Equations some output depends on (dead code would still cost collectives)."""
        needed = {v for v in self.program.outputs if isinstance(v, Value)}
        keep = []
        for eqn in reversed(self.program.equations):
            if needed & set(eqn.outputs):
                keep.append(eqn)
                needed |= set(eqn.value_inputs)
        return keep[::-1]

    def run(self):
        for eqn in self.live():
            self.equation(eqn)
        outputs = []
        for v in self.program.outputs:
            if isinstance(v, Value):
                outputs.append(self.fetch(v, self.prop.sharding(v), None))
            else:
                outputs.append(v)
        spmd = SPMDProgram(self.prop, self.instructions, outputs, self.notes)
        spmd.cost = cost_on(spmd, self.chip)
        return spmd


def cost_on(spmd, chip) -> PlanCost:
    """What a partitioned program costs per device on `chip` (a name, gv.sim.Chip or ChipCost),
    whichever chip it was partitioned for."""
    prop = spmd.prop
    inputs = {v.name: prop.sharding(v).shard_bytes(v.shape, v.dtype) for v in spmd.program.inputs}
    return plan_cost(chip_cost(chip), inputs, spmd.instructions, spmd.outputs)


def partition(prop, chip="tpu-v3") -> "SPMDProgram":
    """The per-device program for a propagated program (`gv.propagate(gv.trace(f, ...))`),
    each equation split the way that is fastest on `chip` (a gv.sim chip name)."""
    if not hasattr(prop, "factor_axes") or not hasattr(prop, "program"):
        raise TypeError(
            f"gv.partition takes the result of gv.propagate(...), got {type(prop).__name__}"
        )
    return Partitioner(prop, chip_cost(chip)).run()
