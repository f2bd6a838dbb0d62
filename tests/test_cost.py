"""Issue 11's acceptance: per device, our partitioned programs do no more work, hold no more
memory and send no more bytes than XLA's own partitioner given the same shardings, on the zoo
and on random annotations of it: FLOPs <= 1.05x and memory <= 1.10x XLA's (each compiled
program's own cost and memory analysis, gv.xla_cost.compare: the FLOPs of each op once, with
XLA's loop fusion off), wire bytes <= 1.0x (XLA's all-reduce + dynamic-slice counted as the
reduce-scatter it is), results equal to the unpartitioned program. A program over a bound
fails with both sides' figures."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.core.cost import plan_cost, split_cost, staged_bytes
from gspmd_viz.core.partition.partitioner import Partitioner
from gspmd_viz.core.program.records import Literal, Value
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.sharding.collective import Collective
from gspmd_viz.core.spmd import reshard_kernels
from gspmd_viz.core.spmd.instructions import Const, Reshard
from gspmd_viz.core.spmd.loops_branches import RunLoop
from gspmd_viz.partition_on_chip import chip_cost
from gspmd_viz.xla import cost as xla_cost
from gspmd_viz.xla.compiled import lowered, parse_hlo
from gspmd_viz.zoo import examples
from tests.oracles import place_flops
from tests.test_partition import assert_unpartitioned
from tests.test_propagate_random_xla import BROADCASTING_MOE

BOUNDS = {"flops": 1.05, "memory": 1.10, "wire_bytes": 1.0}


def _within_xla(ex, spmd) -> None:
    assert_unpartitioned(spmd, *ex.args)
    side = xla_cost.compare(ex.fn, ex.args, spmd)
    over = {k: round(side.ratio(k), 3) for k, bound in BOUNDS.items() if side.ratio(k) > bound}
    assert not over, f"{ex.name} {ex.specs}: ours/XLA over the bound {over}; {side.text()}"


def check_against_xla(ex, **options):
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)), **options)
    _within_xla(ex, spmd)
    return spmd


@pytest.mark.parametrize("name", sorted(examples.ZOO))
def test_zoo_within_xla_flops_memory_and_bytes(name):
    check_against_xla(examples.get(name))


# Random draws where choosing by bytes alone did work twice: 1.08x-2.4x XLA's FLOPs
FOUND = [
    ("mlp_custom_vjp_grad", {"x": ("y", "x"), "w1": None, "w2": (("y", "x"), None)}),
    ("mlp_custom_vjp_grad", {"x": ("y", None), "w1": None, "w2": ("y", "x")}),
    ("mlp_custom_vjp_grad", {"x": ("y", None), "w1": (None, None), "w2": None}),
    ("mlp_remat_grad", {"x": ("x", None), "w1": None, "w2": None}),
    ("mlp_remat_grad", {"x": ("y", None), "w1": None, "w2": (None, "y")}),
    ("mlp_train_step", {"x": ("y", "x"), "w1": ("y", None), "w2": None}),
    ("mlp_while", {"x": ("x", "y"), "w1": ("x", None), "w2": ("x", "y")}),
    ("embedding_loss", {"table": ("y", "x"), "ids": (None, "y"), "logits": (None, "x", None)}),
    (
        "embedding_loss",
        {"table": ("x", None), "ids": (None, ("x", "y")), "logits": (None, None, ("y", "x"))},
    ),
]


@pytest.mark.parametrize("name, specs", FOUND)
def test_draws_that_did_work_twice_are_within_xla(name, specs):
    check_against_xla(examples.get(name, specs=specs))


# Random draws where refusing all work twice sent more than XLA: an operand split on a factor
# the other operand holds whole (x [16, 32/y] @ w1 [32, 64]) was kept split, w1 sliced and
# the partial sums reduced (bytes 1.14x-4x XLA's), where XLA gathers the split operand
SLICED = [
    ("mlp_fori", {"x": None, "w1": (None, None), "w2": (None, "y")}),  # 18 KiB / 4.5 KiB
    ("mlp_fori", {"x": None, "w1": (None, None), "w2": ("x", "y")}),  # 10.5 KiB / 6.0 KiB
    ("mlp_while", {"x": (None, "y"), "w1": (None, "x"), "w2": None}),  # 3.5 KiB / 2.0 KiB
    ("mlp_while", {"x": ("x", "y"), "w1": (None, "x"), "w2": None}),  # 3.5 KiB / 2.0 KiB
    ("mlp_train_step", {"x": (None, ("x", "y")), "w1": (None, None), "w2": None}),  # 14 / 8.8
    ("mlp_train_step", {"x": (None, ("x", "y")), "w1": ("x", None), "w2": None}),  # 10 / 8.8
    ("conv_block", {"img": (None, None, None, "y"), "kernel": (None, "x", "y", None)}),  # 120/96
]


@pytest.mark.parametrize("name, specs", SLICED)
def test_draws_that_sliced_instead_of_gathering_are_within_xla(name, specs):
    check_against_xla(examples.get(name, specs=specs))


# A random draw where the chooser costed a loop constant's gather per trip: x [16/(x,y), 32] @
# w1 [32/(x,y), 64] in a 3-trip loop moved x (an all-to-all) and reduce-scattered the partial
# sums every trip, 11.2 KiB; gathering w1 runs once, before the loop (control_flow.hoisted), 7 KiB
# as XLA's. A reshard of a loop constant now costs its bytes over the trips.
HOISTED = [("mlp_fori", {"x": (("x", "y"), None), "w1": (("x", "y"), None), "w2": None})]


@pytest.mark.parametrize("name, specs", HOISTED)
def test_a_loop_constant_gathered_once_is_costed_once(name, specs):
    check_against_xla(examples.get(name, specs=specs))


# The other side of moving a loop constant once: a seeded draw whose body reads the relu output
# laid out over (y, x) against w2 laid out over (x, y). Permuting w2 once, before the loop,
# sends 1 KiB where XLA permutes the activation on each of the 3 trips (3 x 512 B), but the moved
# w2 is held beside the original through the loop: 1.13x XLA's memory. The plan that prices the
# move every trip, as XLA does, is weighed too (whole_plan.held_less) and kept
HELD_THROUGH = examples.get(
    "mlp_fori", specs={"x": (None, "y"), "w1": (None, ("y", "x")), "w2": (("x", "y"), None)}
)


def test_a_loop_moves_its_activation_rather_than_hold_a_moved_weight_through_it():
    spmd = check_against_xla(HELD_THROUGH)
    permutes = [c for c in spmd.collectives if c.kind == "collective-permute"]
    assert [(c.shape, c.trips) for c in permutes] == [((16, 8), 3)], permutes
    assert "priced every trip" in spmd.notes[-1], spmd.notes


def test_a_loop_constant_moved_once_is_held_and_priced_once_unless_every_trip():
    prop = gv.propagate(gv.trace(HELD_THROUGH.fn, *HELD_THROUGH.args))
    once, every_trip = Partitioner(prop), Partitioner(prop, every_trip=True)
    once.run(), every_trip.run()
    # w2 [64, 32] f32 over 8 devices: one [8, 32] block of 1 KiB permuted before the loop
    assert (once.held, every_trip.held) == (8 * 32 * 4, 0)


# Random draws where a move-only op, freed of the redundant-work rule over an axis its readers
# want it whole on, took the split that holds more for the same bytes (a lookup gathering its
# table: memory 1.33x XLA's), or lost bytes later (the scan: 65 KiB / 58 KiB). Of two splits
# equal in work, bytes and time, the one whose local buffers hold less is chosen.
HOLDS_LESS = [
    ("embedding_loss", {"ids": None, "table": None, "logits": ("y", None, "x")}),
    (
        "transformer_scan",
        {
            "x": None,
            "wq": ("y", None, "x"),
            "wk": (None, "x", None),
            "wv": (None, None, "y"),
            "wo": (None, None, None),
            "qkv": ("y", None, None, None),
            "wi": ("y", None),
            "h": None,
            "wout": None,
            "attn_out": ("x", "y", None),
            "ffn_in": ("x", None, None),
            "out": None,
        },
    ),
]


@pytest.mark.parametrize("name, specs", HOLDS_LESS)
def test_of_equal_splits_the_one_that_holds_less_is_chosen(name, specs):
    check_against_xla(examples.get(name, specs=specs))


# Random draws where the runner packed independent all-gathers into one buffer (hoisting the
# later gathers to the first) and held more than XLA for the same plan (memory 1.18x, 1.31x):
# the packed buffer, its gathered form and each part sliced back out lived at once. Every
# all-gather now runs where the plan puts it, on its own buffer.
UNPACKED = [
    {
        "x": None,
        "wq": None,
        "qkv": None,
        "wk": (None, "y", None),
        "wv": None,
        "wo": None,
        "attn_out": (None, ("y", "x"), None),
        "ffn_in": None,
        "wi": (None, "y"),
        "h": None,
        "wout": ("y", None),
        "out": None,
    },
    {
        "x": None,
        "wq": (None, None, "y"),
        "qkv": None,
        "wk": None,
        "wv": ("y", None, "x"),
        "wo": None,
        "attn_out": (None, ("x", "y"), None),
        "ffn_in": None,
        "wi": ("x", None),
        "h": (None, "x", "y"),
        "wout": (("x", "y"), None),
        "out": None,
    },
]


@pytest.mark.parametrize("specs", UNPACKED)
def test_gathers_run_where_the_plan_puts_them_not_packed_together(specs):
    check_against_xla(examples.get("transformer_block", specs=specs))


def test_an_uneven_input_is_costed_without_the_runners_padding():
    """w [4, 16] split 8 ways: shard_map needs an even split, so the runner pads w to [8, 16]
    around the per-device program, and XLA:CPU compiled that pad into collective-permutes and
    selects (FLOPs 170 vs XLA's 50, memory 708 B vs 324 B). XLA keeps an uneven shard padded in
    place; the per-device program alone is what compares."""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(w):
        return 3.0 * gv.mesh_split(w, mesh, (("x", "y"), None)) + 1.0

    w = jnp.arange(4 * 16, dtype=jnp.float32).reshape(4, 16)
    spmd = gv.partition(gv.propagate(gv.trace(f, w)))
    assert_unpartitioned(spmd, w)
    assert spmd.collectives == [] and "collective-permute" not in spmd.compiled(w).as_text()
    side = xla_cost.compare(f, (w,), spmd)
    assert side.ratio("flops") <= 1.0 and side.ratio("memory") <= 1.0, side.text()


# Random draws where a matmul computed the same rows on every device of a mesh axis no operand
# is split over (FLOPs 1.6x-3.6x XLA's). XLA splits the contraction over that axis and
# all-reduces partial sums; we let the idle devices share the rows or columns and gather the
# result (mlp: wire 1.8 KiB against XLA's 3.5, FLOPs 41,478 against 41,732); share_idle=False
# repeats the work.
SHARED = [
    ("mlp", {"x": ("x", None), "w1": None, "w2": ("x", None)}),
    ("mlp", {"x": None, "w1": ("x", None), "w2": ("x", "y")}),
    ("mlp_cond", {"x": ("x", "y"), "w1": None, "w2": ("x", None)}),
]


@pytest.mark.parametrize("name, specs", SHARED)
def test_idle_devices_share_a_matmul_instead_of_repeating_it(name, specs):
    ex = examples.get(name, specs=specs)
    repeated = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)), share_idle=False)
    with pytest.raises(AssertionError, match="flops"):  # over XLA's FLOPs without sharing
        check_against_xla(ex, share_idle=False)
    shared = check_against_xla(ex)
    assert any("share its work" in n for n in shared.notes)
    assert shared.cost.flops < repeated.cost.flops


# Draws where sharing the forward matmul's work leaves the weight's gradient split where the
# update must hold it whole: spread everywhere, the plan sends 2.2x and 3.3x XLA's bytes. The
# whole plans are compared (whole_plan.shared) and the plain one kept.
NOT_SHARED = [
    ("mlp_train_step", {"x": (None, "y"), "w1": None, "w2": None}),
    ("mlp_custom_vjp_grad", {"x": None, "w1": ("x", None), "w2": None}),
]


@pytest.mark.parametrize("name, specs", NOT_SHARED)
def test_work_is_not_shared_where_the_whole_plan_then_moves_more(name, specs):
    ex = examples.get(name, specs=specs)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    spread_everywhere = Partitioner(prop, chip_cost("tpu-v3"), spread=True).run()
    assert gv.partition(prop).wire_bytes < spread_everywhere.wire_bytes
    check_against_xla(ex)


# A seeded draw where attention [8@x, 16, 4@y, 8] meets the output projection [32@x, 4, 8@y]:
# each splits a different factor over y, so no factor promised y, and every plan gathered both
# and did the projection four times over (1.27x XLA's FLOPs). Now y is promised when every
# operand arrives split over it, and the follow plan splits the heads as the larger operand
# (attention) holds them, as XLA does. The plan that shares idle work gathers the FFN weight
# whole: XLA:CPU issues that gather first thing in the loop body, so the weight and its pieces
# are held through the attention (1.20x XLA's memory). The peak estimate now issues a reshard
# of what is ready at the start there too, rates that plan above the greedy one, and keeps greedy
ATTENTION_OUT = {
    "x": None,
    "wq": (None, None, ("y", "x")),
    "wk": (("x", "y"), None, None),
    "wv": ("x", "y", None),
    "wo": ("x", None, "y"),
    "qkv": None,
    "wi": (None, "x"),
    "h": (None, "x", "y"),
    "wout": (("y", "x"), None),
    "attn_out": ("x", None, None),
    "ffn_in": ("x", None, None),
    "out": None,
}


@pytest.mark.parametrize("plan", [{}, {"follow": True}], ids=["greedy", "follow"])
def test_an_axis_every_operand_arrives_split_over_is_not_left_to_repeat_work(plan):
    ex = examples.get("transformer_scan", specs=ATTENTION_OUT)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    _within_xla(ex, Partitioner(prop, chip_cost("tpu-v3"), **plan).run())


def test_a_weight_gathered_at_the_start_of_a_loop_body_is_held_through_it():
    ex = examples.get("transformer_scan", specs=ATTENTION_OUT)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    chip = chip_cost("tpu-v3")
    plain = plan_cost.with_cost(Partitioner(prop, chip).run(), chip)
    spread = plan_cost.with_cost(Partitioner(prop, chip, spread=True).run(), chip)
    measured = [xla_cost.ours(p, ex.args).memory for p in (plain, spread)]
    assert measured[1] > measured[0], measured  # the gather issued early costs memory...
    assert spread.cost.peak_bytes > plain.cost.peak_bytes  # ...and the estimate sees it
    check_against_xla(ex)


# The same meeting in the transformer block, annotated by hand (lesson 03b): 1.13x XLA's FLOPs
# and 1.12x its memory before; the kept plan now splits the projection's batch over both axes
def test_the_attention_output_projection_keeps_the_heads_split():
    specs = {"x": ("x", None, None), "wo": ("x", None, "y"), "attn_out": ("x", None, None)}
    specs |= {w: (None, "y", None) for w in ("wq", "wk", "wv")}
    specs |= dict.fromkeys(("qkv", "wi", "h", "wout", "ffn_in", "out"))
    check_against_xla(examples.get("transformer_block", specs=specs))


# Seeded draws the whole-plan choice got wrong before (ours / XLA, FLOPs / memory / bytes):
# sharing that moved fewer bytes for the same FLOPs was refused for not doing fewer FLOPs
# (transformer_scan 0.40 / 1.25 / 0.85, embedding_loss 0.51 / 1.59 / 1.22), sharing whose
# collectives staged copies our peak estimate left out was kept (moe 1.06 / 1.04 / 0.68,
# mlp_fori 0.95 / 1.22 / 0.85), and sharing that sent half the bytes in less memory was refused
# for doing more FLOPs than the greedy plan, though fewer than XLA's (transformer_block 0.46 /
# 0.96 / 1.68), and sharing that held a third less memory for 5% more bytes was refused (moe
# 0.52 / 1.21 / 0.46; shared: 0.53 / 0.84 / 0.48).
WHOLE_PLAN_FOUND = [
    (
        "transformer_block",
        {
            "x": None,
            "h": None,
            "qkv": (None, None, "y", "x"),
            "wq": (None, ("y", "x"), None),
            "wk": ("x", None, "y"),
            "wv": ("x", None, "y"),
            "wo": ("x", None, None),
            "wi": ("x", None),
            "wout": (None, "y"),
            "attn_out": (None, None, None),
            "ffn_in": None,
            "out": None,
        },
    ),
    (
        "transformer_scan",
        {
            "x": (None, ("x", "y"), None),
            "h": ("x", None, "y"),
            "qkv": ("x", None, None, None),
            "wq": ("y", "x", None),
            "wk": ("x", "y", None),
            "wv": ("y", None, None),
            "wo": (None, None, ("x", "y")),
            "wi": ("y", "x"),
            "wout": ("y", None),
            "attn_out": None,
            "ffn_in": None,
            "out": None,
        },
    ),
    (
        "embedding_loss",
        {"ids": (None, "y"), "logits": ("y", None, None), "table": (("y", "x"), None)},
    ),
    (  # sharing moves the router's one-hot chain by small all-to-alls and slices: 1.056x
        # XLA's FLOPs as the fused program's cost analysis charges every slice for the whole
        # chain; each op counted once, 0.907x (memory 1.044x, bytes 0.683x)
        "moe",
        {
            "x": None,
            "combine": (None, "y", None, None),
            "dispatched": None,
            "wi": None,
            "wo": (None, ("y", "x"), None),
            "out": (None, "x", "y"),
        },
    ),
    ("mlp_fori", {"x": ("x", "y"), "w1": None, "w2": ("x", "y")}),
    (
        "moe",
        {
            "x": (None, "y", "x"),
            "combine": ("y", None, "x", None),
            "dispatched": (None, None, "x", None),
            "wi": (None, None, None),
            "wo": (None, "x", None),
            "out": ("x", "y", None),
        },
    ),
    (  # the router's x reached the one-hot chain through broadcasting `mul`s, so every plan
        # moved `combine` by a permute whose slice XLA:CPU computes the chain in again (1.07x
        # XLA's FLOPs); propagated as Shardy does (test_propagate_random_xla), G/y reaches it
        "moe",
        BROADCASTING_MOE,
    ),
    (  # the follow plan moves the one-hot combine weights [.., 4@y] -> [4@(y,x), ..] by an
        # all-to-all: 1.08x XLA's FLOPs as the fused program's cost analysis charged each of
        # its 4 chunks for the whole chain that makes them; each op counted once, 0.99x
        "moe",
        {
            "x": (("y", "x"), None, None),
            "combine": (None, None, None, "y"),
            "dispatched": (None, ("y", "x"), None, None),
            "wi": (None, "y", None),
            "wo": None,
            "out": None,
        },
    ),
]


# A seeded draw where the plain plan's peak estimate counted each sharding constraint's result as
# a buffer of its own (14.5 KiB, where it holds 9.7 KiB compiled), so sharing, whose gathered w1
# lives through the loop, looked 2% heavier and was kept, holding 16% more (1.16x XLA's). An
# annotation holds no buffer now: 9.5 KiB against sharing's 10.8 KiB, and the plain plan is kept
ALIASED = [("mlp_fori", {"x": (None, ("x", "y")), "w1": ("y", "x"), "w2": ("x", None)})]


@pytest.mark.parametrize("name, specs", ALIASED)
def test_a_plan_is_not_charged_a_copy_for_each_annotation(name, specs):
    spmd = check_against_xla(examples.get(name, specs=specs))
    assert not any("share its work" in n for n in spmd.notes), spmd.notes


@pytest.mark.parametrize("name, specs", WHOLE_PLAN_FOUND)
def test_whole_plan_draws_found_by_the_seeded_fuzz_are_within_xla(name, specs):
    check_against_xla(examples.get(name, specs=specs))


# Seeded draws that split the moe's 4 experts (or its capacity of 4) over all 8 devices:
# half the devices held only padding and multiplied it (FLOPs 1.41x and 1.15x XLA's). XLA
# splits the experts' hidden dim 32 eight ways instead; a split over more devices than a factor
# has elements now ranks as work left undone on the idle ones.
PADDED = [
    {
        "x": (None, None, "x"),
        "combine": None,
        "dispatched": (("y", "x"), None, None, None),
        "wi": (("x", "y"), None, None),
        "wo": (None, ("y", "x"), None),
        "out": None,
    },
    {
        "x": (None, "x", None),
        "combine": (None, None, None, None),
        "dispatched": (None, None, ("x", "y"), None),
        "wi": None,
        "wo": (None, "x", "y"),
        "out": None,
    },
]


# Since propagation breaks a tie between source tensors of one size by operand order, as Shardy
# does, the second draw's gating network is split as XLA splits it (before: one value apart);
# the plan that repeats no work there sent 1.055x XLA's bytes (13.8 KiB against 13.1) and gave
# way to XLA's. Since a dim split over more devices than elements moves off its padding before
# a gather (reshard), it sends 0.73x XLA's bytes for 0.80x its FLOPs and 0.71x its memory
@pytest.mark.parametrize("specs", PADDED)
def test_a_factor_split_over_more_devices_than_it_has_is_within_xla(specs):
    check_against_xla(examples.get("moe", specs=specs))


def test_devices_holding_only_padding_count_as_idle():
    ex = examples.get("moe")
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    experts = next(e for e in prop.program.equations if e.outputs[0].shape == (4, 4, 4, 32))
    q = Partitioner(prop).split(experts)  # d [E, G, C, M] @ wi [E, M, H]: factors E G C M H
    e, h = 0, 4
    assert [f.size for f in q.rule.factors] == [4, 4, 4, 16, 32]
    assert split_cost.idle_on_padding(q, {e: ("x", "y")}) == 8 / 4  # 4 experts, 8 devices
    assert split_cost.idle_on_padding(q, {e: ("y",)}) == 1  # one expert a device
    assert split_cost.idle_on_padding(q, {h: ("x", "y")}) == 1  # 32 columns, 4 a device
    assert split_cost.idle_on_padding(q, {e: ("x", "y"), h: ()}) == 2


# A seeded draw where an add did work twice rather than move bytes: in a 3-trip loop the carry
# lives split over x, the MLP's update over y; adding them split over y (repeated over x's 2
# devices, not y's 4) cost a permute and a gather back every trip, 1.33x XLA's bytes. An
# elementwise op repeated costs no more than a copy, so the bytes decide, as XLA's do.
def test_an_elementwise_op_repeats_its_cheap_work_to_save_bytes():
    ex = examples.get("mlp_fori", specs={"x": None, "w1": ("y", "x"), "w2": ("y", "x")})
    check_against_xla(ex)
    prop = gv.propagate(gv.trace(examples.get("mlp").fn, *examples.get("mlp").args))
    relu, matmul = (
        next(e for e in prop.program.equations if e.primitive == p) for p in ("max", "dot_general")
    )
    costs = Arrivals(prop, "tpu-v3")
    for eqn, repeated in ((relu, 1), (matmul, 2 * 4)):  # done whole, with x and y promised
        q = Partitioner(prop).split(eqn)
        assert split_cost.twice(q, {}, costs, {"x", "y"}) == repeated


@st.composite
def annotated(draw, names=None):
    """A zoo program (one of `names`, default any) with each annotation redrawn: every mesh axis
    on one dim or none, or the annotation left out."""
    base = examples.get(draw(st.sampled_from(names or sorted(examples.ZOO))))
    specs = {}
    for ann, rank in base.ranks.items():
        dims = [[] for _ in range(rank)]
        for axis in draw(st.permutations(base.mesh.axis_names)):
            where = draw(st.integers(-1, rank - 1))
            if where >= 0:
                dims[where].append(axis)
        spec = tuple(tuple(d) if len(d) > 1 else d[0] if d else None for d in dims)
        specs[ann] = draw(st.none() | st.just(spec))
    assume(any(s is not None for s in specs.values()))  # no annotation: no mesh
    return examples.get(base.name, specs=specs, ranks=base.ranks)


# Random draws of the conv block where the image arrives split on its channels and the
# kernel whole: we gathered the image and convolved it whole on every device (FLOPs 3.5x and
# 2.6x XLA's). XLA slices the kernel and reduces partial sums; we now split the work too (the
# image's split moved to its batch by one all-to-all, or the kernel sliced). A kernel split on
# its channels, the image whole, is gathered (XLA too: it is the smaller).
CONV_CHANNELS = [
    {"img": (None, None, None, ("y", "x")), "kernel": ("y", "x", None, None)},
    {"img": (None, None, "x", "y"), "kernel": ("x", None, None, None)},
    {"img": ("x", None, None, None), "kernel": (None, "x", "y", None)},
]


@pytest.mark.parametrize("specs", CONV_CHANNELS)
def test_a_conv_moves_the_smaller_operand_of_a_split_channel_dim(specs):
    check_against_xla(examples.get("conv_block", specs=specs))


# The gradient of a remat'd MLP with w2 split over (x, y): the weight update was gathered on an
# inner dim, which XLA:CPU copied into and out of another layout (1.14x XLA's memory), and the
# plans that left propagation's split for 2% fewer FLOPs at the same bytes and estimated memory
# held more once compiled; a saving under CLOSE no longer leaves XLA's plan
def test_a_plan_that_saves_too_few_flops_keeps_xlas_split():
    ex = examples.get("mlp_remat_grad", specs={"x": None, "w1": (None, None), "w2": ("x", "y")})
    spmd = check_against_xla(ex)
    assert any("saved too few FLOPs" in n for n in spmd.notes), spmd.notes


# A seeded draw where the kept plan sent more bytes than XLA's plan and was slower on the chip
# too, for fewer FLOPs or less memory: mlp_fori (bytes 1.44x, 25.1 us against 16.1 on a TPU v3).
# XLA's plan is kept now. (The moe draw with its capacity split over more devices than it has,
# bytes 1.055x, was the other; its plans now send fewer bytes than XLA's: PADDED above.)
HEAVIER_AND_SLOWER = [
    ("mlp_fori", {"x": (None, "y"), "w1": ("x", None), "w2": ("x", "y")}),
]


@pytest.mark.parametrize("name, specs", HEAVIER_AND_SLOWER)
def test_a_plan_heavier_and_slower_than_xlas_is_not_kept(name, specs):
    spmd = check_against_xla(examples.get(name, specs=specs))
    assert "where the plan that did fewer FLOPs or held less took" in spmd.notes[-1], spmd.notes


# A lookup in a table split over y, whose reader wants the vocabulary over x. Propagation's
# split of the logits matmul was taken at once for being free, though it left x idle: both x
# devices computed every logit and a free slice threw half away (1.85x XLA's FLOPs). Slicing the
# table first halves the work. Both gather the table over y; XLA then looks rows up split over x
# and all-reduces them over x, sending 2.25x our bytes. Ours holds the gathered table, the rows
# and the table's half the matmul reads at one point, so more memory than XLA's program: the
# draw where time and memory part (test_time_decides_and_memory_only_has_to_fit)
TABLE_OVER = examples.get(
    "embedding_loss", specs={"ids": None, "table": ("y", None), "logits": ("y", None, "x")}
)


def test_a_free_split_that_leaves_an_asked_for_axis_idle_is_weighed():
    ex = TABLE_OVER
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))
    assert_unpartitioned(spmd, *ex.args)
    side = xla_cost.compare(ex.fn, ex.args, spmd)
    assert side.ratio("flops") <= BOUNDS["flops"] and side.ratio("wire_bytes") <= 1.0, side.text()


# A lookup in a table whose rows are split over (x, y) while the ids' batch is split over y: we
# gathered the whole table (7 KiB), XLA gathers it over y only (3 KiB), looks rows up where they
# live and all-reduces the [4, 8, 32] results over x (4 KiB): the same bytes, and we held 1.30x
# XLA's memory. The split in which the rows give y up to the batch is now a candidate
def test_a_lookup_gives_the_ids_axis_up_and_looks_rows_up_where_they_live():
    ex = examples.get(
        "embedding_loss",
        specs={"ids": None, "table": (("x", "y"), None), "logits": ("y", None, "x")},
    )
    spmd = check_against_xla(ex)
    moves = {(c.kind, c.axes) for c in spmd.collectives}
    assert ("all-gather", ("y",)) in moves and ("all-gather", ("x", "y")) not in moves, moves


# A moe draw whose expert weights wi [4@(y,x), 16, 32] (4 experts over 8 devices: padding on
# four) were wanted as [4@y, 16, 32@x]: those blocks do not nest, so every plan gathered all
# eight (14 KiB), and the one kept sent 1.34x XLA's bytes. Each holder now sends its expert's
# two halves in two rounds of collective-permute, [2 rounds, 1, 16, 16] (2 KiB)
def test_uneven_blocks_that_do_not_nest_are_permuted_not_gathered():
    specs = {"x": (("y", "x"), None, None), "combine": None, "dispatched": ("y", None, None, "x")}
    specs |= {"wi": (("y", "x"), None, None), "wo": (None, None, None), "out": (None, "y", "x")}
    spmd = check_against_xla(examples.get("moe", specs=specs))
    permuted = {c.shape for c in spmd.collectives if c.kind == "collective-permute"}
    assert (2, 1, 16, 16) in permuted
    assert not [c for c in spmd.collectives if c.wire_bytes >= 14 * 1024]


# A draw that did work twice unless idle devices shared it (269,848 FLOPs against XLA's 75,004
# with share_idle=False): the logits matmul left y idle. The logits' split (rows over x, the
# sequence over y) giving x up to the table's (the contraction over x) is a candidate now: the
# sequence over y and the contraction over x, no work done twice, without sharing
def test_a_matmul_takes_an_axis_from_one_candidate_and_the_rest_from_another():
    specs = {"table": (None, "x"), "ids": ("y", "x"), "logits": ("x", "y", None)}
    spmd = check_against_xla(examples.get("embedding_loss", specs=specs), share_idle=False)
    assert not any("share its work" in n for n in spmd.notes)


def test_merged_splits_give_a_shared_mesh_axis_to_either_side():
    rows, batch = {0: ("x", "y")}, {2: ("y",)}
    # both as they are (sanitize then keeps the first factor's y); the rows giving y up to the
    # batch; the batch giving it up to the rows leaves the rows' split, already a candidate
    assert split_cost.merged([rows, batch]) == [{0: ("x", "y"), 2: ("y",)}, {0: ("x",), 2: ("y",)}]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(annotated())
def test_random_annotations_within_xla_flops_memory_and_bytes(ex):
    check_against_xla(ex)


def test_time_decides_and_memory_only_has_to_fit():
    """Time on the chip decides between plans; memory is a constraint (the plan must fit the
    chip's HBM), not a bound against XLA. TABLE_OVER keeps a plan holding more than XLA's
    compiled program because it is faster on the chip than XLA's, both timed by one model."""
    ex = TABLE_OVER
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    spmd = gv.partition(prop, chip="tpu-v3")
    assert_unpartitioned(spmd, *ex.args)
    chip = chip_cost("tpu-v3")
    theirs = lowered(
        ex.fn, *ex.args, mesh=prop.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    ).compile()
    side = xla_cost.compare(ex.fn, ex.args, spmd)
    xla_time = chip.comm_seconds(parse_hlo(theirs.as_text(), prop.mesh))
    xla_time += side.xla.flops / chip.peak_flops
    assert side.ratio("memory") > 1.0, side.text()  # holds more than XLA's program ...
    assert spmd.cost.time_s < xla_time  # ... for a faster step on the chip
    assert spmd.cost.peak_bytes <= chip.hbm_bytes


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(annotated())
def test_random_annotations_partition_exactly(ex):
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))
    assert_unpartitioned(spmd, *ex.args)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(annotated())
