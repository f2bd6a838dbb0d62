"""`gv.partition(prop)`: one per-device program, with every collective explicit.

Per equation, from the propagated shardings and the equation's factor rule:
  1. choose how to split the equation's factors (candidates: what propagation settled, and
     what each operand or result already holds), by the wire bytes each choice costs;
  2. reshard every operand to the sharding the local op needs (gv.reshard_plan);
  3. run the primitive on local shapes (lower.py rewrites shape params, masks padding);
  4. a split reduction factor leaves pending sums (resolved where a consumer needs them:
     all-reduce, or reduce-scatter when the consumer wants the dim split) or, for max/min,
     an all-reduce right away. need_replication / windowed / permutation factors are unsplit.
Partitioning is symbolic: it never touches devices, so 4096-device meshes work.
# XLA: SpmdPartitioner / SpmdPartitioningVisitor, PartitionedHlo::Reshard
"""

import functools
import math

from gspmd_viz.core import lower, rules
from gspmd_viz.core.collective import Collective
from gspmd_viz.core.program import Equation, Literal, Value
from gspmd_viz.core.reshard import reshard_plan
from gspmd_viz.core.sharding import Sharding
from gspmd_viz.core.spmd import Combine, Compute, Const, Reshard, SPMDProgram

FactorAxes = dict[int, tuple[str, ...]]


@functools.lru_cache(maxsize=4096)
def _plan(src: Sharding, dst: Sharding, shape, dtype):
    return reshard_plan(src, dst, shape, dtype)


# --- choosing the factor split ---------------------------------------------------------------


def _dim_axes(fa: FactorAxes, factors) -> tuple[str, ...]:
    return tuple(a for f in factors for a in fa.get(f, ()))


def _tensor_axes(fa: FactorAxes, tensor) -> tuple[tuple[str, ...], ...]:
    return tuple(_dim_axes(fa, fs) for fs in tensor)


class _Equation:
    """One equation's rule, tensors and the cost of a factor split."""

    def __init__(self, part, eqn: Equation):
        self.part, self.eqn, self.mesh, self.sizes = part, eqn, part.mesh, part.sizes
        self.rule = part.rule(eqn)
        indexed = lower.indexed_dims(eqn)
        self.lookup = {f for d in indexed for f in self.rule.operands[0][d]}
        self.combine = lower.combine_of(eqn.primitive) or ("sum" if self.lookup else None)
        self.halo_free = {  # windowed factor -> (input size, stride): splits into whole windows
            f: (eqn.inputs[0].shape[d], stride)
            for d, stride in lower.halo_free_dims(eqn).items()
            for f in self.rule.operands[0][d]
        }

    def splittable(self, f: int, axes) -> bool:
        kind = self.rule.factors[f].kind
        if kind == "pass" or (kind == "reduction" and self.combine) or f in self.lookup:
            return True
        if f in self.halo_free:
            n, stride = self.halo_free[f]
            return n % (self.size(axes) * stride) == 0
        return False

    def summed(self, f: int) -> bool:
        """Does splitting factor f leave partial results (a reduction, or a split lookup)?"""
        return self.rule.factors[f].kind == "reduction" or f in self.lookup

    def size(self, axes) -> int:
        return math.prod(self.sizes[a] for a in axes)

    def tensors(self):
        """(global shape, factors) of every operand and result."""
        e, r = self.eqn, self.rule
        return [
            (v.shape, t) for v, t in zip(e.inputs + e.outputs, r.operands + r.results, strict=True)
        ]

    def from_tensor(self, tensor, sharding: Sharding) -> FactorAxes:
        """The factor split a tensor's sharding implies (compound dims split major first)."""
        fa: FactorAxes = {}
        for d, fs in enumerate(tensor):
            axes = list(sharding.dim_axes(d))
            for f in fs:
                taken = []
                while (
                    axes
                    and self.rule.factors[f].size % (self.size(taken) * self.size(axes[:1])) == 0
                ):
                    taken.append(axes.pop(0))
                fa.setdefault(f, tuple(taken))
                if self.size(taken) != self.rule.factors[f].size:
                    break
        return fa

    def sanitize(self, fa: FactorAxes) -> FactorAxes:
        factors = self.rule.factors
        fa = {f: tuple(a) for f, a in fa.items() if a and self.splittable(f, a)}
        for _ in range(len(factors) + 1):  # compound dims: contiguous blocks, even splits only
            before = dict(fa)
            for _, tensor in self.tensors():
                for fs in (fs for fs in tensor if len(fs) > 1):
                    whole = True
                    for f in fs:
                        n = self.size(fa.get(f, ()))
                        if not whole or factors[f].size % n:
                            fa.pop(f, None)
                        whole = whole and n == factors[f].size
            if fa == before:
                break
        used, out = set(), {}
        for f in sorted(fa):  # every mesh axis splits one factor at most
            keep = []
            for a in fa[f]:
                if a in used:
                    break
                keep.append(a)
            used.update(keep)
            if keep:
                out[f] = tuple(keep)
        return out

    def reduction_axes(self, fa: FactorAxes) -> tuple[str, ...]:
        red = {a for f, axes in fa.items() if self.summed(f) for a in axes}
        return tuple(a for a in self.mesh.axis_names if a in red)

    def operand_sharding(self, fa, i: int) -> Sharding:
        return Sharding(self.mesh, _tensor_axes(fa, self.rule.operands[i]))

    def result_sharding(self, fa, j: int) -> Sharding:
        pending = self.reduction_axes(fa) if self.combine == "sum" else ()
        return Sharding(self.mesh, _tensor_axes(fa, self.rule.results[j]), pending)

    def cost(self, fa: FactorAxes) -> float:
        e, part = self.eqn, self.part
        total = 0.0
        for i, v in enumerate(e.inputs):
            if isinstance(v, Value):
                total += part.fetch_cost(v, self.operand_sharding(fa, i))
        red = self.reduction_axes(fa)
        for j, v in enumerate(e.outputs):
            local = self.result_sharding(fa, j)
            if self.combine in ("max", "min") and red:
                n, nbytes = self.size(red), local.shard_bytes(v.shape, v.dtype)
                total += 2 * (n - 1) / n * nbytes
            if self.combine in ("max", "min"):
                local = Sharding(self.mesh, local.spec)  # combined right away
            for target in part.wanted(v):
                total += _plan(local, target, v.shape, v.dtype).wire_bytes
        return total

    def candidates(self) -> list[FactorAxes]:
        prop, rule = self.part.prop, self.rule
        found = [self.part.prop_factor_axes(self.eqn)]
        for v, t in zip(self.eqn.inputs, rule.operands, strict=True):
            if isinstance(v, Value):
                found += [self.from_tensor(t, s) for s, _ in self.part.versions[v]]
        for v, t in zip(self.eqn.outputs, rule.results, strict=True):
            found.append(self.from_tensor(t, prop.sharding(v)))
        unique = []
        for fa in map(self.sanitize, found):
            if fa not in unique:
                unique.append(fa)
        return unique

    def choose(self) -> FactorAxes:
        """The cheapest split; ties go to propagation's, and a free one is taken at once."""
        first = self.sanitize(self.part.prop_factor_axes(self.eqn))
        if self.cost(first) == 0:
            return first
        return min(self.candidates(), key=self.cost)


