"""The passes of one gv.partition share their work (partitioner.PassMemo): a choice one pass
made is reused by another that holds the values it read in the same layouts, and by a twin
equation (partition/twins.py: the same signature, the values in the same places in the same
layouts; layer 2 of a decoder is costed as layer 1 was). The references are the chooser
without the memo (choose_split.choose on every equation of every pass) and the memo without
twins (each equation's choices kept for itself alone): the plan kept, its per-device program,
notes, costs and gather-or-reduce records must be the same, on the zoo, the training steps,
the keras-hub models and random programs (tests/fuzz_programs.py). Likewise the follow plan
is the greedy plan's program when the greedy pass made every choice the follow pass would
(whole_plan.follow_plan): its reference is the follow pass run; the greedy pass that goes on
from the spread pass's state is checked against one run from the start, and the chooser that
passes over splits whose rank_head loses against min() over every split's key; the follow
split a twin worked out (Partitioner.follow_split) against result_driven on each equation;
what the memo keeps of the program alone (each value's only reader, remade-from-scalars
producer, an equation's roles and asked views) against working it out at every ask; and
one Sharding object per layout the splits make (EquationSplit.sharding) against a new one
each time; each split's local op, made once per memo and shared by twins (Partitioner.applied,
twin_applied), against one made at each equation of each pass; and what handing a value to its
only reader costs but for the reader's other operands (lookahead.handoff_plan) against working
it out at every ask; and each local op's FLOPs kept where it was made (Compute.flops) against
working them out from the op when the plan is costed. Each instruction's equation is
compared too: a twin's text is its own."""

import pytest
from fuzz_programs import programs
from hypothesis import HealthCheck, given, settings
from library_models import MODELS, build

import gspmd_viz as gv
from gspmd_viz.core.choice import choose_split, gather_or_reduce
from gspmd_viz.core.choice.choose_split import choose
from gspmd_viz.core.choice.follow_xla import result_driven
from gspmd_viz.core.cost import plan_cost
from gspmd_viz.core.partition import lookahead, partitioner, twins
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.zoo import examples, training

SLOW = HealthCheck.too_slow


def _unremembered(self, eqn, splits, plans=(), ranked=None):
    return choose(splits, self, plans, ranked)


def _every_key(found, key, head, prune, best=None, lowest=None):
    keyed = [] if best is None else [(lowest, best)]  # weighed first: it wins a tie
    keyed += [(key(candidate, None), candidate) for candidate in found]
    lowest, best = min(keyed, key=lambda pair: pair[0])
    return best, lowest


def _follow_split_afresh(self, eqn, q0):
    return result_driven(q0, self.prop)


class _Forgetful(dict):
    """A memo dict that never answers: whatever asks works it out again."""

    def __contains__(self, key) -> bool:
        return False

    def get(self, key, default=None):
        return default


_REAL_MEMO = partitioner.PassMemo.__init__


def _forgetful_memo(self):
    _REAL_MEMO(self)
    # what the program alone decides
    names = ("readers", "remade", "roles", "asked_views", "reader_views", "remade_ins")
    for name in (*names, "follow_keys"):
        setattr(self, name, _Forgetful())


def _flops_worked_out(ins):
    return plan_cost._local_flops(ins.eqn, ins.operand_shardings, ins.shardings)


def _recorded_at_once(self, q0, conflict, fa, ranked):
    return gather_or_reduce.recorded(q0, conflict, fa, self, ranked)


def _new_sharding(self, spec, pending=()):
    return Sharding.of_axes(self.mesh, spec, pending)


REFERENCES = (  # what each reference replaces, with what
    (partitioner.Partitioner, "choice", _unremembered),
    (twins, "signature", lambda p, eqn: ("alone", eqn)),
    (partitioner.Partitioner, "replays_follow", lambda self: False),  # the follow pass runs
    (partitioner.Partitioner, "resume", lambda self, start: 0),  # the greedy pass from the start
    (choose_split, "_lowest", _every_key),  # every candidate's key worked out
    (partitioner.Partitioner, "follow_split", _follow_split_afresh),  # no twin's answer
    (partitioner.PassMemo, "__init__", _forgetful_memo),  # readers, roles... worked out again
    (choose_split.EquationSplit, "sharding", _new_sharding),  # a new object per layout asked
    (partitioner.Partitioner, "applied", partitioner.Partitioner.make_applied),  # each local op
    # made afresh
    (partitioner.Partitioner, "twin_applied", lambda self, q, fa, _: self.make_applied(q, fa)),
    # each split's local op made for its own equation, not a twin's
    (lookahead, "handoff_plan", lookahead._handoff_plan),  # a handoff's reader weighed afresh
    (plan_cost, "compute_flops", _flops_worked_out),  # each op's FLOPs from the op, not kept
    (partitioner.Partitioner, "record", _recorded_at_once),  # every pass's records made at once
)


