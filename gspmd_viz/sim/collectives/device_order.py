"""Which device order for this mesh on this slice: a logical mesh axis as a set of physical links.

A device order is an array shaped like the logical mesh holding a chip id per mesh position (what
``jax.sharding.Mesh`` is built from). A collective over one mesh axis runs a ring through each
line of that array in its logical order, as XLA's ring over a replica group does; the links it
crosses depend on where those chips sit.

- ``naive``: chips in C order reshaped to the mesh (``np.array(devices).reshape(...)``).
- ``good`` (``place``): each axis gets the physical pieces ``placement.place`` gives it, and
  inside them the order of ``ring_order`` on their sub-torus: consecutive mesh positions are
  physical neighbours, a line without wraparound is walked folded (0, 2, 4, ..., 5, 3, 1: each
  ring edge two hops, not one long edge back), and an axis spread over two physical dims (a 2-D
  piece of a 3-D torus) snakes through them. Where that still leaves an edge longer than one
  hop, the group's natural order (a strided piece closing through the wraparound) or a ring of
  neighbours on the real links (``rings.neighbour_cycle``: on a twisted slice a short dim's
  wraparound lands k chips along, so a group holding both landing columns closes a ring of
  neighbours there) is taken, whichever has the shortest longest edge.

``DeviceOrder.collective(axis, ...)`` simulates every group of that axis at once on the slice's
links (``simulate.time_steps``) and reports the time and the busiest link.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from gspmd_viz.sim.collectives import placement
from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule, ring_schedule
from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.presets import chip_of
from gspmd_viz.sim.collectives.rings import neighbour_cycle, ring_order
from gspmd_viz.sim.collectives.simulate import Timeline, run_schedule
from gspmd_viz.sim.collectives.topology import Topology

HOWS = ("good", "naive")


@dataclasses.dataclass(frozen=True)
class AxisCollective:
    axis: str
    kind: str
    nbytes: float
    time_s: float
    busiest_link_bytes: float  # over the whole collective
    max_hops: int  # longest ring edge

    def __str__(self):
        mib = self.busiest_link_bytes / 2**20
        return (f"{self.kind} over {self.axis!r}: {self.time_s * 1e6:.1f} us, longest ring edge "
                f"{self.max_hops} hops, busiest link {mib:.2f} MiB")  # fmt: skip


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceOrder:
    mesh: dict
    topo: Topology
    order: np.ndarray  # [*mesh sizes] chip ids
    how: str

    def groups(self, axis: str) -> np.ndarray:
        """[n_groups, axis size] chip ids: each line of the order along `axis`, in mesh order."""
        if axis not in self.mesh:
            raise ValueError(f"unknown mesh axis {axis!r}; the mesh has {list(self.mesh)}")
        i = list(self.mesh).index(axis)
        return np.moveaxis(self.order, i, -1).reshape(-1, self.mesh[axis])

    def timeline(self, axis: str, kind: str = "all-reduce", nbytes: int = 2**20,
                 chip: str | Chip | None = None) -> Timeline:  # fmt: skip
        """Bidirectional ring `kind` of `nbytes` per chip over `axis`, every group at once, as a
        Timeline the torus figures draw. Its bound: one group's chips must each take in
        (n-1)/n of the payload (twice for all-reduce) through their links on the slice."""
        if kind not in ("all-reduce", "reduce-scatter", "all-gather"):
            raise ValueError(f"kind must be a ring collective, got {kind!r}")
        groups, spec = self.groups(axis), get_chip(chip or chip_of(self.topo))
        k, phases, steps = ring_schedule(self.topo, kind, groups, bidirectional=True)
        sched = CollectiveSchedule(kind, "bidirectional-ring", self.topo, k, phases, steps)
        tl = run_schedule(sched, nbytes, nbytes / k, spec)
        n, links = groups.shape[1], self.topo.link_exists.reshape(self.topo.n_chips, -1).sum(1)
        rounds = 2 if kind == "all-reduce" else 1
        bound = rounds * (n - 1) / n * nbytes / (links.max() * spec.ici_link_bandwidth_Bps)
        return dataclasses.replace(tl, lower_bound_s=bound)

    def collective(self, axis: str, kind: str = "all-reduce", nbytes: int = 2**20,
                   chip: str | Chip | None = None) -> AxisCollective:  # fmt: skip
        """The time, busiest link and longest ring edge of ``timeline(axis, ...)``."""
        tl = self.timeline(axis, kind, nbytes, chip)
        groups = self.groups(axis)
        edges = self.topo.distance(groups, np.roll(groups, -1, axis=1))
        load = np.zeros(self.topo.n_link_slots)
        for r in tl.steps:
            np.add.at(load, r.links, r.link_bytes)
        return AxisCollective(axis, kind, nbytes, tl.time_s, float(load.max(initial=0.0)),
                              int(edges.max(initial=0)))  # fmt: skip


def place(mesh: dict, topo: Topology, how: str = "good") -> DeviceOrder:
    """The device order for `mesh` (axis name -> size, major first) on `topo`; see above."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    sizes = tuple(int(n) for n in mesh.values())
    if math.prod(sizes) != topo.n_chips:
        raise ValueError(f"a mesh of {math.prod(sizes)} devices ({mesh}) does not fill "
                         f"{topo.describe()}")  # fmt: skip
    if how == "naive":
        return DeviceOrder(dict(mesh), topo, np.arange(topo.n_chips).reshape(sizes), how)
    plc = placement.place(mesh, topo)
    coords = np.zeros((topo.n_chips, len(sizes)), np.int64)  # [chip, mesh axis]
    for i, axis in enumerate(mesh):
        chips = placement.group_chips(plc, [axis], topo)  # [groups, sub-torus C order]
        ring = _axis_ring(topo, plc, axis, chips[0])  # ring position -> sub index
        position = np.empty_like(ring)
        position[ring] = np.arange(len(ring))
        coords[chips.ravel(), i] = np.tile(position, chips.shape[0])
    order = np.empty(sizes, np.int64)
    order[tuple(coords.T)] = np.arange(topo.n_chips)
    return DeviceOrder(dict(mesh), topo, order, how)


def _axis_ring(topo: Topology, plc: placement.Placement, axis: str, row: np.ndarray) -> np.ndarray:
    """Ring order (sub-torus indices) of one group `row` of `axis`, the one with the shortest
    longest edge on the real links (then the fewest hops) among: ``ring_order`` of its
    sub-torus, the group's natural order (it closes through a wraparound a strided piece
    reaches) and, when neither is all neighbour hops, a ring of neighbours the search finds
    (through a twisted wraparound, say). Every group is the same shape moved along the torus,
    so its hops are row 0's."""
    candidates = [ring_order(placement.sub_torus(plc, [axis], topo)), np.arange(len(row))]
    hops = [topo.distance(row[r], np.roll(row[r], -1)) for r in candidates]
    if min(h.max(initial=0) for h in hops) > 1:
        cycle = neighbour_cycle(topo, row)
        if cycle is not None:
            return cycle
    best = min(range(len(candidates)), key=lambda i: (hops[i].max(initial=0), hops[i].sum()))
    return candidates[best]
