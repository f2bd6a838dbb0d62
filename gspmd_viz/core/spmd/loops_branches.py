"""Loops and branches of the per-device program, as data: a per-device `lax.scan` /
`lax.while_loop` (RunLoop) and `lax.switch` (RunCond) over instructions partitioned once, with
their collectives counted over every trip. Running them is spmd/run.py's job."""

import dataclasses

from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd.instructions import Compute, Const, instruction_collectives, local_type


def _scaled(c: Collective, trips: int, note: str, source: str | None = None) -> Collective:
    """c run `trips` more times (inside a loop), with why."""
    return dataclasses.replace(c, trips=c.trips * trips, trips_note=note, source=source or c.source)


@dataclasses.dataclass(frozen=True)
class RunLoop:
    """A loop run per device: `body` (instructions, partitioned once) runs `loop.trips` times.
    Buffers: `init` -> the carried parameters `carried`, each iteration's slice of `xs` ->
    `sliced`; the body leaves `carry_out` (the next carried values) and `y_out` (stacked into
    `ys`); after the last trip the carried values are `final`.  # XLA: HandleWhile"""

    loop: object  # records.Loop
    init: tuple  # buffer names (or Literals), one per carried value
    xs: tuple[str, ...]
    carried: tuple[str, ...]
    sliced: tuple[str, ...]
    body: tuple
    carry_out: tuple
    y_out: tuple
    final: tuple[str, ...]
    ys: tuple[str, ...]
    carry_shardings: tuple[Sharding, ...]
    cond: tuple = ()  # a while's condition: instructions over `cond_carried`, leaving `pred`
    cond_carried: tuple[str, ...] = ()
    pred: str | None = None

    @property
    def outs(self) -> tuple[str, ...]:
        return self.final + self.ys

    def inner_collectives(self) -> list[tuple[object, list[Collective]]]:
        """(instruction of the condition or body, its collectives over every trip)."""
        n, note, where = self.loop.trips, self.loop.counted, self.loop.primitive
        return [
            (ins, [_scaled(c, n, c.trips_note or note, f"{c.source} in {where}") for c in cs])
            for ins, cs in instruction_collectives(self.cond + self.body)
        ]

    @property
    def collectives(self) -> list[Collective]:
        """The body's (and condition's) collectives, each counted over every trip."""
        return [c for _, cs in self.inner_collectives() for c in cs]

    def text(self) -> str:
        name = lambda a: a if isinstance(a, str) else repr(a)  # noqa: E731
        carried = ", ".join(
            f"{p}:{local_type(s, c[1])}={name(i)}"
            for p, s, c, i in zip(
                self.carried, self.carry_shardings, self.loop.carries, self.init, strict=True
            )
        )
        sliced = ", ".join(f"{p}={x}[t]" for p, x in zip(self.sliced, self.xs, strict=True))
        head = f"{', '.join(self.outs)} = {self.loop.primitive} × {self.loop.trips} trips"
        head += f" ({self.loop.counted})" if self.loop.counted else ""
        lines = [f"{head} (carry {carried or '-'}; slice {sliced or '-'}) {{"]
        if self.pred is not None:
            lines.append(f"  while ({', '.join(self.cond_carried)}):")
            lines += ["    " + line for ins in self.cond for line in ins.text().splitlines()]
            lines.append(f"    -> {self.pred}; do:")
        for ins in self.body:
            lines += ["    " + line for line in ins.text().splitlines()]
        out = ", ".join(map(name, self.carry_out)) or "-"
        ys = ", ".join(map(name, self.y_out)) or "-"
        lines.append(f"  }} next carry ({out}), stack ({ys})")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class RunCond:
    """A cond run per device: the replicated `selector` picks one of `branches` (instructions,
    each partitioned once over buffers already in place), which leaves `results[b]`; they
    become `outs` (one sharding per result, whatever the branch).
    # XLA: HandleConditional"""

    cond: object  # records.Cond
    selector: str
    branches: tuple  # per branch, its instructions
    results: tuple  # per branch, its result buffers
    outs: tuple[str, ...]
    shardings: tuple[Sharding, ...]

    def inner_collectives(self) -> list[tuple[object, list[Collective]]]:
        """(instruction of a branch, its collectives: an upper bound, one branch runs)."""
        n = len(self.branches)
        return [
            (ins, [_scaled(c, 1, f"in branch {b} of {n} (counted as if it runs)") for c in cs])
            for b, body in enumerate(self.branches)
            for ins, cs in instruction_collectives(body)
        ]

    @property
    def collectives(self) -> list[Collective]:
        return [c for _, cs in self.inner_collectives() for c in cs]

    def text(self) -> str:
        lines = [f"{', '.join(self.outs)} = switch {self.selector} {{"]
        for b, (body, res) in enumerate(zip(self.branches, self.results, strict=True)):
            lines.append(f"  branch {b}:")
            lines += ["    " + line for ins in body for line in ins.text().splitlines()]
            lines.append(f"    -> ({', '.join(res)})")
        lines.append("  }")
        return "\n".join(lines)


_WRITES_OUTS = Compute | RunLoop | RunCond  # made once: plan_cost asks at every instruction


def defines(ins) -> tuple[str, ...]:
    """The buffers an instruction writes."""
    if isinstance(ins, _WRITES_OUTS):
        return ins.outs
    return (ins.name,) if isinstance(ins, Const) else (ins.dst,)


def inner_instructions(ins) -> tuple:
    """The instructions a loop (condition, then body) or a branch (every branch) runs."""
    if isinstance(ins, RunLoop):
        return ins.cond + ins.body
    return tuple(i for b in ins.branches for i in b) if isinstance(ins, RunCond) else ()