def test_random_annotations_partition_exactly_when_idle_devices_repeat_work(ex):
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)), share_idle=False)
    assert_unpartitioned(spmd, *ex.args)


# --- the record and the chip ----------------------------------------------------------------


def _mlp(chip="tpu-v3"):
    ex = examples.get("mlp")  # x [16/x, 32] @ w1 [32, 64/y] -> relu -> @ w2 [64/y, 32]
    return gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)), chip=chip)


def test_the_record_states_flops_bytes_time_and_memory():
    spmd = _mlp()
    cost = spmd.cost
    # per device: [8, 32] @ [32, 16] (2 FLOPs a multiply-add), relu on [8, 16], [8, 16] @ [16, 32],
    # and the all-reduce summing the [8, 32] partials (one FLOP an element, as XLA counts it)
    assert cost.flops == 2 * 8 * 32 * 16 + 8 * 16 + 2 * 8 * 16 * 32 + 8 * 32
    assert cost.wire_bytes == spmd.wire_bytes == 2 * 3 / 4 * 8 * 32 * 4  # all-reduce over y
    chip = gv.sim.chip("tpu-v3")
    assert cost.compute_s == cost.flops / chip.peak_bf16_flops
    assert cost.comm_s == gv.sim.collective_time("all-reduce", 8 * 32 * 4, 4, chip)
    assert cost.time_s == cost.compute_s + cost.comm_s
    inputs = 4 * (8 * 32 + 32 * 16 + 16 * 32)  # the local shards every device keeps
    assert cost.peak_bytes >= inputs + 4 * 8 * 32  # and the result
    assert "tpu-v3" in str(cost) and "FLOPs" in str(cost)


