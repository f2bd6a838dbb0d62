"""Factor-rule families: one function per family of primitives, eqn -> FactorRule.

Each walks an equation's operand and result dims and names their factors (factors.py): a
shared index passes, an index in operands only is a reduction, a dim that must stay whole is
need_replication. registry.py says which primitives use which family.
"""

from __future__ import annotations

import math

from gspmd_viz.core.program.records import Literal
from gspmd_viz.core.rules.factors import FactorRule, RuleBuilder


def shapes(eqn):
    return [v.shape for v in eqn.inputs], [v.shape for v in eqn.outputs]


def conservative(eqn) -> FactorRule:
    """Unknown primitive: every dim its own need_replication factor, so nothing flows."""
    b = RuleBuilder()
    ins, outs = shapes(eqn)
    need = [[b.new(n, "need_replication") for n in s] for s in (*ins, *outs)]
    return b.rule(need[: len(ins)], need[len(ins) :])


def elementwise(eqn) -> FactorRule:
    """`i j, i j -> i j`; scalars and size-1 (implicitly broadcast) dims carry none. Captured
    array constants carry factors too: the partitioner slices them like any operand."""
    b = RuleBuilder()
    ins, outs = shapes(eqn)
    dims = [b.new(n) for n in outs[0]]

    def tensor(s):
        if len(s) != len(dims):
            return [()] * len(s)
        return [f if n == m else () for f, n, m in zip(dims, s, outs[0], strict=True)]

    return b.rule([tensor(s) for s in ins], [dims] * len(outs))


def broadcast_in_dim(eqn) -> FactorRule:
    """Operand dim i is result dim broadcast_dimensions[i]; new dims exist in the result only."""
    b = RuleBuilder()
    (src, *_), (out,) = shapes(eqn)
    result = [b.new(n) for n in out]
    operand = [
        result[r] if src[i] == out[r] else ()
        for i, r in enumerate(eqn.params["broadcast_dimensions"])
    ]
    extra = [[()] * len(s) for s in shapes(eqn)[0][1:]]  # dynamic shape operands, if any
    return b.rule([operand, *extra], [result])


def transpose(eqn) -> FactorRule:
    b = RuleBuilder()
    (src,), _ = shapes(eqn)
    operand = [b.new(n) for n in src]
    return b.rule([operand], [[operand[p] for p in eqn.params["permutation"]]])


def rev(eqn) -> FactorRule:
    """`i j -> i j`, the reversed dims a permutation: their blocks trade places (block_moves)."""
    b = RuleBuilder()
    (src,), _ = shapes(eqn)
    reversed_dims = eqn.params["dimensions"]
    operand = [b.new(n, "permutation" if d in reversed_dims else "pass") for d, n in enumerate(src)]
    return b.rule([operand], [operand])


def reshape(eqn) -> FactorRule:
    """Split and merged dims share compound factors: `[(i j), k] -> [i, j, k]`."""
    b = RuleBuilder()
    (src, *dyn), (out,) = shapes(eqn)
    operand, result = [[] for _ in src], [[] for _ in out]
    ins = [(d, n) for d, n in enumerate(src) if n > 1]
    outs = [(d, n) for d, n in enumerate(out) if n > 1]
    p = q = 0
    left_in, left_out = (ins[0][1] if ins else 1), (outs[0][1] if outs else 1)
    while p < len(ins) and q < len(outs):
        g = math.gcd(left_in, left_out)
        if g == 1:  # the sizes share no factor: the rest cannot be expressed, nothing flows
            operand[ins[p][0]] += b.new(left_in, "need_replication")
            result[outs[q][0]] += b.new(left_out, "need_replication")
            for d, n in ins[p + 1 :]:
                operand[d] += b.new(n, "need_replication")
            for d, n in outs[q + 1 :]:
                result[d] += b.new(n, "need_replication")
            break
        f = b.new(g)
        operand[ins[p][0]] += f
        result[outs[q][0]] += f
        left_in, left_out = left_in // g, left_out // g
        if left_in == 1:
            p += 1
            left_in = ins[p][1] if p < len(ins) else 1
        if left_out == 1:
            q += 1
            left_out = outs[q][1] if q < len(outs) else 1
    return b.rule([operand, *[[()] * len(s) for s in dyn]], [result])


