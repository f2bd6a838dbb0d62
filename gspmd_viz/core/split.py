"""Choosing how one equation splits its factors over mesh axes, by the time each choice costs.

Candidates: the split propagation settled on, and the split each operand (in every sharding it
is already available in) or result implies. A candidate is sanitized (only factors that may be
split: pass, reductions that combine, lookups, halo-free windows; compound dims in contiguous
blocks; each mesh axis once) and costed in seconds on the chip (cost.py): resharding the
operands to it, the local op's roofline time (a factor left whole is computed whole on every
device: redundant compute is never free), moving the results to what their consumers will ask
for, and a penalty if its buffers would not fit in HBM.
# XLA: dot_handler.cc tries strategies and compares costs
"""

import functools
import math
from typing import Protocol

import numpy as np

from gspmd_viz.core.cost import ChipCost
from gspmd_viz.core.factors import FactorRule
from gspmd_viz.core.program import Equation, Value
from gspmd_viz.core.registry import entry_for
from gspmd_viz.core.reshard import reshard_plan
from gspmd_viz.core.sharding import Sharding

FactorAxes = dict[int, tuple[str, ...]]


class Costs(Protocol):
    """What choosing a split asks of the partitioner (and nothing else)."""

    chip: ChipCost

    def available(self, v: Value) -> list[Sharding]:
        """The shardings v already exists in."""

    def fetch_cost(self, v: Value, target: Sharding) -> float:
        """Seconds to get v into `target` from its cheapest available sharding."""

    def wanted(self, v: Value) -> list[Sharding]:
        """The shardings v's consumers will likely ask for."""


@functools.lru_cache(maxsize=4096)
def cached_plan(src: Sharding, dst: Sharding, shape, dtype):
    return reshard_plan(src, dst, shape, dtype)


# --- choosing the factor split ---------------------------------------------------------------


def _dim_axes(fa: FactorAxes, factors) -> tuple[str, ...]:
    return tuple(a for f in factors for a in fa.get(f, ()))


def _tensor_axes(fa: FactorAxes, tensor) -> tuple[tuple[str, ...], ...]:
    return tuple(_dim_axes(fa, fs) for fs in tensor)


class EquationSplit:
    """One equation's rule, tensors and the cost of a factor split: `settled` is the split
    propagation settled on, `propagated` the results' propagated shardings."""

    def __init__(self, eqn: Equation, rule: FactorRule, settled: FactorAxes, propagated, mesh):
        self.eqn, self.rule, self.settled, self.propagated = eqn, rule, settled, propagated
        self.mesh, self.sizes = mesh, mesh.shape
        entry = entry_for(eqn)
        self.entry = entry
        indexed = entry.lookup_dims(eqn) if entry.lookup_dims else ()
        self.lookup = {f for d in indexed for f in rule.operands[0][d]}
        self.combine = entry.combine or ("sum" if self.lookup else None)
        halo_free = entry.halo_free_dims(eqn) if entry.halo_free_dims else {}
        self.halo_free = {  # windowed factor -> (input size, stride): splits into whole windows
            f: (eqn.inputs[0].shape[d], stride)
            for d, stride in halo_free.items()
            for f in rule.operands[0][d]
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
        """Mesh axes holding partial results; a size-1 axis splits nothing, so none there."""
        red = {a for f, axes in fa.items() if self.summed(f) for a in axes if self.sizes[a] > 1}
        return tuple(a for a in self.mesh.axis_names if a in red)

    def operand_sharding(self, fa, i: int) -> Sharding:
        return Sharding(self.mesh, _tensor_axes(fa, self.rule.operands[i]))

    def result_sharding(self, fa, j: int) -> Sharding:
        pending = self.reduction_axes(fa) if self.combine == "sum" else ()
        return Sharding(self.mesh, _tensor_axes(fa, self.rule.results[j]), pending)

    def flops(self, fa: FactorAxes) -> float:
        """Per-device FLOPs: the factor loop nest with split factors cut to their local size
        (a whole factor is whole on every device)."""
        if not self.entry.known:  # conservative rule: one element of work per result element
            return float(sum(math.prod(v.shape) for v in self.eqn.outputs))
        local = (-(-f.size // self.size(fa.get(i, ()))) for i, f in enumerate(self.rule.factors))
        return float(self.entry.flops * math.prod(local))

    def hbm_bytes(self, fa: FactorAxes) -> int:
        """Local (padded) operands read plus local results written."""
        total = 0
        for v, tensor in zip(
            self.eqn.inputs + self.eqn.outputs, self.rule.operands + self.rule.results, strict=True
        ):
            local = (
                -(-n // self.size(_dim_axes(fa, fs))) for n, fs in zip(v.shape, tensor, strict=True)
            )
            total += np.dtype(v.dtype).itemsize * math.prod(local)
        return total

    def compute_seconds(self, fa: FactorAxes, chip: ChipCost) -> float:
        if self.entry.identity:
            return 0.0
        nbytes = self.hbm_bytes(fa)
        return chip.compute_seconds(self.flops(fa), nbytes) + chip.memory_penalty(nbytes)

    def cost(self, fa: FactorAxes, costs: Costs) -> float:
        """Seconds on the chip: fetch operands, compute locally, move results where wanted."""
        return self.compute_seconds(fa, costs.chip) + self.comm_seconds(fa, costs)

    def comm_seconds(self, fa: FactorAxes, costs: Costs) -> float:
        e, chip, total = self.eqn, costs.chip, 0.0
        for i, v in enumerate(e.inputs):
            if isinstance(v, Value):
                total += costs.fetch_cost(v, self.operand_sharding(fa, i))
        red = self.reduction_axes(fa)
        for j, v in enumerate(e.outputs):
            local = self.result_sharding(fa, j)
            if self.combine in ("max", "min") and red:
                nbytes = local.shard_bytes(v.shape, v.dtype)
                total += chip.collective_seconds("all-reduce", nbytes, self.size(red))
            if self.combine in ("max", "min"):
                local = Sharding(self.mesh, local.spec)  # combined right away
            for target in costs.wanted(v):
                total += chip.comm_seconds(cached_plan(local, target, v.shape, v.dtype).collectives)
        return total

    def candidates(self, costs: Costs) -> list[FactorAxes]:
        rule = self.rule
        found = [self.settled]
        for v, t in zip(self.eqn.inputs, rule.operands, strict=True):
            if isinstance(v, Value):
                found += [self.from_tensor(t, s) for s in costs.available(v)]
        for s, t in zip(self.propagated, rule.results, strict=True):
            found.append(self.from_tensor(t, s))
        unique = []
        for fa in map(self.sanitize, found):
            if fa not in unique:
                unique.append(fa)
        return unique

    def choose(self, costs: Costs) -> FactorAxes:
        """The fastest split on the chip; ties go to propagation's (the first candidate). A
        settled split that moves nothing and computes nothing twice is taken at once."""
        first = self.sanitize(self.settled)
        used = {a for axes in first.values() for a in axes}
        everyone = all(a in used for a, n in self.sizes.items() if n > 1)  # no work done twice
        if everyone and self.comm_seconds(first, costs) == 0:
            return first
        return min(self.candidates(costs), key=lambda fa: self.cost(fa, costs))