def test_another_chip_times_the_same_plan_its_own_way():
    v3, v5e = _mlp("tpu-v3").cost, _mlp("tpu-v5e").cost
    assert (v3.flops, v3.wire_bytes) == (v5e.flops, v5e.wire_bytes)
    assert v5e.comm_s == gv.sim.collective_time("all-reduce", 8 * 32 * 4, 4, "tpu-v5e")
    assert _mlp(None).cost.time_s is None  # no chip, no time


def test_unknown_chip_is_explained():
    with pytest.raises(ValueError, match="known chips"):
        _mlp("tpu-v9")


class Arrivals:
    """What split_cost.rank asks of the partitioner: the chip, where each operand arrives."""

    def __init__(self, prop, chip):
        self.prop, self.chip = prop, chip_cost(chip)

    def available(self, v):
        return [self.prop.sharding(v)]


def test_a_split_over_the_chips_hbm_ranks_last():
    ex = examples.get("mlp")
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    dot = next(e for e in prop.program.equations if e.primitive == "dot_general")
    q = Partitioner(prop).split(dot)
    whole, split = {}, q.sanitize(q.settled)  # [16, 32] @ [32, 64] -> [16, 64]: 14 KiB
    assert split_cost.local_bytes(q, whole) == 4 * (16 * 32 + 32 * 64 + 16 * 64)
    tiny = Arrivals(prop, gv.sim.Chip("tiny", 1e12, 4096, 1e9, 1e10, 1e-6))
    promise = split_cost.promised(q, tiny)
    over = [split_cost.rank(q, fa, tiny, 0.0, promise)[0] for fa in (whole, split)]
    assert over == [True, False]  # the split one (8 x 32, 32 x 16, 8 x 16 floats) fits
    assert not split_cost.rank(q, whole, Arrivals(prop, "tpu-v3"), 0.0, promise)[0]