def _equations(instructions) -> list:
    """The equation each instruction (in loops and branches too) says it runs or feeds: the
    text alone would not tell a twin's equation from its own."""
    found = []
    for ins in instructions:
        eqn = getattr(ins, "eqn", getattr(ins, "consumer", None))
        found.append(eqn and eqn.index)
        for body in (getattr(ins, "body", ()), *getattr(ins, "branches", ())):
            found += _equations(body)
    return found


def _text(spmd) -> str:
    equations = repr(_equations(spmd.instructions))
    texts = [spmd.per_device_text(), *spmd.notes, str(spmd.cost), repr(spmd.choices), equations]
    return "\n".join(texts)


def assert_same_as_reference(prop, references=REFERENCES, **kw) -> str:
    """The plan's text (`_text`), checked equal with each (owner, name, reference) patched in."""
    ours = _text(gv.partition(prop, **kw))
    for owner, name, reference in references:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(owner, name, reference)
            assert _text(gv.partition(prop, **kw)) == ours, name
    return ours


@pytest.mark.parametrize("name", sorted(examples.ZOO))
@pytest.mark.parametrize("kw", [{}, {"chip": None}, {"share_idle": False}])
def test_zoo_plans_are_those_of_the_chooser_without_memo(name, kw):
    ex = examples.get(name)
    assert_same_as_reference(gv.propagate(gv.trace(ex.fn, *ex.args)), **kw)


@pytest.mark.parametrize("specs", ["DP_SPECS", "TWO_D_SPECS"])
def test_training_step_plans_are_those_of_the_chooser_without_memo(specs):
    step = training.make_step(gv.Mesh({"x": 2, "y": 4}), getattr(training, specs))
    params, opt_state, batches = training.init()
    prop = gv.propagate(gv.trace(step, params, opt_state, batches(0)))
    assert_same_as_reference(prop)


@pytest.mark.parametrize("name", MODELS)
def test_keras_hub_model_plans_are_those_of_the_chooser_without_memo(name):
    f, args = build(name)
    assert_same_as_reference(gv.propagate(gv.trace(f, *args)))


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[SLOW])
@given(programs())
def test_random_plans_are_those_of_the_chooser_without_memo(p):
    assert_same_as_reference(gv.propagate(gv.trace(p.fn, *p.args)))


def test_the_greedy_pass_takes_most_choices_from_the_spread_pass(monkeypatch):
    """Not vacuous: after the pass that lets idle axes share work, the greedy pass asks the
    chooser again only where sharing won or the layouts it read differ."""
    ex = examples.get("transformer_block")
    prop, chip = gv.propagate(gv.trace(ex.fn, *ex.args)), chip_cost("tpu-v3")
    calls = []
    real = partitioner.choose
    monkeypatch.setattr(partitioner, "choose", lambda *a: calls.append(1) or real(*a))
    memo = partitioner.PassMemo()
    partitioner.Partitioner(prop, chip, spread=True, memo=memo).run()
    asked_by_spread = len(calls)
    partitioner.Partitioner(prop, chip, memo=memo).run()
    asked_by_greedy = len(calls) - asked_by_spread
    assert asked_by_spread > 10
    assert asked_by_greedy < asked_by_spread / 2


def test_a_layer_takes_most_choices_from_the_layer_before(monkeypatch):
    """Not vacuous: in a 2-layer keras-hub llama, the pass that chooses every equation asks
    the chooser again for fewer than half of them (twins.py)."""
    f, args = build("llama")
    prop, chip = gv.propagate(gv.trace(f, *args)), chip_cost("tpu-v3")
    calls = []
    real = partitioner.choose
    monkeypatch.setattr(partitioner, "choose", lambda *a: calls.append(1) or real(*a))
    partitioner.Partitioner(prop, chip, spread=True).run()
    assert len(calls) < len(prop.program.equations) / 2


