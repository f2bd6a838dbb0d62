"""The dependency-driven core of the pipeline simulator: when does each action start?

Every stage runs its actions in the order the schedule gives; an action starts when its stage is
free and its inputs have arrived:
- F of microbatch m at layer l needs F(m, l-1) (on stage (l-1) % S), sent over the wire;
- B(m, l) needs its own F(m, l) and B(m, l+1) (the gradient from the next layer); the last
  layer's B starts from the loss, i.e. from F(m, L-1) on its own stage;
- W(m, l) needs B(m, l) (same stage).
A transfer between two stages adds ``transfer[src][dst]`` seconds; within a stage it is free.
The producers of every input are found once with numpy; the loop only compares times.
"""

from __future__ import annotations

import numpy as np

KINDS = ("F", "B", "W")
_F, _B, _W = range(3)


class ScheduleDeadlock(ValueError):
    """The per-stage orders wait on each other in a cycle: no valid timing exists."""


def _stage_bounds(stage: np.ndarray, stages: int) -> list[tuple[int, int]]:
    if not np.all(np.diff(stage) >= 0):
        raise ValueError("actions must be grouped by stage, each stage in its own order")
    starts = np.searchsorted(stage, np.arange(stages + 1))
    return [(int(starts[s]), int(starts[s + 1])) for s in range(stages)]


def dependencies(stage, kind, microbatch, chunk, stages, virtual):
    """Per action, the index of each input's producer (-1: none): (a, b).

    a: F <- F(m, l-1); B <- its own F(m, l); W <- B(m, l).   b: B <- B(m, l+1).
    """
    n_layers, n_mb = stages * virtual, int(microbatch.max(initial=-1)) + 1
    layer = chunk * stages + stage
    index = np.full(len(KINDS) * n_mb * n_layers, -1, np.int64)
    index[(kind * n_mb + microbatch) * n_layers + layer] = np.arange(len(kind))

    def producer(k, lay):
        inside = (lay >= 0) & (lay < n_layers)
        found = index[(k * n_mb + microbatch) * n_layers + np.clip(lay, 0, n_layers - 1)]
        return np.where(inside, found, -1), inside

    f_prev, has_prev = producer(_F, layer - 1)
    f_own, _ = producer(_F, layer)
    b_own, _ = producer(_B, layer)
    b_next, has_next = producer(_B, layer + 1)
    a = np.select([kind == _F, kind == _B], [f_prev, f_own], b_own)
    b = np.where(kind == _B, b_next, -1)
    needed_a = (kind != _F) | has_prev
    needed_b = (kind == _B) & has_next
    missing = (needed_a & (a < 0)) | (needed_b & (b < 0))
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"the schedule lacks an input of action {i} ({KINDS[kind[i]]} of microbatch "
            f"{microbatch[i]}, layer {layer[i]}): every layer needs F and B of every microbatch"
        )
    return a, b


def _wire(stage, producer, transfer):
    """Transfer time from each producer's stage to the action's stage (0 within a stage)."""
    if transfer is None:
        return np.zeros(len(stage))
    src = stage[np.maximum(producer, 0)]
    return np.where((producer >= 0) & (src != stage), transfer[src, stage], 0.0)


def _advance(i, hi, t_free, a, b, wa, wb, dur, start, end):
    """Run one stage's actions from i on while their inputs are there; (next i, free time)."""
    while i < hi:
        t = t_free
        if a[i] >= 0:
            got = end[a[i]]
            if got is None:
                break
            t = max(t, got + wa[i])
        if b[i] >= 0:
            got = end[b[i]]
            if got is None:
                break
            t = max(t, got + wb[i])
        start[i], t_free = t, t + dur[i]
        end[i] = t_free
        i += 1
    return i, t_free


def start_times(stage, kind, microbatch, chunk, stages, virtual, duration, transfer=None):
    """(start, end) of every action; `duration` per action, `transfer` an [S, S] matrix or None."""
    stage, kind = np.asarray(stage), np.asarray(kind)
    a, b = dependencies(stage, kind, np.asarray(microbatch), np.asarray(chunk), stages, virtual)
    transfer = None if transfer is None else np.asarray(transfer, float)
    wa, wb = _wire(stage, a, transfer).tolist(), _wire(stage, b, transfer).tolist()
    inputs = (a.tolist(), b.tolist(), wa, wb, np.asarray(duration, float).tolist())
    bounds = _stage_bounds(stage, stages)
    start, end = [0.0] * len(stage), [None] * len(stage)
    pointer, free = [lo for lo, _ in bounds], [0.0] * stages
    remaining = len(stage)
    while remaining:  # sweep the stages until every action has run
        progress = 0
        for s, (_, hi) in enumerate(bounds):
            i, free[s] = _advance(pointer[s], hi, free[s], *inputs, start, end)
            progress, pointer[s] = progress + i - pointer[s], i
        if not progress:
            stuck = [pointer[s] for s in range(stages) if pointer[s] < bounds[s][1]]
            raise ScheduleDeadlock(
                f"the schedule deadlocks: stages wait on each other at actions {stuck[:4]}"
            )
        remaining -= progress
    return np.array(start), np.array(end, float)