def test_peak_memory_keeps_inputs_and_outputs_and_frees_the_rest():
    assert plan_cost.peak_bytes({"a": 10, "b": 6}, [], ["a"]) == 16


def test_a_reshard_of_two_collectives_holds_the_first_result_while_the_second_runs():
    mesh = gv.Mesh({"x": 2, "y": 4})
    src, dst = gv.Sharding(mesh, ("x", "y")), gv.Sharding(mesh, ("y", None))
    plan = reshard_plan(src, dst, (64, 32), np.float32)
    assert [s.kind for s in plan.steps] == ["all-gather", "all-to-all"]
    gathered = 4 * 64 * 8  # [32, 8] -> all-gather(x) -> [64, 8], then sent in chunks
    ins = Reshard(Value(0, (64, 32), np.dtype("float32"), "a"), "a", "b", plan, None)
    assert staged_bytes.staging_bytes(ins) == gathered + gathered  # the result, its chunks
    assert plan_cost.peak_bytes({"a": 4 * 32 * 8}, [ins], ["b"]) == (
        4 * 32 * 8 + 2 * gathered + 4 * 16 * 32  # the source, both, and the result
    )


def test_elementwise_work_a_slicing_move_reads_is_counted_once():
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a):
        a = gv.mesh_split(a, mesh, ("x", None))
        y = a * a * 2.0 + 1.0  # 3 FLOPs an element
        return y.sum(axis=1), gv.mesh_split(y, mesh, (None, "x"))  # summed, and moved

    x = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    (move,) = [ins for ins in spmd.instructions if isinstance(ins, Reshard)]
    assert [s.kind for s in move.plan.steps] == ["all-to-all"]
    local = 8 * 32  # [16@x, 32]: the chain and the sum; the all-to-all's halves only slice it
    assert spmd.cost.flops == 3 * local + local
    measured = xla_cost.ours(spmd, (x,)).flops  # XLA's count: a row of 32 sums in 31 adds,
    assert measured == 3 * local + 8 * 31 + place_flops(mesh, "x")  # and the pair's place
    assert abs(spmd.cost.flops - measured) <= 0.01 * measured


