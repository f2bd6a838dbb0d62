"""`gv.partition(prop)`: one per-device program, with every collective explicit.

Per equation, from the propagated shardings and the equation's factor rule:
  1. choose how to split the equation's factors (choice/choose_split.py: what propagation settled,
     or what an operand or result holds, under each rule the equation has: a conv dim splits with
     halos or as partial sums; split_cost.py: no work twice, then bytes, then time);
  2. reshard every operand to the sharding the local op needs (gv.reshard_plan);
  3. run the primitive on local shapes (local_ops.py rewrites shape params, masks padding);
  4. a split reduction factor leaves pending sums (resolved where a consumer needs them:
     all-reduce, or reduce-scatter when the consumer wants the dim split) or, for max/min,
     an all-reduce right away. need_replication / permutation factors stay whole; a split
     windowed factor (convolution, pooling) first exchanges its operand's halos with
     collective-permutes (exchange.py), unless its windows tile the dim exactly.
Symbolic (no devices: 4096-device meshes work). Entry: whole_plan.best_plan (up to four plans).
# XLA: SpmdPartitioner / SpmdPartitioningVisitor, PartitionedHlo::Reshard
"""

import dataclasses
import functools

import numpy as np

from gspmd_viz.core.choice import gather_or_reduce
from gspmd_viz.core.choice.choose_split import (
    EquationSplit,
    cached_plan,
    choose,
    frozen,
    rules_of,
)
from gspmd_viz.core.choice.follow_xla import result_driven
from gspmd_viz.core.cost.plan_cost import compute_flops, result_bytes
from gspmd_viz.core.halo import block_moves, windowed_ops
from gspmd_viz.core.partition import control_flow, lookahead, remake_scalars, twins
from gspmd_viz.core.program.trace import Cond, Equation, Literal, Loop, Value
from gspmd_viz.core.propagation.record import FactorAxes
from gspmd_viz.core.rules.registry import entry_for
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd import local_ops
from gspmd_viz.core.spmd.instructions import Combine, Compute, Const, Halo, MoveBlocks, Reshard
from gspmd_viz.core.spmd.reduce_combine import RIGHT_AWAY, ArgCombine, combine_collectives
from gspmd_viz.core.spmd.run import SPMDProgram

# --- the pass ---------------------------------------------------------------------------------


class PassMemo:
    """What the passes over one propagated program share (whole_plan builds up to four): what
    each value's consumers ask for (`wanted_by`: it depends on propagation only) and the bytes
    to move a value there from a sharding (`asked`: lookahead.asked_cost) or to hand it to its
    only reader (`handoffs`: lookahead.handoff_plan), each equation's
    splits (`splits`: its rules with propagation's split, costed alike by any pass) and each
    choice made, with the versions it read (`choices`: Partitioner.choice), kept under the
    equation's signature (twins.py: its twins in other layers get it too) when every value it
    read has a place among the equation's roles, else under the equation; and the follow
    pass's split of each twin (`follow_splits`: Partitioner.follow_split) and each split's
    local op, shared by twins (`applied`, `twin_applied`). Also what depends
    on the program alone: each value's only reader, the equation that makes it again from
    scalars, an equation's roles and a value's asked view (twins.py)."""

    def __init__(self):
        self.wanted_by: dict[Value, list[Sharding]] = {}
        self.asked: dict[tuple[Value, Sharding], float] = {}
        self.handoffs: dict[tuple, tuple] = {}  # lookahead.handoff_plan (handoff_key)
        self.splits: dict[Equation, list[EquationSplit]] = {}
        self.choices: dict[Equation | int, list[tuple]] = {}  # (reads, spread, rule, split,
        # shared, the ranks choose filled in or None)
        self.signatures: dict[Equation, int] = {}  # twins.signature, numbered
        self.signature_numbers: dict[tuple, int] = {}
        self.statics: dict[Equation, int] = {}  # twins.static, numbered alike
        self.follow_splits: dict[int, FactorAxes] = {}  # twins.follow_key -> result_driven
        self.follow_keys: dict[Equation, int] = {}  # twins.follow_key, numbered
        self.readers: dict[Value, tuple | None] = {}  # lookahead.sole_reader's (eqn, place)
        self.remade: dict[Value, Equation | None] = {}  # remake_scalars.remade_from
        self.roles: dict[Equation, list] = {}  # twins.roles
        self.asked_views: dict[Value, int] = {}  # twins._asked_view, numbered
        self.reader_views: dict[Equation, int] = {}  # twins._reader_view, numbered
        self.remade_ins: dict[Equation, tuple] = {}  # twins._remade_ins
        self.shardings: dict[tuple, Sharding] = {}  # EquationSplit.sharding: one per layout
        self.applied: dict[tuple, tuple] = {}  # Partitioner.applied: (split, its factor axes)
        # -> operand and result shardings, the local op
        self.twin_applied: dict[tuple, tuple] = {}  # Partitioner.twin_applied: (twins.static,
        # rule index, factor axes) -> the same
        self.program_facts: tuple | None = None  # Partitioner: (live units, live equations,
        # rotations, deferred slices, plain equations: _plain)


