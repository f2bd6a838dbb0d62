"""The dependency-driven core of the pipeline simulator: when does each action start?

Every stage runs its actions in the order the schedule gives; an action starts when its stage is
free and its inputs have arrived:
- F of microbatch m at layer l needs F(m, l-1) (on stage (l-1) % S), sent over the wire;
- B(m, l) needs its own F(m, l) and B(m, l+1) (the gradient from the next layer); the last
  layer's B starts from the loss, i.e. from F(m, L-1) on its own stage;
- W(m, l) needs B(m, l) (same stage).
A transfer between two stages adds ``transfer[src][dst]`` seconds; within a stage it is free.
"""

from __future__ import annotations

import numpy as np

KINDS = ("F", "B", "W")
_F, _B, _W = range(3)


class ScheduleDeadlock(ValueError):
    """The per-stage orders wait on each other in a cycle: no valid timing exists."""


def _stage_bounds(stage: np.ndarray, stages: int) -> list[tuple[int, int]]:
    starts = np.searchsorted(stage, np.arange(stages + 1))
    if not np.all(np.diff(stage) >= 0):
        raise ValueError("actions must be grouped by stage, each stage in its own order")
    return [(int(starts[s]), int(starts[s + 1])) for s in range(stages)]


def start_times(stage, kind, microbatch, chunk, stages, virtual, duration, transfer=None):
    """(start, end) of every action; `duration` per action, `transfer` an [S, S] matrix or None."""
    n_layers = stages * virtual
    layer = (np.asarray(chunk) * stages + np.asarray(stage)).tolist()
    kinds, mbs, dur = np.asarray(kind).tolist(), np.asarray(microbatch).tolist(), list(duration)
    stage_l = np.asarray(stage).tolist()
    wire = [[0.0] * stages for _ in range(stages)] if transfer is None else np.asarray(
        transfer, float).tolist()  # fmt: skip
    n_mb = max(mbs, default=-1) + 1
    done = [[None] * (n_mb * n_layers) for _ in KINDS]  # finish time per (kind, m * L + l)
    start, end = [0.0] * len(kinds), [0.0] * len(kinds)
    bounds = _stage_bounds(np.asarray(stage), stages)
    pointer, free = [b[0] for b in bounds], [0.0] * stages

    def ready(i):
        """Earliest start allowed by the inputs of action i, or None if one is missing."""
        k, m, lay, s = kinds[i], mbs[i], layer[i], stage_l[i]
        if k == _F:
            if lay == 0:
                return 0.0
            got = done[_F][m * n_layers + lay - 1]
            return None if got is None else got + wire[(lay - 1) % stages][s]
        if k == _W:
            return done[_B][m * n_layers + lay]
        own = done[_F][m * n_layers + lay]
        if own is None or lay == n_layers - 1:
            return own
        got = done[_B][m * n_layers + lay + 1]
        return None if got is None else max(own, got + wire[(lay + 1) % stages][s])

    remaining = len(kinds)
    while remaining:
        progress = 0
        for s in range(stages):
            while pointer[s] < bounds[s][1]:
                i = pointer[s]
                t = ready(i)
                if t is None:
                    break
                start[i] = max(t, free[s])
                end[i] = free[s] = start[i] + dur[i]
                done[kinds[i]][mbs[i] * n_layers + layer[i]] = end[i]
                pointer[s] += 1
                progress += 1
        if not progress:
            stuck = [pointer[s] for s in range(stages) if pointer[s] < bounds[s][1]]
            raise ScheduleDeadlock(
                f"the schedule deadlocks: stages wait on each other at actions {stuck[:4]}"
            )
        remaining -= progress
    return np.array(start), np.array(end)