def squeeze(eqn) -> FactorRule:
    b = RuleBuilder()
    (src,), _ = shapes(eqn)
    operand = [b.new(n) for n in src]
    dropped = {d % len(src) for d in eqn.params["dimensions"]}
    return b.rule([operand], [[f for d, f in enumerate(operand) if d not in dropped]])


def dot_general(eqn) -> FactorRule:
    """`b i k, b k j -> b i j`: batch and free dims pass, contracting dims are reductions."""
    b = RuleBuilder()
    (lhs, rhs), _ = shapes(eqn)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lf, rf = [[None] * len(lhs), [None] * len(rhs)]
    for dl, dr in zip(lb, rb, strict=True):
        lf[dl] = rf[dr] = b.new(lhs[dl])
    for dl, dr in zip(lc, rc, strict=True):
        lf[dl] = rf[dr] = b.new(lhs[dl], "reduction")
    batch = [lf[d] for d in lb]
    lfree = [d for d in range(len(lhs)) if lf[d] is None]
    rfree = [d for d in range(len(rhs)) if rf[d] is None]
    for dims, shape, fs in ((lfree, lhs, lf), (rfree, rhs, rf)):
        for d in dims:
            fs[d] = b.new(shape[d])
    return b.rule([lf, rf], [batch + [lf[d] for d in lfree] + [rf[d] for d in rfree]])


def _axes_rule(eqn, axes, kind: str, keep: bool) -> FactorRule:
    """Dims in `axes` get `kind`; keep=True: results keep them (cumsum, sort), else drop them."""
    b = RuleBuilder()
    ins, outs = shapes(eqn)
    axes = {a % len(ins[0]) for a in axes}
    operand = [b.new(n, kind if d in axes else "pass") for d, n in enumerate(ins[0])]
    result = operand if keep else [f for d, f in enumerate(operand) if d not in axes]
    return b.rule([operand if s == ins[0] else [()] * len(s) for s in ins], [result] * len(outs))


def reduce(eqn) -> FactorRule:
    return _axes_rule(eqn, eqn.params["axes"], "reduction", keep=False)


def cumulative(eqn) -> FactorRule:
    return _axes_rule(eqn, (eqn.params["axis"],), "need_replication", keep=True)


def sort(eqn) -> FactorRule:
    return _axes_rule(eqn, (eqn.params["dimension"],), "need_replication", keep=True)


def top_k(eqn) -> FactorRule:
    """`[.., n] -> [.., k], [.., k]`: the last dim must be whole."""
    b = RuleBuilder()
    (src,), (out, _) = shapes(eqn)
    lead = [b.new(n) for n in src[:-1]]
    operand = lead + [b.new(src[-1], "need_replication")]
    result = lead + [b.new(out[-1], "need_replication")]
    return b.rule([operand], [result, result])


def _shifted_dims(eqn, shifted) -> FactorRule:
    """Operand 0 and result 0 share every dim; a dim where `shifted(d, n, m)` (output j reads
    input j·stride − low: a 1-wide window) shares one windowed factor, moved by halo exchange.
    Other dims whose size changes get a need_replication factor each."""
    b = RuleBuilder()
    ins, (out, *_) = shapes(eqn)
    operand, result = [], []
    for d, (n, m) in enumerate(zip(ins[0], out, strict=True)):
        if shifted(d, n, m):  # a 1-element result too (it lives on one shard); none: no factor
            o = r = b.new(max(n, m) if m else 1, "windowed")
        elif n == m:
            o = r = b.new(m)
        else:
            o, r = b.new(n, "need_replication"), b.new(m, "need_replication")
        operand.append(o)
        result.append(r)
    rest = [operand if s == ins[0] else [()] * len(s) for s in ins[1:]]
    return b.rule([operand, *rest], [result])