def _at(values: list, ref):
    """A value a remembered choice read: by its place among the roles (an int), or itself."""
    return values[ref] if isinstance(ref, int) else ref


def _plain(live_set: set, rotations: dict, deferred: dict) -> set:
    """The live equations Partitioner.equation splits as they are: not a rotation, its
    deferred slice or a flip (block moves), and with a result of some element."""
    return {
        e
        for e in live_set
        if e not in deferred
        and e not in rotations
        and e.primitive != "rev"
        and not _reads_nothing(e)
    }


def _reads_nothing(eqn: Equation) -> bool:
    """Do all of eqn's results (one at least) have no element (`jnp.roll(x, 0)` slices
    x[n:n])? Then they are constants (Partitioner.empty_results)."""
    return bool(eqn.outputs) and all(0 in v.shape for v in eqn.outputs)


class Versions(dict):
    """value -> [(sharding, buffer name)]: every copy of each value made so far. Looked up as
    a plain dict (every pass reads it at every operand), but while a choice is made
    (`reading`): then every value looked up is added to `reads`, what the choice read."""

    reads: set | None = None

    def reading(self) -> None:
        """Start noting the values looked up (`read` ends it and returns them)."""
        self.reads, self.__class__ = set(), _ReadVersions

    def read(self) -> tuple:
        """The values looked up since `reading`; plain lookups again."""
        found, self.reads, self.__class__ = tuple(self.reads), None, Versions
        return found

    def layouts(self, v) -> tuple | None:
        """The layouts (spec, pending sums) v exists in, in order; None before it is made."""
        held = dict.get(self, v)
        return None if held is None else tuple([(s.spec, s.unreduced) for s, _ in held])


class _ReadVersions(Versions):
    """Versions while a choice is made: each value looked up is noted in `reads` while that
    is a set (a caller may set it to None for a while: a look that is not the choice's)."""

    def __getitem__(self, v):
        if self.reads is not None:
            self.reads.add(v)
        return dict.__getitem__(self, v)

    def __contains__(self, v) -> bool:
        if self.reads is not None:
            self.reads.add(v)
        return dict.__contains__(self, v)


@dataclasses.dataclass
class Snapshot:
    """A pass's state before top-level unit `unit`: what resume() takes over."""

    unit: int
    versions: dict
    instructions: list
    notes: list
    count: dict  # Partitioner.fresh's numbering
    held: float
    departed: bool
    choices: list
    taken: list