@pytest.mark.parametrize("axes, peers", [("y", 4), (("x", "y"), 8)])
def test_elementwise_work_an_all_to_all_reads_alone_is_counted_once(axes, peers):
    """XLA:CPU sends an all-to-all's chunks from one slice each and fuses the ops that made
    the operand into every slice; each slice computes its own elements, so a * a + a (2 FLOPs
    an element) is computed once over the peers, though the fused program's cost analysis
    charges every slice for the whole operand. (Over a pair, the all-to-all is a swap: below.)"""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a):
        a = gv.mesh_split(a, mesh, (axes, None))
        return gv.mesh_split(a * a + a, mesh, (None, axes))

    x = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    (move,) = [ins for ins in spmd.instructions if isinstance(ins, Reshard)]
    assert [s.kind for s in move.plan.steps] == ["all-to-all"]
    local = 16 * 32 // peers
    assert spmd.cost.flops == 2 * local == xla_cost.ours(spmd, (x,)).flops
    assert xla_cost.flops(spmd.compiled(x)) == 2 * local * peers  # fused: each slice charged


def test_an_all_to_all_over_a_pair_swaps_the_half_that_moves():
    """Over two devices an all-to-all is one exchange: each keeps its own half and sends the
    other by collective-permute, the same bytes. XLA:CPU's all-to-all copies both halves out
    and both in; the swap holds less, and its work is the pair's place alone."""
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a):  # [16@x, 32] -> a * a + a -> [16, 32@x]
        a = gv.mesh_split(a, mesh, ("x", None))
        return gv.mesh_split(a * a + a, mesh, (None, "x"))

    x = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
    prop = gv.propagate(gv.trace(f, x))
    spmd = gv.partition(prop)
    assert_unpartitioned(spmd, x)
    assert [(c.kind, c.axes, c.wire_bytes) for c in spmd.collectives] == [
        ("all-to-all", ("x",), 4 * 8 * 16)  # the half [8, 16] that moves
    ]
    swapped = spmd.compiled(x)
    assert "collective-permute(" in swapped.as_text() and "all-to-all(" not in swapped.as_text()
    local = 8 * 32
    assert xla_cost.ours(spmd, (x,)).flops == 2 * local + place_flops(mesh, "x")

    def by_xlas_all_to_all():
        theirs = gv.partition(prop)
        assert_unpartitioned(theirs, x)
        return theirs.compiled(x)

    by_xla = _with_swap(_xla_all_to_all, by_xlas_all_to_all)
    assert "all-to-all(" in by_xla.as_text()
    held = [c.memory_analysis().temp_size_in_bytes for c in (swapped, by_xla)]
    # temporaries: the [8, 16] half received and the partition id. a * a + a is computed into
    # the half sent, which XLA places in the result's buffer, and again into the result
    assert held[0] == 4 * 8 * 16 + 4 < held[1]


