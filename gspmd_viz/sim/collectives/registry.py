"""Every collective algorithm we simulate, once: what it serves, how it is built, its closed form.

An entry names the collectives and torus ranks (number of dims) it serves, the builder that turns
a topology into a schedule of transfers (algorithms.py), the alpha-beta closed form the simulator
is tested against (cost.py) and one line saying what it does. ``schedule``, ``closed_form``,
``default_algorithm`` and the viz read only this table; nothing else switches on names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from gspmd_viz.sim.collectives import algorithms as build
from gspmd_viz.sim.collectives import cost, in_flight, pull_halving, swing_halving
from gspmd_viz.sim.collectives import logarithmic as log
from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule
from gspmd_viz.sim.collectives.chips import Chip
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.presets import chip_of
from gspmd_viz.sim.collectives.topology import Topology
from gspmd_viz.units import format_time

KINDS = cost.SIMULATED_KINDS
MAX_TRANSFERS = 5_000_000  # keeps a schedule within a few hundred MB
_HALVES = ("all-reduce", "reduce-scatter", "all-gather")  # an all-reduce is RS then AG
ANY_RANK = (1, 2, 3)


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    kinds: tuple[str, ...]  # collectives it serves
    ranks: tuple[int, ...]  # torus ranks (number of dims) it runs on
    build: Callable  # (topo, kind) -> (chunks per chip, phases, steps)
    time: Callable  # (topo, kind, bytes per chip, beta, alpha) -> seconds
    transfers: Callable[[int], int]  # about how many transfers its schedule holds, given N chips
    description: str
    unfit: Callable[[Topology], str | None] = lambda topo: None  # why it cannot run there
    twisted_ok: bool = False  # its schedule and closed form hold on a twisted torus
    costs: Callable | None = None  # (topo, kind, s, beta, alpha) -> per step (bytes s, hops s)

    def runs_in(self, pieces: int) -> bool:
        """Whether it can run in `pieces` pieces: one always; more when its closed form gives
        each step's cost (in_flight.py)."""
        return pieces == 1 or self.costs is not None

    def why_not(self, topo: Topology) -> str | None:
        """Why it cannot run on `topo` (None when it can)."""
        if topo.twisted and not self.twisted_ok:
            return "its rings and closed form assume untwisted wraparound"
        return self.unfit(topo)


def _phased(name, orders, kinds, description):
    """Rings along one dim at a time: a twisted dim's line is walked folded (rings.dim_rings)."""
    rank = len(orders[0])
    return Algorithm(name, kinds, (rank,), partial(build.phased, orders=orders),
                     partial(cost.phased_time, orders=orders), lambda n: 64 * n,
                     description, twisted_ok=True)  # fmt: skip


def _ring(name, bidirectional, description):
    return Algorithm(name, _HALVES, ANY_RANK, partial(build.ring_like, bidirectional=bidirectional),
                     partial(cost.ring_time, bidirectional=bidirectional), lambda n: n * n,
                     description, twisted_ok=True)  # fmt: skip


def _stepped(name, build, costs, transfers, description, unfit, kinds=("all-reduce",)):
    """A logarithmic algorithm: its closed form step by step, so it can also run in pieces."""
    return Algorithm(name, kinds, ANY_RANK, build, partial(_in_pieces, costs), transfers,
                     description, unfit, costs=costs)  # fmt: skip


def _in_pieces(costs, topo, kind, s, beta, alpha, pieces=1):
    return in_flight.closed_form(costs(topo, kind, s, beta, alpha), pieces)


def _halving_transfers(n):
    """swing- and pull-halving on a 2-D torus: 4 parts x (log2 N + 4 steps) x N chips."""
    return 4 * n * (n.bit_length() + 3)


