"""Per-step drawing data for a recorded Timeline: link load levels, chip colours, busiest links.

``frames(tl)`` reads ``tl.steps`` (no re-simulation); the link view (links.py), the aggregated
view (heatmap.py) and the static SVG all draw from it. A frame's data is worked out when a frame
asks for it (``level_at``, ``busiest_at``, ``held_after``), so a new timeline of 2,000 steps or
9,216 chips costs its first frame, not all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from gspmd_viz import sim
from gspmd_viz.sim.collectives.execute import expand

LEVELS = 6  # link load levels: 0 idle, 1..5 up to the busiest link of the whole timeline
# idle grey, then blues to purple; the lightest has 3.4:1 contrast on white (WCAG non-text: 3)
COLOURS = ["#d9d9d9", "#4292c6", "#2171b5", "#08519c", "#08306b", "#3f007d"]
BUSIEST = "#e4002b"
OWNERSHIP_LIMIT = 2**20  # chips x chunks up to which frames replay chunk ownership (16x16)


class _Rows:
    """Rows of a running per-chip quantity, computed only as far as a frame asks."""

    def __init__(self, rows: Iterator[np.ndarray]):
        self._next, self.rows = rows, []

    def upto(self, i: int) -> list[np.ndarray]:
        while len(self.rows) <= i:
            self.rows.append(next(self._next))
        return self.rows


@dataclasses.dataclass(frozen=True, eq=False)
class Frames:
    tl: sim.Timeline
    xy: np.ndarray  # [n_chips, 2] drawing position of each chip
    links: np.ndarray  # [L] ids of the existing links
    slot: np.ndarray  # [n_link_slots] position of each link id in `links` (-1: no such link)
    held_rows: _Rows  # colour of each chip before step 0, after step 0, ... (see held_after)
    held_label: str
    peak_bytes: float  # the busiest link's bytes over the whole timeline
    wrap_mask: np.ndarray  # [L] True for wraparound links (drawn dotted)

    def __len__(self):
        return len(self.tl.steps)

    def level_at(self, step: int) -> np.ndarray:
        """[L] int8 load level of each link in step `step` (all idle when there are no steps)."""
        level = np.zeros(len(self.links), np.int8)
        if len(self):
            rec = self.tl.steps[step]
            lv = np.ceil(rec.link_bytes / self.peak_bytes * (LEVELS - 1)).clip(1, LEVELS - 1)
            level[self.slot[rec.links]] = lv
        return level

    def busiest_at(self, step: int) -> np.ndarray:
        """Positions in `links` of every link tied for the busiest in step `step`."""
        rec = self.tl.steps[step]
        top = rec.link_bytes >= rec.max_link_bytes * (1 - 1e-9)  # ties, up to rounding
        return self.slot[rec.links[top]]

    def held_after(self, step: int) -> np.ndarray:
        """[n_chips] colour of each chip after step `step` (before any step when there are none)."""
        i = min(step + 1, len(self))
        return self.held_rows.upto(i)[i]

    def level_bounds(self) -> list[float]:
        """Upper byte bound of each load level (level 0 = idle)."""
        return [b / (LEVELS - 1) * self.peak_bytes for b in range(LEVELS)]


# empty rows between the link view's slice blocks: a block's wraparound stubs reach half a row
# out of it, so its label sits in the middle row, clear of its own stubs and the block above's
LABEL_ROW_GAP = 2


def slice_grid(topo: sim.Topology) -> int:
    """Slices (dim 2) per row of the drawing: a near-square grid of slices."""
    return int(np.ceil(np.sqrt(topo.shape[2]))) if topo.ndim == 3 else 1


def positions(topo: sim.Topology, row_gap: int = 1) -> np.ndarray:
    """Integer (x, -row) of every chip: dim 0 runs down the page, dim 1 across; in 3-D the
    slices dim 2 = k sit in a near-square grid of blocks, one empty column and `row_gap` empty
    rows between them."""
    c = topo.coords
    if topo.ndim == 1:
        return np.stack([c[:, 0], np.zeros(len(c))], 1).astype(float)
    x, row = c[:, 1].copy(), c[:, 0].copy()
    if topo.ndim == 3:
        g = slice_grid(topo)
        x += (c[:, 2] % g) * (topo.shape[1] + 1)
        row += (c[:, 2] // g) * (topo.shape[0] + row_gap)
    return np.stack([x, -row], 1).astype(float)


def twist_note(topo: sim.Topology) -> str:
    """Where a twisted torus's wraparound links land ("" for an ordinary torus), e.g. "twisted
    torus: dim 0 and dim 1 wraparound links land 4 chips along dim 2"."""
    by_move: dict[str, list[str]] = {}
    for d, move in enumerate(topo.twist if topo.twisted else ()):
        along = " and ".join(f"{m} chips along dim {e}" for e, m in enumerate(move) if m)
        if along:
            by_move.setdefault(along, []).append(f"dim {d}")
    parts = [
        f"{' and '.join(dims)} wraparound links land {along}" for along, dims in by_move.items()
    ]
    return "twisted torus: " + "; ".join(parts) if parts else ""