_PAIR = gv.Mesh({"x": 2, "y": 4})


def _moved(x, before, after, op):
    def f(a):
        return gv.mesh_split(op(gv.mesh_split(a, _PAIR, before)), _PAIR, after)

    return f, x


def _moved_in_a_loop(x):
    def f(a):
        def body(i, c):  # [8@x, 8] -> * 1.5 -> [8, 8@x] -> transposed: rows over x again
            c = gv.mesh_split(c, _PAIR, ("x", None))
            return gv.mesh_split(c * 1.5, _PAIR, (None, "x")).T

        return jax.lax.fori_loop(0, 3, body, a)

    return f, x


_RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    "f, x",
    [
        _moved(_RNG.normal(size=(6, 10)) > 0, ("x", None), (None, "x"), lambda a: a & True),
        _moved(_RNG.normal(size=(7, 5)).astype(np.float32), ("x", None), (None, "x"), jnp.sin),
        _moved(_RNG.normal(size=(1, 4, 6)), (None, "x", None), (None, None, "x"), jnp.cos),
        _moved(_RNG.integers(0, 9, (4, 6, 8)), ("y", "x", None), ("y", None, "x"), lambda a: a * 3),
        _moved_in_a_loop(_RNG.normal(size=(8, 8)).astype(np.float32)),
    ],
    ids=["bools", "uneven", "size-1 dim", "ints beside y", "in a loop"],
)
def test_a_pair_swap_is_exact_on_what_users_write(f, x):
    spmd = gv.partition(gv.propagate(gv.trace(f, x)))
    assert [(c.kind, c.group_size) for c in spmd.collectives] == [("all-to-all", 2)]
    assert_unpartitioned(spmd, x, exact=True)