# --- the pass ---------------------------------------------------------------------------------


class Partitioner:
    def __init__(self, prop):
        self.prop, self.mesh, self.program = prop, prop.mesh, prop.program
        self.sizes = prop.mesh.shape
        self.versions: dict[Value, list[tuple[Sharding, str]]] = {}
        self.instructions: list = []
        self.notes: list[str] = []
        self.local_shardings: dict[Value, Sharding] = {}
        self._count: dict[str, int] = {}
        for v in self.program.inputs:
            self.versions[v] = [(prop.sharding(v), v.name)]
        self.outputs = {v for v in self.program.outputs if isinstance(v, Value)}
        self.live_set = set(self.live())
        self._wanted: dict[Value, list[Sharding]] = {}

    def rule(self, eqn: Equation):
        if eqn.primitive in lower.IDENTITY and not rules.is_known(eqn.primitive):
            return rules.elementwise(eqn)  # an annotation: passes every dim through
        return self.prop.rule(eqn)

    def prop_factor_axes(self, eqn: Equation) -> FactorAxes:
        if eqn.primitive in lower.IDENTITY and not rules.is_known(eqn.primitive):
            return _Equation(self, eqn).from_tensor(
                self.rule(eqn).results[0], self.prop.sharding(eqn.outputs[0])
            )
        return self.prop.factor_axes(eqn)

    def wanted(self, v: Value) -> list[Sharding]:
        """The shardings v's consumers will likely ask for: what each live consumer's
        propagated split needs (and the propagated sharding, for a program output)."""
        if v not in self._wanted:
            targets = [self.prop.sharding(v)] if v in self.outputs else []
            for eqn, pos in self.program.consumers.get(v, ()):
                if eqn in self.live_set:
                    q = _Equation(self, eqn)
                    targets.append(q.operand_sharding(q.sanitize(self.prop_factor_axes(eqn)), pos))
            self._wanted[v] = list(dict.fromkeys(targets))
        return self._wanted[v]

    def fresh(self, base: str) -> str:
        self._count[base] = self._count.get(base, 0) + 1
        return f"{base}.{self._count[base]}"

    # --- getting a value into the sharding a consumer needs -------------------------------
    def fetch_cost(self, v: Value, target: Sharding) -> float:
        return min(_plan(s, target, v.shape, v.dtype).wire_bytes for s, _ in self.versions[v])

    def fetch(self, v: Value, target: Sharding, consumer: Equation | None) -> str:
        src, name = min(
            self.versions[v], key=lambda sv: _plan(sv[0], target, v.shape, v.dtype).wire_bytes
        )
        if src == target:
            return name
        plan = _plan(src, target, v.shape, v.dtype)
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
        q = _Equation(self, eqn)
        fa = q.choose()
        if not rules.is_known(eqn.primitive) and eqn.primitive not in lower.IDENTITY:
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
        results = [q.result_sharding(fa, j) for j in range(len(eqn.outputs))]
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
        self.instructions.append(
            Compute(
                eqn,
                tuple(ins),
                outs,
                params,
                tuple(results),
                tuple(op_shardings),
                tuple(masks),
                offsets,
                lookup,
            )
        )
        for v, s in zip(eqn.outputs, results, strict=True):
            self.local_shardings[v] = s
            self.versions[v] = [(s, v.name)]
        red = q.reduction_axes(fa)
        if q.combine in ("max", "min") and red:
            for v, s in zip(eqn.outputs, results, strict=True):
                self.combine(v, s, q.combine, red, eqn)

    def masks(self, q: _Equation, fa: FactorAxes, i: int, target: Sharding):
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
        return SPMDProgram(self.prop, self.instructions, outputs, self.notes)


def partition(prop) -> "SPMDProgram":
    """The per-device program for a propagated program (`gv.propagate(gv.trace(f, ...))`)."""
    if not hasattr(prop, "factor_axes") or not hasattr(prop, "program"):
        raise TypeError(
            f"gv.partition takes the result of gv.propagate(...), got {type(prop).__name__}"
        )
    return Partitioner(prop).run()
