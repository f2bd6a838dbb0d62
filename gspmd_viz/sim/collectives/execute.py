"""Run a schedule on numpy buffers: numbers (sums) or symbols (which chips contributed).

This is the symbolic oracle: tracking contributions as bit sets shows that an algorithm leaves
every chip with every other chip's data exactly once, on tori far larger than any device count.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule, Step


def expand(step: Step):
    """Per-chunk view of a step: (transfer index, src chunk, dst chunk) for every chunk moved."""
    count = step.count
    rep = np.repeat(np.arange(len(count)), count)
    starts = np.cumsum(count) - count
    offs = np.arange(len(rep)) - np.repeat(starts, count)
    return rep, step.chunk[rep] + offs, step.dst_chunk[rep] + offs


def run(schedule: CollectiveSchedule, state: np.ndarray, combine: str = "add") -> np.ndarray:
    """Apply every step to ``state`` [n_chips, n_chunks, ...]; returns the new state.

    combine="add": a reducing transfer adds. combine="or": buffers hold bit sets (uint8 words of
    chip ids) and a reducing transfer must bring only chips not already counted (else it raises).
    """
    state = np.array(state, copy=True)
    for i, step in enumerate(schedule.steps):
        rep, c_src, c_dst = expand(step)
        vals = state[step.src[rep], c_src]  # every transfer reads the state at step start
        dst = step.dst[rep]
        red = step.reduce[rep]
        if red.any():
            d, c, v = dst[red], c_dst[red], vals[red]
            if combine == "add":
                np.add.at(state, (d, c), v)
            else:
                _or_disjoint(state, d, c, v, i)
        if (~red).any():
            state[dst[~red], c_dst[~red]] = vals[~red]
    return state


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.int64)


def _or_disjoint(state, d, c, v, step_index):
    """OR bit sets into state[d, c]; raise if any bit was already there (double counting)."""
    cells = np.unique(np.stack([d, c]), axis=1)
    before = _POPCOUNT[state[cells[0], cells[1]]].sum()
    np.bitwise_or.at(state, (d, c), v)
    after = _POPCOUNT[state[cells[0], cells[1]]].sum()
    if after != before + _POPCOUNT[v].sum():
        raise AssertionError(f"step {step_index}: a contribution would be counted twice")


def initial_contributions(schedule: CollectiveSchedule) -> np.ndarray:
    """Bit sets [n_chips, n_chunks, ceil(n_chips/8)]: every chip holds only its own data."""
    n, k = schedule.topo.n_chips, schedule.n_chunks
    own = np.zeros((n, k, n), bool)
    own[np.arange(n), :, np.arange(n)] = True
    return np.packbits(own, axis=-1)


def contributions(schedule: CollectiveSchedule, state=None) -> np.ndarray:
    """Final contribution sets as bool [n_chips, n_chunks, n_chips] (small tori only)."""
    state = initial_contributions(schedule) if state is None else state
    final = run(schedule, state, combine="or")
    return np.unpackbits(final, axis=-1, count=schedule.topo.n_chips).astype(bool)


def reduce_scatter_owners(schedule: CollectiveSchedule) -> np.ndarray:
    """[n_chunks] the chip holding the full sum of each chunk after a reduce-scatter schedule.

    Raises if a chunk ends fully reduced on no chip or on more than one.
    """
    full = contributions(schedule).all(axis=-1)  # [chips, chunks]
    per_chunk = full.sum(axis=0)
    if not (per_chunk == 1).all():
        bad = int(np.flatnonzero(per_chunk != 1)[0])
        raise AssertionError(f"chunk {bad} is fully reduced on {per_chunk[bad]} chips, not 1")
    return np.argmax(full, axis=0)


def gather_start(schedule: CollectiveSchedule, owners: np.ndarray) -> np.ndarray:
    """Bit sets where chip owners[c] holds chunk c (its own data) and nothing else is known."""
    n, k = schedule.topo.n_chips, schedule.n_chunks
    bits = np.zeros((n, k, n), bool)
    bits[owners, np.arange(k), owners] = True
    return np.packbits(bits, axis=-1)
