"""Factor-rule families of ops that cut a tensor into pieces or put pieces together: stack,
unstack, tile, and a bitcast that changes the element width (one element cut into a trailing
dim of narrower ones, or such a dim joined into one). `split` never reaches a rule: gv.trace
writes it as one slice per piece (split_as_slices.py), so a split dim is windowed like any
slice.

Same notation as families.py: every dim the op does not touch passes, so a model's batch,
sequence and head splits flow through; the dim it cuts or builds stays whole.
# Shardy: the stablehlo ops jax lowers these to (concatenate, slice, broadcast + reshape)
"""

from __future__ import annotations

from gspmd_viz.core.rules.factors import FactorRule, RuleBuilder
from gspmd_viz.core.rules.families import shapes


def stack(eqn) -> FactorRule:
    """`i j, i j -> i n j` (n pieces along `axis`): each piece's dims pass, n stays whole."""
    b = RuleBuilder()
    ins, _ = shapes(eqn)
    dims = [b.new(n) for n in ins[0]]
    axis = eqn.params["axis"] % (len(dims) + 1)
    result = [*dims[:axis], b.new(len(ins), "need_replication"), *dims[axis:]]
    return b.rule([dims] * len(ins), [result])


def unstack(eqn) -> FactorRule:
    """`i n j -> i j, i j, ...`: the unstacked dim stays whole, the others pass."""
    b = RuleBuilder()
    (src,), outs = shapes(eqn)
    axis = eqn.params["axis"] % len(src)
    dims = [b.new(n, "need_replication" if d == axis else "pass") for d, n in enumerate(src)]
    piece = [f for d, f in enumerate(dims) if d != axis]
    return b.rule([dims], [piece] * len(outs))


def tile(eqn) -> FactorRule:
    """`i j -> i (r j)`: a dim repeated once passes; a repeated one stays whole on both sides."""
    b = RuleBuilder()
    (src,), (out,) = shapes(eqn)
    operand, result = [], []
    for n, m in zip(src, out, strict=True):
        if n == m:
            operand.append(b.new(n))
            result.append(operand[-1])
        else:
            operand.append(b.new(n, "need_replication"))
            result.append(b.new(m, "need_replication"))
    return b.rule([operand], [result])


def bitcast_convert(eqn) -> FactorRule:
    """`i j -> i j` for the same width; a narrower result gains a trailing dim (`i j -> i j
    _`), a wider one loses it (`i j k -> i j`): that dim stays whole, the others pass."""
    b = RuleBuilder()
    (src,), (out,) = shapes(eqn)
    common = [b.new(n) for n in src[: min(len(src), len(out))]]
    operand = common + [b.new(n, "need_replication") for n in src[len(common) :]]
    result = common + [b.new(n, "need_replication") for n in out[len(common) :]]
    return b.rule([operand], [result])