def _xla_all_to_all(axes, x, split: int, concat: int):
    return jax.lax.all_to_all(x, axes, split, concat, tiled=True)


def _with_swap(swap, run):
    """run() with a pair's all-to-all lowered by `swap` instead of reshard_kernels._swap_halves (a
    program is lowered when first run or compiled: run() must do both)."""
    ours, reshard_kernels._swap_halves = reshard_kernels._swap_halves, swap
    try:
        return run()
    finally:
        reshard_kernels._swap_halves = ours


def test_a_reshard_result_is_not_held_before_its_last_collective_runs():
    mesh = gv.Mesh({"x": 2, "y": 4})
    src, dst = gv.Sharding(mesh, (("x", "y"), None)), gv.Sharding(mesh, (None, "y"))
    plan = reshard_plan(src, dst, (64, 32), np.float32)
    assert [s.kind for s in plan.steps if s.collective] == ["all-to-all", "all-gather"]
    source = moved = chunks = 4 * 8 * 32  # [8, 32] local, as each step leaves it
    result = 4 * 64 * 8  # [64, 32@y]
    ins = Reshard(Value(0, (64, 32), np.dtype("float32"), "a"), "a", "b", plan, None)
    # the all-to-all holds the source, its chunks and the moved piece; the gather then holds
    # the source, the moved piece and the result: the larger of the two
    peak = max(source + chunks + moved, source + moved + result)
    assert plan_cost.peak_bytes({"a": source}, [ins], ["b"]) == peak


