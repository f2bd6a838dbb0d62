"""Factor rules: the einsum-like notation every primitive's sharding facts are written in.
# Shardy: OpShardingRule

A rule names the *factors* of an equation (the independent loop dimensions of its einsum) and,
for every dim of every operand and result, which factors make up that dim (major first; a
reshape merges several factors into one dim). The rule of each primitive lives in its
registry entry (registry.py); the families that build rules are in families.py.

Factor kinds (Shardy's FactorType):
- pass: the same index in operands and results (elementwise dims, batch and free dims of a dot);
- reduction: in operands only (contracting dims, reduced dims): results hold partial sums;
- need_replication: must be unsharded (the sorted dim, a cumsum's scan dim, a sliced dim);
- windowed: a convolution / pooling spatial dim (neighbours overlap: halo exchange);
- windowed-sum: a conv's input rows and window taps at once (a window wider than the output,
  as in a kernel gradient): halo exchange of the input, then partial sums over the taps;
- permutation: moves data between shards (a padded or concatenated dim).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

DimFactors = tuple[int, ...]  # factor indices making up one tensor dim, major first
TensorFactors = tuple[DimFactors, ...]  # one entry per tensor dim


class Factor(NamedTuple):
    """One factor of a rule (a NamedTuple: rules make hundreds on a program's first
    propagation, and a tuple is made and hashed at C speed, a frozen dataclass is not)."""

    name: str
    size: int
    kind: str = "pass"


@dataclass(frozen=True)
class FactorRule:
    factors: tuple[Factor, ...]
    operands: tuple[TensorFactors, ...]
    results: tuple[TensorFactors, ...]

    @classmethod
    def from_einsum(cls, spec: str, sizes: dict, **kinds: str) -> FactorRule:
        """`from_einsum("b i k, b k j -> b i j", sizes, reduction="k")`.

        Dims are separated by spaces; `(i j)` is one dim made of factors i (major) and j;
        `_` (or `1`) is a dim with no factor. `kinds` maps a kind to factor names.
        """
        kind_of = {n: k for k, names in kinds.items() for n in names.split()}
        names = list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", spec)))
        index = {n: i for i, n in enumerate(names)}
        factors = tuple(Factor(n, int(sizes[n]), kind_of.get(n, "pass")) for n in names)

        def tensor(text: str) -> TensorFactors:
            dims = re.findall(r"\([^)]*\)|\S+", text)
            return tuple(
                () if d in ("1", "_") else tuple(index[n] for n in re.findall(r"\w+", d))
                for d in dims
            )

        lhs, rhs = spec.split("->")
        split = lambda side: [t for t in side.split(",")] if side.strip() else []  # noqa: E731
        return cls(factors, tuple(map(tensor, split(lhs))), tuple(map(tensor, split(rhs))))

    def tensor_text(self, tensor: TensorFactors) -> str:
        def dim(fs: DimFactors) -> str:
            names = [self.factors[f].name for f in fs]
            return "_" if not names else names[0] if len(names) == 1 else f"({' '.join(names)})"

        return "[" + ", ".join(dim(fs) for fs in tensor) + "]"

    def __str__(self) -> str:
        ins = ", ".join(self.tensor_text(t) for t in self.operands)
        outs = ", ".join(self.tensor_text(t) for t in self.results)
        special = sorted(f"{f.name}: {f.kind}" for f in self.factors if f.kind != "pass")
        return f"({ins}) -> ({outs})" + (f"   {'; '.join(special)}" if special else "")


class RuleBuilder:
    """Creates factors a, b, c, ... while a rule function walks an equation's dims."""

    def __init__(self):
        self.factors: list[Factor] = []

    def new(self, size: int, kind: str = "pass") -> DimFactors:
        if size == 1:
            return ()  # a size-1 dim cannot be split: no factor
        self.factors.append(Factor(_letter(len(self.factors)), int(size), kind))
        return (len(self.factors) - 1,)

    def rule(self, operands, results) -> FactorRule:
        """The rule, factors renumbered and named i, j, k, ... in order of first appearance."""
        tensors = [tuple([tuple(d) for d in t]) for t in (*operands, *results)]
        if _in_order(tensors):  # made in order of appearance (most rules): named so already
            factors, n = tuple(self.factors), len(operands)
            return FactorRule(factors, tuple(tensors[:n]), tuple(tensors[n:]))
        order = list(dict.fromkeys(f for t in tensors for d in t for f in d))
        order += [f for f in range(len(self.factors)) if f not in order]
        new = {old: i for i, old in enumerate(order)}
        factors = tuple(
            Factor(_letter(i), self.factors[old].size, self.factors[old].kind)
            for i, old in enumerate(order)
        )
        tensors = [tuple(tuple(new[f] for f in d) for d in t) for t in tensors]
        return FactorRule(factors, tuple(tensors[: len(operands)]), tuple(tensors[len(operands) :]))


def _in_order(tensors) -> bool:
    """Whether the factors first appear in the tensors' dims in index order (those that never
    appear come after all that do, in index order: so they keep their indices too)."""
    following = 0  # the factor to meet next if the order holds
    for t in tensors:
        for d in t:
            for f in d:
                if f == following:
                    following += 1
                elif f > following:
                    return False
    return True


def _letter(i: int) -> str:
    letters = "ijklmnopqrstuvwxyzabcdefgh"
    return letters[i] if i < len(letters) else f"f{i}"