def _follow_pair(prop):
    """(the greedy pass, its plan's text without records, the follow pass's text), one memo."""
    memo, chip = partitioner.PassMemo(), chip_cost("tpu-v3")
    greedy = partitioner.Partitioner(prop, chip, memo=memo)
    plan = greedy.run()
    plan.choices = ()  # the follow pass records none: compared without them
    follow = partitioner.Partitioner(prop, chip, follow=True, memo=memo).run()
    return greedy, _text(plan), _text(follow)


def test_a_greedy_pass_that_replays_the_follow_pass_made_its_program():
    """Where the greedy pass made every choice the follow pass would, the follow pass makes
    the same per-device program and notes (so whole_plan.follow_plan reuses it); on the zoo
    and the keras-hub models, some of which replay and some of which do not."""
    props = [gv.propagate(gv.trace(ex.fn, *ex.args)) for ex in map(examples.get, examples.ZOO)]
    props += [gv.propagate(gv.trace(f, *args)) for f, args in map(build, MODELS)]
    replayed = 0
    for prop in props:
        greedy, ours, theirs = _follow_pair(prop)
        if greedy.replays_follow():
            replayed += 1
            assert ours == theirs
    assert 0 < replayed < len(props)


def test_no_follow_pass_runs_where_the_greedy_pass_made_its_choices(monkeypatch):
    """Not vacuous: the keras-hub llama's greedy pass takes XLA's split everywhere, so
    gv.partition runs no follow pass; llama_kh's does not, so it runs one."""
    follows = []
    real = partitioner.Partitioner.run
    monkeypatch.setattr(
        partitioner.Partitioner,
        "run",
        lambda self, *a: follows.append(self.follow) or real(self, *a),
    )
    for name, runs in (("llama", 0), ("llama_kh", 1)):
        f, args = build(name)
        follows.clear()
        gv.partition(gv.propagate(gv.trace(f, *args)))
        assert follows.count(True) == runs, name


@pytest.mark.parametrize(
    ("program", "resumed_at"),
    [("mlp", "end"), ("transformer_block", "middle"), ("mlp_fori", "start")],
)
def test_the_greedy_pass_goes_on_where_the_spread_pass_first_shared(program, resumed_at):
    """Not vacuous: the spread pass keeps its state from before its first choice that only
    sharing idle axes made (its `fork`; at its end where it made none, the whole of it), and
    the greedy pass goes on from there; none where that choice is in a loop's body."""
    ex = examples.get(program)
    prop, chip = gv.propagate(gv.trace(ex.fn, *ex.args)), chip_cost("tpu-v3")
    spreader = partitioner.Partitioner(prop, chip, spread=True)
    spreader.run()
    units = len(spreader.live())
    at = spreader.fork.unit if spreader.fork else None
    assert {"end": at == units, "middle": at and 0 < at < units, "start": at is None}[resumed_at]


def test_gather_or_reduce_choices_come_from_the_memo_too(monkeypatch):
    """Not vacuous: in llama_kh (whose projections weigh gathering a weight against reducing
    the partial product) the chooser is asked with both plans fewer times than equations
    weigh them: a pass, or a layer, holding the operands as they arrived before takes the
    choice and its ranks from the memo."""
    weighed, asked = [], []
    real_conflicts, real_choose = gather_or_reduce.conflicts, partitioner.choose

    def conflicts(q, costs):
        found = real_conflicts(q, costs)
        weighed.extend(found[:1])
        return found

    def choose(splits, costs, also=(), ranked=None):
        asked.extend([1] if also else [])
        return real_choose(splits, costs, also, ranked)

    monkeypatch.setattr(gather_or_reduce, "conflicts", conflicts)
    monkeypatch.setattr(partitioner, "choose", choose)
    f, args = build("llama_kh")
    gv.partition(gv.propagate(gv.trace(f, *args)))
    assert 0 < len(asked) < len(weighed)  # 9 of 16 when written; all 16 without the memo


def test_twins_share_the_follow_split(monkeypatch):
    """Not vacuous: in the 2-layer keras-hub llama, result_driven is worked out for fewer
    than two thirds of the equations whose follow split is asked for (layer 2 takes layer 1's)."""
    asked, worked_out = [], []
    real_follow, real_driven = partitioner.Partitioner.follow_split, partitioner.result_driven
    monkeypatch.setattr(
        partitioner.Partitioner,
        "follow_split",
        lambda self, eqn, q0: asked.append(eqn) or real_follow(self, eqn, q0),
    )
    monkeypatch.setattr(
        partitioner, "result_driven", lambda q, prop: worked_out.append(q) or real_driven(q, prop)
    )
    f, args = build("llama")
    gv.partition(gv.propagate(gv.trace(f, *args)))
    assert 0 < len(worked_out) < 2 * len(set(asked)) / 3