def slice_(eqn) -> FactorRule:
    """A sliced dim is a shift (start, stride)."""
    return _shifted_dims(eqn, lambda d, n, m: n != m)


def dynamic_slice(eqn) -> FactorRule:
    """A sliced dim is a shift only at a constant start (a data-dependent one keeps it whole)."""
    starts = eqn.inputs[1:]
    return _shifted_dims(eqn, lambda d, n, m: n != m and isinstance(starts[d], Literal))


def pad(eqn) -> FactorRule:
    cfg = eqn.params["padding_config"]
    return _shifted_dims(eqn, lambda d, n, m: any(cfg[d]))


def dynamic_update_slice(eqn) -> FactorRule:
    """operand and result share every dim; the update shares the dims it covers whole. A dim
    the update covers in part is written at a global offset: it stays whole everywhere."""
    b = RuleBuilder()
    (src, upd, *idx), _ = shapes(eqn)
    operand = [
        b.new(n, "pass" if u == n else "need_replication") for n, u in zip(src, upd, strict=True)
    ]
    update = [
        f if u == n else b.new(u, "need_replication")
        for f, u, n in zip(operand, upd, src, strict=True)
    ]
    return b.rule([operand, update, *[[()] * len(s) for s in idx]], [operand])


def concatenate(eqn) -> FactorRule:
    """Non-concatenated dims pass; the concatenated dim is one windowed factor of every operand
    and the result: each operand is shifted to its offset (halo exchange, halo_ops)."""
    b = RuleBuilder()
    ins, (out,) = shapes(eqn)
    cat = eqn.params["dimension"]
    result = [b.new(n, "windowed" if d == cat else "pass") for d, n in enumerate(out)]
    return b.rule([list(result) for _ in ins], [result])


def iota(eqn) -> FactorRule:
    b = RuleBuilder()
    return b.rule([[()] * len(s) for s in shapes(eqn)[0]], [[b.new(n) for n in shapes(eqn)[1][0]]])


def _moves_data(window: int, stride: int, padding, base_dilation: int) -> bool:
    """Does output position i read anything but input position i? (Judged by the window
    itself: a 1-wide window with padding (1, -1) keeps the size but shifts every row.)"""
    return (window, stride, tuple(padding), base_dilation) != (1, 1, (0, 0), 1)


def _window_dims(b: RuleBuilder, n: int, m: int, windowed: bool):
    """One spatial dim, size n in and m out: one factor (sized by the input) for both, so a
    spatial sharding carries through (strided windows: each shard keeps its windows)."""
    return b.new(max(n, m) if m else 1, "windowed" if windowed else "pass")


def contracted_windows(params, rhs_shape, out_shape) -> frozenset[int]:
    """Spatial dims (by position) of an ungrouped conv whose window is at least twice as wide as
    its output, as in a kernel gradient (the window is the output gradient): the first plan
    the partitioner costs for them is a sum over shards of window taps (each reading its own
    input rows plus a halo), not halos around output rows (registry: _conv_variants)."""
    if params["feature_group_count"] != 1 or params["batch_group_count"] != 1:
        return frozenset()
    dn = params["dimension_numbers"]
    pairs = zip(dn.rhs_spec[2:], dn.out_spec[2:], strict=True)
    return frozenset(k for k, (r, o) in enumerate(pairs) if rhs_shape[r] >= 2 * out_shape[o])


