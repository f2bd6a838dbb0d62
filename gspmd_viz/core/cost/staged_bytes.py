"""What a collective holds while it runs, beside its operand and its result: the staging copies
XLA:CPU makes of the pieces it sends and receives, and a reshard's results between its steps.
plan_cost.peak_bytes adds them to the buffers live at the time."""

from gspmd_viz.core.spmd.instructions import Reshard


def staging_bytes(ins) -> int:
    """Bytes one instruction's collectives stage while they run: each piece a device sends that
    is not already a contiguous block of one buffer is copied out first, and each piece it
    receives lands in a buffer of its own before it is put in place. So an all-to-all stages
    its operand (the chunks; over a pair, the half it sends and the half it gets:
    reshard_kernels._swap_halves), a collective-permute the piece it sends (a halo's edge), a
    reduce-scatter along a dim that is not its operand's outermost (past size-1 dims) a copy
    of its operand, and an all-gather along such a dim its whole result (the pieces land in a
    new outermost dim, then move beside the gathered dim: reshard_kernels._all_gather); an
    all-reduce, or a gather along the outermost dim, works in place. A reshard of several
    collectives also holds the results between them (`_chain_bytes`)."""
    if isinstance(ins, Reshard):
        return _chain_bytes(ins.plan)
    return sum(map(_staged, getattr(ins, "collectives", ())))


def _staged(c) -> int:
    """The staging copy of one collective (staging_bytes)."""
    outermost = next((d for d, n in enumerate(c.shape) if n > 1), 0)
    along_inner = bool(c.dims) and c.dims[0] != outermost
    if c.kind in ("all-to-all", "collective-permute") or (
        c.kind == "reduce-scatter" and along_inner
    ):
        return c.operand_bytes
    if c.kind == "all-gather" and along_inner:
        return c.operand_bytes * c.group_size
    return 0


def _chain_bytes(plan) -> int:
    """What a reshard holds while it runs beside its source and its result: each collective's
    staging copy, and between two collectives the first one's result, live while the second
    runs (a free slice after the last is read in place by the reader). The result is made by
    the last collective: while an earlier one runs it does not exist yet."""
    moves = [s for s in plan.steps if s.collective is not None]
    between = [s.after.shard_bytes(plan.shape, plan.dtype) for s in moves[:-1]]
    held = [0, *between, 0]
    result = plan.dst.shard_bytes(plan.shape, plan.dtype)
    return max(
        (
            held[i] + held[i + 1] + _staged(s.collective) - (result if i < len(moves) - 1 else 0)
            for i, s in enumerate(moves)
        ),
        default=0,
    )