def _held_by_ownership(tl) -> Iterator[np.ndarray]:
    """Fraction of the final result each chip holds before step 0, after step 0, ...: the
    recorded transfers replayed one step per row asked for.

    count[chip, chunk] is how many chips' contributions that chunk holds; `held` keeps its row
    sums, changed per step only where the step writes (a full sum per step costs seconds).
    """
    n, k = tl.topo.n_chips, tl.schedule.n_chunks
    count = np.ones((n, k), np.int32)
    held = np.full(n, float(k))  # [n_chips] row sums of count
    yield (held / (n * k)).astype(np.float32)
    for rec in tl.steps:
        st = rec.step
        rep, c_src, c_dst = expand(st)
        vals = count[st.src[rep], c_src]  # every transfer reads the state at step start
        dst, red = st.dst[rep], st.reduce[rep]
        gain = vals.astype(np.float64)  # what each moved chunk adds to its chip's row sum
        if red.any():
            np.add.at(count, (dst[red], c_dst[red]), vals[red])
        if not red.all():
            put = ~red
            gain[put] -= count[dst[put], c_dst[put]]
            count[dst[put], c_dst[put]] = vals[put]
        held += np.bincount(dst, weights=gain, minlength=n)
        yield (held / (n * k)).astype(np.float32)


def _held_by_bytes(tl) -> Iterator[np.ndarray]:
    """Share of its incoming bytes each chip has received before step 0, after step 0, ...
    (cheap; used on huge tori). One pass sums the totals; rows follow as frames ask."""
    n = tl.topo.n_chips

    def received(rec):  # [n_chips] bytes each chip receives in one step
        return np.bincount(rec.step.dst, weights=rec.nbytes, minlength=n)

    total = np.maximum(sum((received(r) for r in tl.steps), np.zeros(n)), 1e-300)
    got = np.zeros(n)
    yield got.astype(np.float32)
    for rec in tl.steps:
        got += received(rec)
        yield (got / total).astype(np.float32)


def frames(tl: sim.Timeline) -> Frames:
    """Per-step drawing data for a recorded timeline, worked out frame by frame as drawn."""
    topo = tl.topo
    links = np.flatnonzero(topo.link_exists)
    slot = np.full(topo.n_link_slots, -1, np.int64)
    slot[links] = np.arange(len(links))
    peak = max((r.max_link_bytes for r in tl.steps), default=0.0) or 1.0
    use_own = tl.kind == "all-reduce" and topo.n_chips * tl.schedule.n_chunks <= OWNERSHIP_LIMIT
    if use_own:
        held, label = _held_by_ownership(tl), "share of the final sum held"
    else:
        held, label = _held_by_bytes(tl), "share of incoming bytes received"
    src, dim = links // (2 * topo.ndim), (links // 2) % topo.ndim
    gap = topo.coords[topo.link_dst[links], dim] - topo.coords[src, dim]
    wrap = np.abs(gap) > 1
    xy = positions(topo, row_gap=LABEL_ROW_GAP)
    return Frames(tl, xy, links, slot, _Rows(held), label, float(peak), wrap)