_ENTRIES = [
    _ring("ring", False, "one ring through all chips: reduce-scatter, all-gather, 2(N-1) steps"),
    _ring("bidirectional-ring", True, "half the payload round the ring each way: 2 links per chip"),
    _phased("torus-2d", ((0, 1),), _HALVES,
            "phase 0 along dim 0 (columns), phase 1 along dim 1 on 1/cols of the payload"),
    _phased("torus-2d-halves", ((0, 1), (1, 0)), _HALVES,
            "two halves of the payload run torus-2d in opposite dim orders at once"),
    _phased("torus-3d", ((0, 1, 2),), _HALVES, "the phased torus algorithm along dims 0, 1, 2"),
    _phased("torus-3d-halves", ((0, 1, 2), (2, 1, 0)), ("all-reduce",),
            "two halves in dim orders (0, 1, 2) and (2, 1, 0)"),
    _phased("torus-3d-thirds", ((0, 1, 2), (1, 2, 0), (2, 0, 1)), _HALVES,
            "three parts in orders (0, 1, 2), (1, 2, 0), (2, 0, 1): all 6 links busy"),
    Algorithm("naive", ("all-reduce",), ANY_RANK, build.naive, cost.naive_time,
              lambda n: 2 * n, "sum everything on chip 0, then send the sum to everyone"),
    Algorithm("direct", ("all-to-all",), ANY_RANK, build.all_to_all_direct, cost.all_to_all_time,
              lambda n: n * n,
              "every chip sends each other chip its chunk at once (dimension-ordered routes)",
              twisted_ok=True),
    _stepped("recursive-doubling", log.recursive_doubling, log.recursive_doubling_costs,
             lambda n: n * max(n.bit_length(), 1),
             "log2(N) steps: swap the whole buffer with the chip 1, 2, 4, ... away and add",
             log.unfit),
    _stepped("rabenseifner", log.rabenseifner, log.rabenseifner_costs,
             lambda n: 2 * n * max(n.bit_length(), 1),
             "recursive halving (reduce-scatter) then recursive doubling (all-gather)", log.unfit),
    _stepped("swing", log.swing, log.swing_costs, lambda n: n * max(n.bit_length(), 1),
             "recursive doubling with Swing's short-hop peers 1, -1, 3, -5, 11, ... (torus)",
             partial(log.unfit, need_wrap=True)),
    _stepped("swing-halving", swing_halving.swing_halving, swing_halving.swing_halving_costs,
             _halving_transfers,
             "Swing, halving the buffer over its one-hop steps and swapping the rest whole",
             partial(log.unfit, need_wrap=True)),
    _stepped("pull-halving", pull_halving.pull_halving, pull_halving.pull_halving_costs,
             _halving_transfers,
             "swing-halving with one-way long steps 3, -8, ..., -5 summing to a dim's diameter",
             pull_halving.unfit),
    _stepped("bruck", log.bruck, log.bruck_costs, lambda n: n * n // 2 * max(n.bit_length(), 1),
             "log2(N) steps: half the buffer 1, 2, 4, ... chips on (radix-2 Bruck index)",
             partial(log.unfit, need_wrap=True), kinds=("all-to-all",)),
]  # fmt: skip
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in _ENTRIES}
# the default per torus rank, when it serves the collective (else the first that does)
_PREFERRED = {1: "bidirectional-ring", 2: "torus-2d", 3: "torus-3d"}


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")


def algorithms(kind: str = "all-reduce") -> list[str]:
    """Names of the algorithms we simulate for a collective kind."""
    check_kind(kind)
    return [a.name for a in _ENTRIES if kind in a.kinds]


def applicable(topo: Topology, kind: str = "all-reduce") -> list[str]:
    """Algorithms of `kind` that run on `topo` (e.g. torus-3d needs a 3-D topology)."""
    entries = [ALGORITHMS[n] for n in algorithms(kind)]
    return [a.name for a in entries if topo.ndim in a.ranks and a.why_not(topo) is None]


class Choice(NamedTuple):
    algorithm: str
    pieces: int
    why: str


def label(algorithm: str, pieces: int = 1) -> str:
    """`pull-halving`, or `pull-halving in 4 pieces`."""
    return algorithm if pieces == 1 else f"{algorithm} in {pieces} pieces"


def choose(
    topo: Topology, kind: str, nbytes: float, chip: str | Chip, pieces: int | None = None
) -> Choice:
    """``algorithm="auto"``: the fastest closed form among the algorithms that run here, each
    in every count of pieces of ``in_flight.PIECES`` it can run in (or in `pieces` only).

    The why names the runner-up among the other algorithms and the regime (latency- or
    bandwidth-bound).
    """
    spec = get_chip(chip)
    counts = in_flight.PIECES if pieces is None else (in_flight.check_pieces(pieces),)
    n_chips = topo.n_chips
    fits = [n for n in applicable(topo, kind) if ALGORITHMS[n].transfers(n_chips) <= MAX_TRANSFERS]
    tries = [(n, k) for n in fits for k in counts if ALGORITHMS[n].runs_in(k)]
    if not tries:
        given = "" if pieces is None else f" in {pieces} pieces"
        raise ValueError(f"no {kind} algorithm runs on {topo.describe()}{given} within the "
                         "transfer cap")  # fmt: skip
    times = sorted((closed_form(topo, kind, nbytes, n, spec, k), k, n) for n, k in tries)
    best_t, best_k, best = times[0]
    rest = [(t, k, n) for t, k, n in times if n != best]
    bound = cost.lower_bound(topo, kind, nbytes, spec)
    regime = "latency-bound" if best_t > 2 * bound else "bandwidth-bound"
    why = f"auto: {label(best, best_k)} {format_time(best_t)} is the fastest closed form here"
    why += f" ({regime}"
    if rest:
        why += f"; next {label(rest[0][2], rest[0][1])} {format_time(rest[0][0])}"
    return Choice(best, best_k, why + ")")