def _conv_groups(b: RuleBuilder, p, shapes_, specs, factors) -> None:
    """Batch and feature factors: G feature groups or G batch groups (group-major), each
    convolved with its own O/G kernels; a split group count splits the work."""
    (lhs, rhs), (ls, rs, os_), (L, R, O) = shapes_, specs, factors
    groups = p["feature_group_count"] * p["batch_group_count"]  # one of them is 1
    images = b.new(lhs[ls[0]] // p["batch_group_count"])
    g = b.new(groups)  # split groups: each device convolves the groups it holds
    if p["batch_group_count"] == 1:
        per_group = b.new(lhs[ls[1]] // groups, "reduction" if groups == 1 else "need_replication")
        L[ls[0]], L[ls[1]], R[rs[1]] = images, g + per_group, per_group
    else:
        L[ls[0]], L[ls[1]] = g + images, b.new(lhs[ls[1]], "reduction")
        R[rs[1]] = L[ls[1]]
    O[os_[0]] = images
    R[rs[0]] = O[os_[1]] = g + b.new(rhs[rs[0]] // groups)


def conv(eqn, contracted: frozenset[int] | None = None, linked: bool = True) -> FactorRule:
    """`b f s, o f w -> b o s`: batch passes, input features contract, spatial dims windowed;
    `contracted` spatial dims (default: contracted_windows) are windowed-sums instead, the
    taps' factor shared with the input rows unless not `linked` (propagation: a split of the
    input rows says nothing about the kernel's; the partitioner costs both plans per dim)."""
    b, p = RuleBuilder(), eqn.params
    (lhs, rhs), (out,) = shapes(eqn)
    ls, rs, os_ = p["dimension_numbers"]  # lhs_spec, rhs_spec, out_spec
    L, R, O = [None] * len(lhs), [None] * len(rhs), [None] * len(out)
    _conv_groups(b, p, (lhs, rhs), (ls, rs, os_), (L, R, O))
    keys = ("window_strides", "padding", "lhs_dilation")
    windows = zip(ls[2:], rs[2:], os_[2:], *(p[k] for k in keys), strict=True)
    contracted = contracted_windows(p, rhs, out) if contracted is None else contracted
    for k, (li, ri, oi, stride, pad, dilation) in enumerate(windows):
        if k in contracted:  # input rows and window taps split together: partial sums
            L[li] = b.new(max(lhs[li], rhs[ri]), "windowed-sum")
            R[ri] = L[li] if linked else None
            O[oi] = b.new(out[oi], "need_replication")
            continue
        windowed = _moves_data(rhs[ri], stride, pad, dilation)
        L[li] = O[oi] = _window_dims(b, lhs[li], out[oi], windowed)
        R[ri] = b.new(rhs[ri], "need_replication")

    def fill(fs, s):
        return [f or b.new(n, "need_replication") for f, n in zip(fs, s, strict=True)]

    return b.rule([fill(L, lhs), fill(R, rhs)], [fill(O, out)])


def reduce_window(eqn) -> FactorRule:
    b = RuleBuilder()
    ((src,), (out,)), p = shapes(eqn), eqn.params
    keys = ("window_dimensions", "window_strides", "padding", "base_dilation")
    windows = zip(src, out, *(p[k] for k in keys), strict=True)
    dims = [_window_dims(b, n, m, _moves_data(w, s, pad, dil)) for n, m, w, s, pad, dil in windows]
    return b.rule([dims], [dims])


def select_and_scatter_add(eqn) -> FactorRule:
    """source (one value per window), operand and result share each dim's factor: windowed where
    the window moves data (the operand's halos go out, the result's come back)."""
    b = RuleBuilder()
    ((src, operand), _), p = shapes(eqn), eqn.params
    keys = zip(operand, src, p["window_dimensions"], p["window_strides"], p["padding"], strict=True)
    dims = [_window_dims(b, n, m, _moves_data(w, s, pad, 1)) for n, m, w, s, pad in keys]
    return b.rule([dims, dims], [dims])


def loop_slice(eqn) -> FactorRule:
    """A scan's stacked operand [T, ...] and its per-iteration slice [...]: the scanned dim
    has no factor (it is never split), the others pass.  # XLA: HandleWhile + dynamic-slice"""
    b = RuleBuilder()
    dims = [b.new(n) for n in shapes(eqn)[0][0][1:]]
    return b.rule([[(), *dims]], [dims])


def loop_stack(eqn) -> FactorRule:
    """A per-iteration result [...] and the stacked result [T, ...] (scanned dim unsplit)."""
    b = RuleBuilder()
    dims = [b.new(n) for n in shapes(eqn)[0][0]]
    return b.rule([dims], [[(), *dims]])