_MESH_X2 = gv.Mesh({"x": 2})
SPLIT, WHOLE = gv.Sharding(_MESH_X2, ("x",)), gv.Sharding(_MESH_X2, (None,))  # f32[64] on x=2
F32 = np.dtype("float32")


def _move(src: str, dst: str, before, after) -> Reshard:
    """Reshard buffer src (an f32[64]) from sharding `before` to `after` into buffer dst."""
    plan = reshard_plan(before, after, (64,), F32)
    return Reshard(Value(0, (64,), F32, src), src, dst, plan, None)


def test_a_reshard_of_an_input_is_issued_first_and_held_from_the_start():
    made = Const("c", Literal(np.zeros(64, F32), (64,), F32))  # 256 B, made mid-program
    instructions = [made, _move("c", "d", WHOLE, SPLIT), _move("a", "b", SPLIT, WHOLE)]
    a, b, c, d = 4 * 32, 4 * 64, 4 * 64, 4 * 32
    # in program order the gathered b would come after c died (a + c + d at most); issued
    # first, as XLA:CPU schedules a collective of an input, b is live while c and d are made
    assert plan_cost.peak_bytes({"a": a}, instructions, ["b", "d"]) == a + b + c + d


def test_a_reshard_of_a_loop_result_runs_after_the_loop():
    temp = Const("c", Literal(np.zeros(256, F32), (256,), F32))  # 1 KiB, the body's peak
    body = (temp, _move("p", "q", SPLIT, WHOLE))
    loop = RunLoop(None, ("a",), (), ("p",), (), body, ("q",), (), ("h",), (), (WHOLE,))
    a, h, g, c = 4 * 32, 4 * 64, 4 * 32, 4 * 256
    # the loop's result h is made by the loop, so its slice g runs after it: the body's 1 KiB
    # sits beside a alone (g held from the start would add 128 B to it)
    peak = plan_cost.peak_bytes({"a": a}, [loop, _move("h", "g", WHOLE, SPLIT)], ["g"])
    assert peak == max(a + c, a + h + g)


def test_an_annotation_holds_no_buffer_of_its_own():
    mesh = gv.Mesh({"x": 2, "y": 4})

    def f(a):
        return jnp.tanh(gv.mesh_split(a, mesh, ("x", None)))

    spmd = gv.partition(gv.propagate(gv.trace(f, jax.ShapeDtypeStruct((16, 32), jnp.float32))))
    local = 4 * 8 * 32  # [16/x, 32]: the input, and tanh's result; the constraint hands a on
    assert spmd.cost.peak_bytes == 2 * local


def _collective(kind, shape, dims):
    return Collective(kind, ("x",), shape, np.dtype("float32"), 2, dims=dims)


@pytest.mark.parametrize(
    "kind, shape, dims, staged",
    [
        ("all-gather", (8, 16), (0,), 0),  # rows: each device's piece is already contiguous
        ("all-gather", (1, 8, 16), (1,), 0),  # size-1 dims ahead of it change nothing
        ("all-gather", (8, 16), (1,), 2 * 4 * 8 * 16),  # columns: gathered whole, then moved
        ("reduce-scatter", (8, 16), (1,), 4 * 8 * 16),
        ("all-to-all", (8, 16), (0, 1), 4 * 8 * 16),  # sent as chunks, received as chunks
        ("collective-permute", (2, 16), (), 4 * 2 * 16),  # a halo's edge rows, copied out
        ("all-reduce", (8, 16), (), 0),
    ],
)
def test_a_collective_that_moves_pieces_stages_a_copy(kind, shape, dims, staged):
    ins = SimpleNamespace(collectives=[_collective(kind, shape, dims)], dst=None)  # writes nothing
    assert staged_bytes.staging_bytes(ins) == staged
    # while it runs, its copy sits beside the live inputs (10 + 6 bytes)
    assert plan_cost.peak_bytes({"a": 10, "b": 6}, [ins], ["a"]) == 16 + staged
