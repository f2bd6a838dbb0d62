"""Factor-rule families of indexed ops: gather (lookups) and scatter (indexed updates).

Same notation as families.py; apart because indexing is its own idea: which operand dims an
index reads must stay whole, the rest pass through. # XLA: spmd/gather_scatter_handler.cc
"""

from __future__ import annotations

from gspmd_viz.core.rules.factors import FactorRule, RuleBuilder
from gspmd_viz.core.rules.families import shapes


def gather(eqn) -> FactorRule:
    """Embedding lookups and take_along_axis: index batch dims pass to the result; whole
    slices of the operand pass to the offset dims; indexed operand dims must be whole."""
    b = RuleBuilder()
    (src, idx), (out,) = shapes(eqn)
    dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
    operand, indices, result = [None] * len(src), [()] * len(idx), [None] * len(out)
    batch_out = [d for d in range(len(out)) if d not in dn.offset_dims]
    for o, d in zip(batch_out, range(len(idx) - 1), strict=True):  # index_vector_dim is last
        result[o] = indices[d] = b.new(out[o])
    for od, idd in zip(dn.operand_batching_dims, dn.start_indices_batching_dims, strict=True):
        operand[od] = indices[idd]
    skip = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(len(src)) if d not in skip]
    for o, d in zip(dn.offset_dims, kept, strict=True):
        whole = sizes[d] == src[d]
        operand[d] = b.new(src[d], "pass" if whole else "need_replication")
        result[o] = operand[d] if whole else b.new(out[o], "need_replication")
    operand = [
        b.new(n, "need_replication") if f is None else f for f, n in zip(operand, src, strict=True)
    ]
    return b.rule([operand, indices], [result])


def scatter(eqn, summed: bool = False) -> FactorRule:
    """`.at[idx].set(u)`, `.max`, `.mul`: whole update windows pass to the operand's window
    dims and batching dims pass everywhere; a scattered dim written one row at a time passes
    between operand and result (indices and updates stay whole along it: each device writes
    the rows it holds); the updates' scatter dims stay whole, unless `summed` (scatter_add).
    # XLA: SpmdPartitioningVisitor::HandleScatter (its index-parallel cases are not modelled)"""
    b = RuleBuilder()
    (src, idx, upd), (out,) = shapes(eqn)
    dn = eqn.params["dimension_numbers"]
    operand, indices, updates = [None] * len(src), [None] * len(idx), [None] * len(upd)
    scatter_dims = [d for d in range(len(upd)) if d not in dn.update_window_dims]
    batching = dict(zip(dn.scatter_indices_batching_dims, dn.operand_batching_dims, strict=True))
    for i, u in enumerate(scatter_dims):  # indices dim i (the index vector dim is last)
        kind = "pass" if i in batching else ("reduction" if summed else "need_replication")
        updates[u] = indices[i] = b.new(upd[u], kind)
        if i in batching:
            operand[batching[i]] = indices[i]
    skip = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(len(src)) if d not in skip]
    for u, d in zip(dn.update_window_dims, kept, strict=True):
        if upd[u] == src[d] and d not in dn.scatter_dims_to_operand_dims:
            operand[d] = updates[u] = b.new(src[d])
    for d in written_dims(eqn):  # each device writes the rows it holds (lower.WriteAt)
        operand[d] = b.new(src[d])
    operand, indices, updates = (
        [b.new(n, "need_replication") if f is None else f for f, n in zip(fs, s, strict=True)]
        for fs, s in ((operand, src), (indices, idx), (updates, upd))
    )
    return b.rule([operand, indices, updates], [operand])


def scatter_add(eqn) -> FactorRule:
    """`.at[idx].add(u)`, segment_sum: as `scatter`, and the updates' scatter dims (with the
    indices') may split as a sum: each device adds its own updates, the results are pending
    sums and the operand is added on one device only (Entry.once).
    # XLA: HandleScatter with updates split on the scatter dims: local scatter, all-reduce"""
    return scatter(eqn, summed=bool(eqn.inputs[0].shape))  # a 0-d operand: nowhere to mask


def scatter_mode(eqn) -> str | None:
    """What an out-of-range scatter index does: "clip" (clamped into range) or "drop" (the
    update is skipped; XLA skips PROMISE_IN_BOUNDS ones too); None for other modes."""
    name = getattr(eqn.params["mode"], "name", str(eqn.params["mode"]))
    return {"CLIP": "clip", "FILL_OR_DROP": "drop", "PROMISE_IN_BOUNDS": "drop"}.get(name)


def written_dims(eqn) -> tuple[int, ...]:
    """Operand dims a scatter writes one row at a time at data-dependent indices (none when
    the mode is not one local_ops.py applies globally)."""
    dn = eqn.params["dimension_numbers"]
    if scatter_mode(eqn) is None:
        return ()
    return tuple(d for d in dn.scatter_dims_to_operand_dims if d in dn.inserted_window_dims)
