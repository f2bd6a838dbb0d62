"""`gv.partition(prop, chip="tpu-v3")`: the partitioner given a chip from gv.sim's table.

core knows no chip by name (it imports nothing from sim): this module turns a chip name (or a
gv.sim.Chip) into the plain numbers core weighs splits with, `split_cost.ChipCost`: peak
FLOP/s, HBM bytes and bandwidth, and a collective's seconds from gv.sim.collective_time (a
bidirectional ring over the mesh axis; all-to-all limited by the ring's bisection).
"""

from __future__ import annotations

import functools

from gspmd_viz import sim
from gspmd_viz.core.cost.split_cost import ChipCost
from gspmd_viz.core.partition import whole_plan
from gspmd_viz.core.propagation.algorithm import collector_paused

__all__ = ["chip_cost", "partition"]


def chip_cost(chip) -> ChipCost | None:
    """The partitioner's view of `chip`: a gv.sim chip name or gv.sim.Chip (unknown names get
    gv.sim's error listing the known chips), a ChipCost as it is, or None (no chip)."""
    if chip is None or isinstance(chip, ChipCost):
        return chip
    spec = sim.chip(chip)
    seconds = functools.partial(sim.collective_time, chip=spec)
    return ChipCost(
        spec.name, spec.peak_bf16_flops, spec.hbm_bytes, spec.hbm_bandwidth_Bps, seconds
    )


def partition(prop, chip="tpu-v3", share_idle: bool = True):
    """The per-device program for `gv.propagate(gv.trace(f, ...))`, each equation's split
    chosen with `chip`'s numbers (split_cost: no work done twice, then wire bytes, then time on
    the chip; a split that would not fit in its HBM last). `spmd.cost` records what the plan
    costs per device there: FLOPs, bytes, estimated time and peak memory. When a cheapest
    split departs from propagation's, the plan that follows propagation everywhere (XLA's) is
    built too and kept if it is no worse (whole_plan.preferred; spmd.notes says so).
    `share_idle`: also build the plan whose equations let the mesh axes their operands leave
    idle share the work (the result gathered or moved after), and keep it when whole_plan.shared
    finds it no costlier and, unless it saves FLOPs, no slower (spmd.notes says so); False:
    idle devices repeat the work, as in XLA's plans."""
    with collector_paused():
        return whole_plan.best_plan(prop, chip_cost(chip), share_idle)