def test_a_split_is_sanitized_alike_from_axes_given_as_lists():
    """EquationSplit.sanitize keys its answers by the split asked about: axes given as lists
    (unhashable) are answered as the same axes given as tuples."""
    ex = examples.get("mlp")
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    q = partitioner.Partitioner(prop).split(prop.program.equations[0])
    axes = {f: ("x", "y") for f in range(len(q.rule.factors))}
    as_lists = {f: list(a) for f, a in axes.items()}
    assert q.sanitize(as_lists) == choose_split.EquationSplit._sanitize(q, axes)
    assert q.sanitize(axes) == q.sanitize(as_lists)


def test_the_splits_of_one_partition_make_one_object_per_layout():
    """Not vacuous: the splits of a pass share the shardings they make (EquationSplit.sharding),
    across equations and rules: one object per spec and pending sums, far fewer than asked;
    propagation makes one per spec too, and a split asking for one of those gets it."""
    f, args = build("llama")
    prop = gv.propagate(gv.trace(f, *args))
    p = partitioner.Partitioner(prop)
    p.run()
    splits = [q for q, *_ in p.memo.splits.values()]
    made = [shardings for q in splits for shardings in q._shardings.values()]  # tensor_shardings
    asked = [s for ops, results in made for s in ops + results]
    layouts = {(s.spec, s.unreduced) for s in asked}
    assert len({id(s) for s in asked}) == len(layouts) < len(asked)
    held = {(s.spec, s.unreduced): s for s in prop.shardings.values()}  # one object per spec
    assert len({id(s) for s in prop.shardings.values()}) == len(held) < len(prop.shardings)
    shared = [s for s in asked if (s.spec, s.unreduced) in held]  # propagation's own objects
    assert shared and all(s is held[s.spec, s.unreduced] for s in shared)


def test_a_greedy_pass_resumed_where_sharing_first_won_records_its_choices_once(monkeypatch):
    """The spread pass's snapshot before its first choice that only sharing idle axes made
    holds none of that equation's gather-or-reduce records: the greedy pass resuming there
    weighs the equation again and records it once, as a greedy pass from the start does. A
    draw whose first shared choice is a dot weighing both plans (one of 30 such among
    benchmarks/annotations.py's seeded draws)."""
    ex = examples.get("mlp_remat_grad", specs={"x": None, "w1": (None, "x"), "w2": (None, "x")})
    prop, chip = gv.propagate(gv.trace(ex.fn, *ex.args)), chip_cost("tpu-v3")
    memo, forks = partitioner.PassMemo(), []
    real = partitioner.Partitioner.snapshot

    def snapshot(self, eqn):  # the fork's equation, and whether it weighs both plans
        forks.append((eqn.index, bool(gather_or_reduce.conflicts(self.splits(eqn)[0], self))))
        return real(self, eqn)

    monkeypatch.setattr(partitioner.Partitioner, "snapshot", snapshot)
    spreader = partitioner.Partitioner(prop, chip, spread=True, memo=memo)
    spreader.run()
    assert spreader.fork and forks[0][1]  # not vacuous: the fork's equation has conflicts
    resumed = partitioner.Partitioner(prop, chip, memo=memo).run(spreader.fork)
    fresh = partitioner.Partitioner(prop, chip).run()
    assert forks[0][0] in [c.eqn for c in fresh.choices]
    assert repr(resumed.choices) == repr(fresh.choices)


def test_gather_or_reduce_records_are_made_for_the_kept_plan_only(monkeypatch):
    """Not vacuous: llama with keras-hub's layout weighs gathering against reducing in both
    the spread and the greedy pass, and keeps one plan; the records of the other are never
    made (the kept plan's are those made at once: test_keras_hub_model_plans_...)."""
    f, args = build("llama_kh")
    prop = gv.propagate(gv.trace(f, *args))
    made, real = [], gather_or_reduce.recorded
    monkeypatch.setattr(gather_or_reduce, "recorded", lambda *a: made.append(a) or real(*a))
    kept = gv.partition(prop).choices
    assert kept and len(made) == len(kept)
    monkeypatch.setattr(partitioner.Partitioner, "record", _recorded_at_once)
    made.clear()
    assert repr(gv.partition(prop).choices) == repr(kept)
    assert len(made) > len(kept)  # the plan not kept weighed some too