def describe(name: str) -> str:
    """The one-line description of an algorithm."""
    return lookup(name, None).description


def lookup(name: str, kind: str | None, topo: Topology | None = None, pieces: int = 1) -> Algorithm:
    """The registry entry `name`, checked to serve `kind` on `topo` in `pieces` pieces; clear
    errors otherwise."""
    if kind is not None:
        check_kind(kind)
        if name not in algorithms(kind):
            known = ", ".join(algorithms(kind))
            raise ValueError(f"unknown {kind} algorithm {name!r}; known: {known}")
    elif name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    entry = ALGORITHMS[name]
    if topo is not None and topo.ndim not in entry.ranks:
        ranks = " or ".join(f"{r}-D" for r in entry.ranks)
        raise ValueError(f"algorithm {name!r} needs a {ranks} topology, got shape {topo.shape}")
    reason = entry.why_not(topo) if topo is not None else None
    if reason:
        raise ValueError(f"algorithm {name!r} cannot run on shape {topo.shape}: {reason}")
    if not entry.runs_in(in_flight.check_pieces(pieces)):
        stepped = ", ".join(a.name for a in _ENTRIES if a.costs is not None)
        raise ValueError(f"algorithm {name!r} runs in one piece; pieces={pieces} needs a closed "
                         f"form step by step, which these have: {stepped}")  # fmt: skip
    return entry


def default_algorithm(topo: Topology, kind: str) -> str:
    """The algorithm used when none is named: the torus algorithm of the topology's rank."""
    names = applicable(topo, kind)
    preferred = _PREFERRED.get(topo.ndim)
    return preferred if preferred in names else names[0]


def schedule(
    topo: Topology, kind: str = "all-reduce", algorithm: str = "torus-2d"
) -> CollectiveSchedule:
    """Build the schedule (steps of transfers) of `algorithm` for collective `kind` on `topo`."""
    entry = lookup(algorithm, kind, topo)
    work = entry.transfers(topo.n_chips)
    if work > MAX_TRANSFERS:
        raise ValueError(
            f"{algorithm!r} on {topo.n_chips} chips needs about {work:,} transfers; we simulate "
            f"at most {MAX_TRANSFERS:,} (try a smaller topology or a torus algorithm)"
        )
    k, phases, steps = entry.build(topo, kind)
    return CollectiveSchedule(kind, algorithm, topo, k, phases, steps)


def closed_form(
    topo: Topology,
    kind: str = "all-reduce",
    nbytes: float = 2**20,
    algorithm: str | None = None,
    chip: str | Chip | None = None,
    pieces: int | None = None,
) -> float:
    """Alpha-beta time (seconds) of `algorithm` for `kind` of `nbytes` per chip on `topo`, the
    payload run in `pieces` pieces (default one; in_flight.py).

    `chip` defaults to the one a preset of today's pods names ("tpu-v3" otherwise);
    `algorithm="auto"` prices the one ``choose`` picks (and its pieces, unless given).
    """
    check_kind(kind)
    spec = get_chip(chip or chip_of(topo))
    if algorithm == "auto":
        algorithm, pieces, _ = choose(topo, kind, nbytes, spec, pieces)
    pieces = 1 if pieces is None else pieces
    entry = lookup(algorithm or default_algorithm(topo, kind), kind, topo, pieces)
    if topo.n_chips == 1:
        return 0.0
    beta, alpha = spec.ici_link_bandwidth_Bps, spec.hop_latency_s
    if pieces == 1:
        return entry.time(topo, kind, float(nbytes), beta, alpha)
    return entry.time(topo, kind, float(nbytes), beta, alpha, pieces)