class Partitioner:
    """One pass. `follow`: XLA's split everywhere (choice/follow_xla.py); `spread`: idle mesh axes
    share an equation's work (split_cost.spread); `every_trip`: loop constants' reshards priced
    every trip (`per_trip`). Then `departed`: a split not propagation's was chosen; `held`: the
    bytes of loop constants resharded once, before their loop (control_flow.hoisted); `choices`:
    where an equation weighed gathering a weight against reducing the partial product
    (choice/gather_or_reduce.py; the SPMDProgram's `choices`). `memo`: what the passes over one
    prop share (PassMemo; a pass of its own when omitted)."""

    def __init__(self, prop, chip=None, follow=False, spread=False, every_trip=False, memo=None):
        self.prop, self.mesh, self.program, self.chip = prop, prop.mesh, prop.program, chip
        self.follow, self.spread, self.every_trip = follow, spread, every_trip
        self.sizes, self.notes, self.departed, self.held = prop.mesh.shape, [], False, 0
        self.versions = Versions()
        self.instructions, self._count = [], {}
        for v in self.program.inputs:
            self.versions[v] = [(prop.sharding(v), v.name)]
        self.outputs = {v for v in self.program.outputs if isinstance(v, Value)}
        self.memo = PassMemo() if memo is None else memo
        if self.memo.program_facts is None:  # the same for every pass over the program
            for s in prop.shardings.values():  # the splits' shardings: propagation's objects
                if not s.unreduced:
                    self.memo.shardings.setdefault((s.spec, ()), s)
            units = self._live()
            live_set = {e for u in units for e in self._equations_of(u)}
            moves = block_moves.rotations(self.program, self.outputs)
            self.memo.program_facts = (units, live_set, *moves, _plain(live_set, *moves))
        _, self.live_set, self.rotations, self.deferred, self.plain = self.memo.program_facts
        self.wanted_by: dict[Value, list[Sharding]] = self.memo.wanted_by
        self.invariant, self.trips = set(), 1  # in a loop body: its constants' buffers, trips
        self.choices = []  # gather_or_reduce.GatherOrReduce of each equation that weighed both
        self.taken = []  # (equation, rule index, split, its gather notes) of each choice made
        self.unit, self.fork = (0, None), None  # the top-level unit partitioned; see snapshot

    def _equations_of(self, unit) -> list[Equation]:  # a loop or branch: its body
        if isinstance(unit, Loop | Cond):
            return [self.program.equations[i] for i in unit.region]
        return [unit]

    def splits(self, eqn: Equation) -> list[EquationSplit]:
        """One per rule the equation may split by (split.rules_of), ready to be costed. Made
        once per memo, but for a windowed op (its splits note, as they are costed, which halos
        would not pay: each pass notes its own)."""
        found = self.memo.splits.get(eqn)
        if found is not None:
            return found
        rules = rules_of(eqn, self.prop.rule(eqn))
        made = [self._split(eqn, rule, k == 0) for k, rule in enumerate(rules)]
        if not entry_for(eqn).halo:
            self.memo.splits[eqn] = made
        return made

    def split(self, eqn: Equation) -> EquationSplit:
        """The equation's first rule with propagation's settled split."""
        return self.splits(eqn)[0]

    def _split(self, eqn: Equation, rule, settled: bool) -> EquationSplit:
        """One rule with propagation's settled split (or none)."""
        propagated = tuple([self.prop.sharding(v) for v in eqn.outputs])
        fa = self.prop.factor_axes(eqn) if settled else {}
        q = EquationSplit(eqn, rule, fa, propagated, self.mesh, self.memo.shardings)
        if q.entry.identity:  # an annotation's operand moves to what it says, even
            q.settled = q.from_tensor(q.rule.results[0], propagated[0])  # against its input's
        return q

    # --- the cost interface EquationSplit asks for (split.Costs) ---------------------------
    def available(self, v: Value) -> list[Sharding]:
        return [s for s, _ in self.versions[v]]

    def wanted(self, v: Value) -> list[Sharding]:
        """The shardings v's consumers will likely ask for: what each live consumer's
        propagated split needs (and the propagated sharding, for a program output)."""
        found = self.wanted_by.get(v)
        if found is None:
            targets = [self.prop.sharding(v)] if v in self.outputs else []
            for eqn, pos in self.program.consumers.get(v, ()):
                if eqn in self.deferred:  # the rotation reads v as its result is split
                    targets.append(self.prop.sharding(self.deferred[eqn].concat.outputs[0]))
                elif eqn in self.live_set:
                    targets.append(self.split(eqn).likely_operand(pos))
            found = self.wanted_by[v] = list(dict.fromkeys(targets))
        return found

    def handoff_cost(self, v: Value, local: Sharding, past=None) -> float:
        """Costs.handoff_cost: handing a result on, one reader ahead (lookahead.py)."""
        return lookahead.handoff_cost(self, v, local, past)

    def fresh(self, base: str) -> str:
        self._count[base] = self._count.get(base, 0) + 1
        return f"{base}.{self._count[base]}"

    # --- getting a value into the sharding a consumer needs -------------------------------
    def per_trip(self, v: Value, version: tuple[Sharding, str], target: Sharding) -> float:
        """Bytes to reshard one version of v, per trip of the loop being partitioned: a loop
        constant's reshard runs once, before the loop (control_flow.hoisted); priced so unless
        `every_trip`. A version held in `target` itself (the splits keep one Sharding object per
        layout: EquationSplit.sharding) costs nothing, without asking the planner."""
        if version[0] is target:  # reshard_plan's plan of no steps: 0.0 bytes
            return 0.0
        cost = cached_plan(version[0], target, v.shape, v.dtype).wire_bytes
        if (
            cost
            and not self.every_trip
            and self.trips > 1
            and control_flow.runs_once(self, version[1])
        ):
            return cost / self.trips
        return cost

    def fetch_cost(self, v: Value, target: Sharding) -> float:
        versions = self.versions[v]  # most values exist in one version: nothing to weigh
        if len(versions) == 1:
            cost = self.per_trip(v, versions[0], target)
        else:
            cost = min(self.per_trip(v, version, target) for version in versions)
        return 0.0 if cost and remake_scalars.remade_split(self, v, target) else cost

    def fetch(self, v: Value, target: Sharding, consumer: Equation | None) -> str:
        versions = self.versions[v]  # most values exist in one version: nothing to weigh
        if len(versions) > 1:
            versions = [min(versions, key=lambda version: self.per_trip(v, version, target))]
        src, name = versions[0]
        if src is target:  # held as asked (one object per layout: per_trip): no plan asked
            return name
        plan = cached_plan(src, target, v.shape, v.dtype)
        if not plan.steps:  # the same data on every device (at most size-1 axes differ)
            return name
        if plan.wire_bytes and (how := remake_scalars.remade_split(self, v, target)):
            return remake_scalars.remake(self, v, target, how)  # made from scalars: made again
        dst = self.fresh(v.name)
        self.instructions.append(Reshard(v, name, dst, plan, consumer))
        self.versions[v].append((target, dst))
        return dst

    # --- one equation ----------------------------------------------------------------------
    def equation(self, eqn: Equation) -> None:
        if eqn in self.plain:  # most: none of the cases below
            return self.split_equation(eqn)
        if eqn in self.deferred:  # partitioned with its rotation, if that is not taken
            return
        if _reads_nothing(eqn):
            return self.empty_results(eqn)
        rot = self.rotations.get(eqn)
        if self.move_blocks(eqn, rot):
            return
        for s in rot.slices if rot else ():
            if s in self.deferred:
                self.split_equation(s)
        self.split_equation(eqn)

    def empty_results(self, eqn: Equation) -> None:
        """Results with no element read nothing (`jnp.roll(x, 0)` slices x[n:n]): constants."""
        for v in eqn.outputs:
            zeros = Literal(np.zeros(v.shape, v.dtype), v.shape, v.dtype)
            self.instructions.append(Const(v.name, zeros))
            self.versions[v] = [(Sharding(self.mesh, ()), v.name)]

    def move_blocks(self, eqn: Equation, rot) -> bool:
        """A roll or flip along dims its result splits: whole blocks move, no gather
        (block_moves); False otherwise (the equation, and a roll's slices, run as usual)."""
        if rot is None and eqn.primitive != "rev":
            return False
        out = eqn.outputs[0]
        target = self.prop.sharding(out)
        found = block_moves.plan_for(eqn, rot, target, self.available)
        if found is None:
            return False
        v, plan = found
        src = self.fetch(v, target, eqn)
        source = f"eqn {eqn.index} {eqn.primitive}"
        self.instructions.append(MoveBlocks(v, src, out.name, plan, target, source, eqn))
        self.versions[out] = [(target, out.name)]
        return True

    def chosen(self, eqn: Equation) -> tuple[EquationSplit, FactorAxes, list[str]]:
        splits = self.splits(eqn)
        q0 = splits[0]
        if q0.entry.halo:  # sanitizing notes which halos would not pay: before choosing
            q0.sanitize(q0.settled)
        conflicts = () if self.follow else gather_or_reduce.conflicts(q0, self)
        ranked = {} if conflicts else None  # where both plans are weighed, the record needs
        if self.follow:  # every plan's rank too
            q, fa, shared = q0, self.follow_split(eqn, q0), False
        else:
            plans = tuple(fa for c in conflicts for fa in (c.gather, c.reduce))
            q, fa, shared = self.choice(eqn, splits, plans, ranked)
        if shared and self.fork is None:  # the first choice only sharing idle axes made (the
            self.fork = self.snapshot(eqn)  # snapshot holds none of eqn's records: see resume)
        self.departed = self.departed or q is not q0 or fa != q0.sanitize(q0.settled)
        self.choices += [self.record(q0, c, fa, ranked) for c in conflicts]
        notes = self.gather_notes(eqn, q, fa) if q.gathered else []
        self.taken.append((eqn, splits.index(q), fa, notes))
        return q, fa, notes

    def record(self, q0: EquationSplit, conflict, fa: FactorAxes, ranked: dict):
        """gather_or_reduce.recorded of a conflict weighed at q0's equation; or, where choose
        ranked every split the record reads (it then reads nothing of the pass's state) and
        the equation is no windowed op (whose split notes halos as it goes), the call that
        makes it: only the kept plan's records are made (SPMDProgram.choices)."""
        splits = (conflict.gather, conflict.reduce, fa)
        if q0.entry.halo or any(frozen(x) not in ranked for x in splits):
            return gather_or_reduce.recorded(q0, conflict, fa, self, ranked)
        return functools.partial(gather_or_reduce.recorded, q0, conflict, dict(fa), None, ranked)

    def snapshot(self, eqn: Equation):
        """The pass's state just before eqn's first choice only sharing idle axes made (a
        spread pass's): up to it, a pass without sharing makes the same choices (the memo's
        rule), so it may resume there (whole_plan). False where eqn is not a top-level unit
        partitioned from its start (a loop's body, a roll's slices)."""
        k, unit = self.unit
        return unit is eqn and eqn not in self.rotations and self._state(k)

    def _state(self, unit: int) -> Snapshot:
        versions = {v: list(held) for v, held in dict.items(self.versions)}
        copies = (list(self.instructions), list(self.notes), dict(self._count))
        mine = (self.departed, list(self.choices), list(self.taken))
        return Snapshot(unit, versions, *copies, self.held, *mine)

    def resume(self, start: Snapshot) -> int:
        """Take over `start` (consumed: its lists become this pass's); the unit to go on at."""
        self.versions = Versions(start.versions)
        self.instructions, self.notes, self._count = start.instructions, start.notes, start.count
        self.held, self.departed = start.held, start.departed
        self.choices, self.taken = start.choices, start.taken
        return start.unit

    def replays_follow(self) -> bool:
        """Would the follow pass make every choice this pass made? Then it would make the same
        program (a pass is its choices, made in order on the state the earlier ones left) and
        the same notes (a windowed op's split is made afresh in each pass, so its notes on
        gathered dims are compared as the follow pass would write them)."""
        for eqn, k, fa, notes in self.taken:
            q0 = self.splits(eqn)[0]
            if q0.entry.halo:  # a windowed op's split, made afresh: sanitized first, as chosen()
                q0.sanitize(q0.settled)  # sanitizes it (noting which halos would not pay)
            if k or self.follow_split(eqn, q0) != fa or self.gather_notes(eqn, q0, fa) != notes:
                return False
        return True

    def follow_split(self, eqn: Equation, q0: EquationSplit) -> FactorAxes:
        """follow_xla.result_driven's split of eqn (`q0`: its first rule), worked out once per
        twin (twins.follow_key: the equation alone and its operands' propagated shardings, all
        it reads); afresh for a windowed op (sanitizing notes which halos would not pay)."""
        if q0.entry.halo:
            return result_driven(q0, self.prop)
        known, key = self.memo.follow_splits, twins.follow_key(self, eqn)
        found = known.get(key)
        if found is None:
            found = known[key] = result_driven(q0, self.prop)
        return dict(found)

    def choice(self, eqn: Equation, splits: list, plans=(), ranked=None) -> tuple:
        """choose_split.choose's answer (split, factor axes, whether only sharing idle axes
        made it; `plans` and `ranked` as choose takes them), remembered in the memo with the
        versions it read and the ranks it filled in: a pass holding those values in the same
        layouts gets the same answer (a pass whose idle axes share work answers for one whose
        do not, unless sharing made its winner). The versions read include the operands as
        they arrive, which decide the gather-or-reduce plans. Outside loops only (in a loop, a
        version's buffer decides: control_flow.runs_once), and not for windowed ops (what they
        cost reads the instructions made: `exchanged`)."""
        if self.trips > 1 or splits[0].entry.halo:
            return choose(splits, self, plans, ranked)
        values, keys = twins.roles(self, eqn), (eqn, twins.signature(self, eqn))
        for key in keys:
            for reads, spread, k, fa, shared, ranks in self.memo.choices.get(key, ()):
                answers = spread == self.spread or (spread and not shared)
                if (
                    answers
                    and (ranked is None or ranks is not None)
                    and all(self.versions.layouts(_at(values, r)) == held for r, held in reads)
                ):
                    if ranked is not None:
                        ranked.update(ranks)
                    return splits[k], dict(fa), shared
        self.versions.reading()
        q, fa, shared = choose(splits, self, plans, ranked)
        read = self.versions.read()
        places = twins.placed(values, read)  # a read value without a place: this equation's
        reads = tuple(zip(places or read, map(self.versions.layouts, read), strict=True))
        ranks = None if ranked is None else dict(ranked)
        remembered = (reads, self.spread, splits.index(q), dict(fa), shared, ranks)
        self.memo.choices.setdefault(keys[places is not None], []).append(remembered)
        return q, fa, shared

    def split_equation(self, eqn: Equation) -> None:
        """Choose the equation's split, reshard its operands, run it locally."""
        q, fa, notes = self.chosen(eqn)
        if notes or not q.entry.known:
            self.note_gathers(eqn, notes)
        op_shardings, results, local = self.applied(q, fa)
        ins = [
            v
            if isinstance(v, Literal) and (not v.shape or target.is_replicated)  # whole
            else self.buffer(v, target, eqn)
            for v, target in zip(eqn.inputs, op_shardings, strict=True)
        ]
        splits = self.exchange_halos(eqn, q, fa, ins, op_shardings) if q.halo_operands else ()
        compute = local_ops.reading(local, eqn, ins)
        if splits:  # the op runs on window-ready input: no padding, no base dilation
            params = windowed_ops.windowed_params(eqn.eqn, splits, compute.params)
            local_op = windowed_ops.local_op(eqn.eqn)
            compute = dataclasses.replace(compute, params=params, local_op=local_op)
            if windowed_ops.returns_halo(eqn.eqn):  # the op goes in now; its return comes last
                compute = self.return_halo(eqn, compute, splits, results[0])
        red = q.combine in RIGHT_AWAY and q.reduction_axes(fa)  # (a sum stays pending)
        if red:  # its results hold partial maxima (minima) until the Combine below
            compute = dataclasses.replace(compute, partial=f"{{{q.combine} over {','.join(red)}}}")
        self.instructions.append(compute)
        for v, s in zip(eqn.outputs, results, strict=True):
            self.versions[v] = [(s, v.name)]
        if red:
            self.combine(eqn, results[0], q.combine, red, (ins[0], op_shardings[0]))

    def applied(self, q: EquationSplit, fa: FactorAxes) -> tuple:
        """(operand shardings, result shardings, the local op reading no buffers yet) of q's
        equation split as `fa`: the same in every pass, so made once per memo (afresh for a
        windowed op, whose splits are made afresh)."""
        if q.entry.halo:
            return self.make_applied(q, fa)
        key = (q, tuple(fa.items()))  # chosen splits are sanitized: in factor order, tuples
        found = self.memo.applied.get(key)
        if found is None:
            found = self.memo.applied[key] = self.twin_applied(q, fa, key[1])
        return found

    def twin_applied(self, q: EquationSplit, fa: FactorAxes, split: tuple) -> tuple:
        """`applied` of a twin (an equation of the same twins.static number: it differs only
        in its values' names) split alike (local_ops.reading gives its local op q's equation
        and result names); made when q's equation is the first of its twins."""
        eqn = q.eqn
        key = (twins.static(self, eqn), self.splits(eqn).index(q), split)
        found = self.memo.twin_applied.get(key)
        if found is None:
            found = self.memo.twin_applied[key] = self.make_applied(q, fa)
        return found

    def make_applied(self, q: EquationSplit, fa: FactorAxes) -> tuple:
        """`applied`, worked out: the masks of padded shards go in the local op, and its
        FLOPs and result bytes (the same for its twins: an op a plan reads is costed once per
        memo)."""
        ops, results = q.tensor_shardings(fa)
        masks = [m for i, target in enumerate(ops) for m in self.masks(q, fa, i, target)]
        local = local_ops.local_compute(q, (), ops, results, masks)
        object.__setattr__(local, "flops", compute_flops(local))  # a frozen op no one holds
        object.__setattr__(local, "result_bytes", result_bytes(local))  # yet: set in place
        return ops, results, local  # (dataclasses.replace copies it slowly)

    def exchange_halos(self, eqn: Equation, q: EquationSplit, fa, ins, op_shardings) -> tuple:
        """Exchange the halos of the operands a windowed equation reads (buffer names in `ins`
        replaced); returns the splits of its window-ready input, () for none."""
        found = ()
        for k in q.halo_operands:
            split = q.halo_splits(fa, k)
            if split:
                ins[k] = self.halo(eqn, ins, k, op_shardings[k], split)
                found = found or split
        return found

    def return_halo(self, eqn: Equation, compute: Compute, splits, sharding: Sharding):
        """The op leaves a window-ready result (select_and_scatter_add): it goes to a buffer of
        its own, and the exchange backwards adds its halo to the shards that own it."""
        v = eqn.outputs[0]
        ready = self.fresh(v.name)
        shape = list(sharding.shard_shape(v.shape))
        for split in splits:
            shape[split.dim] = split.plan.ready_span
        self.instructions.append(dataclasses.replace(compute, outs=(ready,), ready=tuple(shape)))
        source = f"eqn {eqn.index} {eqn.primitive}"
        return Halo(v, ready, v.name, splits, sharding, 0.0, source, eqn, returned=True)

    def note_gathers(self, eqn: Equation, notes: list[str]) -> None:
        """Say why an equation's operands are gathered when no rule or no halo can split it
        (`notes`: gather_notes of its split)."""
        if not entry_for(eqn).known:
            self.notes.append(
                f"eqn {eqn.index}: no factor rule for {eqn.primitive!r}, so it runs replicated "
                "(its operands are all-gathered first)"
            )
        self.notes += [note for note in notes if note not in self.notes]

    @staticmethod
    def gather_notes(eqn: Equation, q: EquationSplit, fa: FactorAxes) -> list[str]:
        """Why each dim a halo exchange would split stays gathered (none outside windowed ops)."""
        kept = q.operand_sharding(fa, 0) if eqn.inputs and q.gathered else None
        return [
            f"eqn {eqn.index} {eqn.primitive}: dim {dim} is gathered, not split: {why}"
            for dim, why in q.gathered.items()
            if kept is not None and not kept.dim_axes(dim)  # else split, over fewer axes
        ]

    def masks(self, q: EquationSplit, fa: FactorAxes, i: int, target: Sharding):
        v, out, entry = q.eqn.inputs[i], [], q.entry
        for d, fs in enumerate(q.rule.operands[i]):
            axes = target.dim_axes(d)
            if not axes or v.shape[d] % target.dim_shards(d) == 0:
                continue  # no padding on this dim (most dims: checked first)
            # not lookups; an operand whose halos are exchanged gets its padding filled there
            kinds = ("reduction",) if i in q.halo_operands else ("reduction", "windowed-sum")
            reduced = any(q.rule.factors[f].kind in kinds for f in fs)
            if reduced or i in entry.zero_padding:
                fill = local_ops.identity_element(q.combine or "sum", v.dtype)
                out.append(local_ops.Mask(i, d, v.shape[d], axes, fill))
        if i not in entry.once:
            return out
        red = q.reduction_axes(fa)  # an operand summed in as it is: kept on one device
        return out + local_ops.on_one_device(i, entry.once, target.shard_shape(v.shape), red)

    def halo(self, eqn: Equation, ins, k: int, sharding: Sharding, splits) -> str:
        """Exchange operand k's halos; returns the window-ready buffer's name."""
        v, fill = eqn.inputs[k], local_ops.halo_fill(eqn, ins, k)
        if not isinstance(v, Value):  # a captured constant, in its Const buffer ins[k]
            v = Value(-1, v.shape, v.dtype, ins[k])
        done = self.exchange_done(ins[k], splits, fill)
        if done:  # made here already (a max pool's gradient reads its forward's operand)
            return done
        dst = self.fresh(v.name)
        source = f"eqn {eqn.index} {eqn.primitive}"
        self.instructions.append(Halo(v, ins[k], dst, splits, sharding, fill, source, eqn))
        return dst

    def exchange_done(self, src: str, splits, fill) -> str | None:
        """The window-ready buffer of an exchange of `src`'s halos made already, or None."""
        key = (src, splits, windowed_ops.fill_key(fill))
        for done in self.instructions:
            if (
                isinstance(done, Halo)
                and (done.src, done.splits, windowed_ops.fill_key(done.fill)) == key
            ):
                return done.dst
        return None

    def exchanged(self, eqn: Equation, k: int, sharding: Sharding, splits) -> bool:
        """split.Costs: an exchange the split would reuse costs nothing more."""
        v, fill = eqn.inputs[k], local_ops.halo_fill(eqn, None, k)
        if not isinstance(v, Value) or fill is None or v not in self.versions:
            return False
        names = [name for s, name in self.versions[v] if s == sharding]
        return any(self.exchange_done(name, splits, fill) for name in names)

    def combine(self, eqn: Equation, s: Sharding, how: str, axes, operand) -> None:
        """Combine partial results right away: all-reduce partial max/min; for argmax/argmin
        gather (value, index) pairs from `operand` (its buffer and sharding) and pick."""
        colls = combine_collectives(eqn, how, axes, self.sizes, s)
        if how in ("max", "min"):
            combines = [
                Combine(v, v.name, self.fresh(v.name), how, axes, s, c)
                for v, c in zip(eqn.outputs, colls, strict=True)
            ]
        else:  # [.., n/x, ..] -> argmax -> local winners -> pairs gathered over x -> pick
            (dim,), (v,), (buffer, sharding) = eqn.params["axes"], eqn.outputs, operand
            where = (buffer, dim, eqn.inputs[0].shape[dim], sharding.dim_axes(dim))
            combines = [ArgCombine(v, v.name, self.fresh(v.name), how, axes, s, *colls, *where)]
        for ins in combines:
            self.instructions.append(ins)
            self.versions[ins.value] = [(s, ins.dst)]

    def live(self) -> list:
        """Equations and loops some output depends on (dead code would still cost collectives):
        found once per memo."""
        return self.memo.program_facts[0]

    def _live(self) -> list:
        needed = {v for v in self.program.outputs if isinstance(v, Value)}
        return control_flow.live_units(self.program, range(len(self.program.equations)), needed)

    def partition_units(self, units) -> None:
        for unit in units:
            if isinstance(unit, Loop):
                self.instructions.append(control_flow.partition_loop(self, unit))
            elif isinstance(unit, Cond):
                self.instructions.append(control_flow.partition_cond(self, unit))
            else:
                self.equation(unit)

    def buffer(self, v: Value | Literal, target: Sharding, consumer: Equation) -> str:
        """A buffer holding v in `target` (a literal is first made a replicated Const)."""
        if isinstance(v, Literal):
            const = Value(-1, v.shape, v.dtype, self.fresh("const"))
            self.instructions.append(Const(const.name, v))
            self.versions[const] = [(Sharding(self.mesh, ()), const.name)]
            v = const
        return self.fetch(v, target, consumer)

    def run(self, start: Snapshot | None = None):
        """The pass over the live units (from where `start`, another pass's snapshot, left
        off), then the outputs fetched in their propagated shardings: the SPMDProgram."""
        units, first = self.live(), self.resume(start) if start else 0
        for k in range(first, len(units)):
            self.unit = (k, units[k])
            self.partition_units([units[k]])
        if self.spread and self.fork is None:  # no choice only sharing made: all is shared
            self.fork = self._state(len(units))
        outputs = [
            self.fetch(v, self.prop.sharding(v), None) if isinstance(v, Value) else v
            for v in self.program.outputs
        ]
        spmd = SPMDProgram(self.prop, self.instructions, outputs, self.notes)
        spmd.choices = tuple(self.choices)
        return spmd
