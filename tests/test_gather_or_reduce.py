"""A weight split over two mesh axes (FSDP over "data" + tensor parallel over "model") meeting
activations whose batch is split over "data": the partitioner weighs gathering the weight over
"data" against moving the activations to the contraction's split and reducing the partial
product (core/choice/gather_or_reduce.py). Checked against the unpartitioned program, XLA's
compiled program's bytes, and the closed-form ring bytes of both plans computed from shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.core.choice.gather_or_reduce import PLANS
from gspmd_viz.viz.ledger import widget as ledger
from gspmd_viz.viz.ledger.choices import choices_text
from tests.test_partition import assert_unpartitioned

MESH = gv.Mesh({"data": 4, "model": 2})
E, H = 256, 512  # embed (contracted), hidden


def fsdp_dot(x, w):  # x[B@data, E] @ w[E@data, H@model] -> [B@data, H@model]
    x = gv.mesh_split(x, MESH, ("data", None))
    return x @ gv.mesh_split(w, MESH, ("data", "model"))


def closed_form(batch: int, mesh=MESH, e: int = E, h: int = H) -> dict[str, float]:
    """Per-device ring bytes of each plan (f32): the gather all-gathers w's [E/n, H/m] shards
    over data ((n-1)/n of its [E, H/m] result); the reduce all-to-alls x [B/n, E] -> [B, E/n]
    and reduce-scatters the [B, H/m] partial product over data ((n-1)/n of each operand)."""
    n, m = mesh.shape["data"], mesh.shape["model"]
    share = (n - 1) / n * 4
    return {"gather": share * e * h / m, "reduce": share * (batch / n * e + batch * h / m)}


def _args(batch: int):
    x = jax.random.normal(jax.random.key(0), (batch, E), jnp.float32)
    w = jax.random.normal(jax.random.key(1), (E, H), jnp.float32) / 16
    return x, w


@pytest.mark.parametrize("batch", [4, 256])  # decode-size: reduce wins; training-size: gather
@pytest.mark.parametrize("chip", [None, "tpu-v3"])
def test_the_cheaper_plan_by_closed_form_is_kept(batch, chip):
    args = _args(batch)
    spmd = gv.partition(gv.propagate(gv.trace(fsdp_dot, *args)), chip=chip)
    assert_unpartitioned(spmd, *args)
    want = closed_form(batch)
    cheaper = min(want, key=want.get)
    assert (cheaper == "reduce") == (batch == 4)  # the sizes straddle the crossover
    (choice,) = spmd.choices
    assert choice.kept == cheaper and choice.axis == "data"
    for name in PLANS:  # the cost model charges each plan its closed-form bytes
        assert getattr(choice, name).wire_bytes == pytest.approx(want[name])
    assert spmd.wire_bytes == pytest.approx(want[cheaper])
    theirs = gv.xla.collectives(fsdp_dot, *args, mesh=MESH)
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_the_reduce_plan_moves_the_activations_and_reduce_scatters():
    spmd = gv.partition(gv.propagate(gv.trace(fsdp_dot, *_args(4))))
    assert [(c.kind, c.axes) for c in spmd.collectives] == [
        ("all-to-all", ("data",)),
        ("reduce-scatter", ("data",)),
    ]
    (choice,) = spmd.choices
    assert choice.why == "fewer bytes on the wire"
    assert choice.gathered.endswith("f32[256@data, 512@model]")  # as they arrive at the dot
    assert choice.moved.endswith("f32[4@data, 256]")


def test_the_ledger_shows_both_costs_and_what_was_kept():
    spmd = gv.partition(gv.propagate(gv.trace(fsdp_dot, *_args(4))))
    text = choices_text(spmd)
    want = closed_form(4)
    gather_line, reduce_line = text.splitlines()[1:3]
    dot = next(e for e in spmd.program.equations if e.primitive == "dot_general")
    assert gather_line.split()[:2] == ["gather", dot.inputs[1].name]  # the weight, as read
    assert gv.units.format_bytes(want["gather"]) in gather_line
    assert gv.units.format_bytes(want["reduce"]) in reduce_line
    assert text.splitlines()[-1].strip() == "kept reduce: fewer bytes on the wire"
    page = ledger.ledger_html(spmd)
    assert "Gather or reduce" in page and "kept reduce" in page


def test_no_conflict_no_choice():
    def rows_only(x, w):  # the weight's split is over "model" only: nothing to weigh
        return gv.mesh_split(x, MESH, ("data", None)) @ gv.mesh_split(w, MESH, (None, "model"))

    spmd = gv.partition(gv.propagate(gv.trace(rows_only, *_args(8))))
    assert spmd.choices == () and choices_text(spmd) == ""
    assert "Gather or reduce" not in ledger.ledger_html(spmd)


def test_weight_first_reads_in_program_order():
    def weight_first(w, x):  # w.T[H@model, E@data] . x.T[E, B@data] -> [H@model, B@data]
        x = gv.mesh_split(x, MESH, ("data", None))
        return gv.mesh_split(w, MESH, ("data", "model")).T @ x.T

    x, w = _args(4)
    spmd = gv.partition(gv.propagate(gv.trace(weight_first, w, x)))
    assert_unpartitioned(spmd, w, x)
    (choice,) = spmd.choices
    assert choice.kept == "reduce"
    dot = next(e for e in spmd.program.equations if e.primitive == "dot_general")
    head = choice.text().splitlines()[0]
    assert head.index(f" {dot.inputs[0].name} ") < head.index(f" {dot.inputs[1].name} ")
    assert choice.gathered.startswith(f"{dot.inputs[0].name} ")
    assert np.isclose(spmd.wire_bytes, choice.reduce.wire_bytes)


@settings(max_examples=12, deadline=None)
@given(
    data=st.sampled_from([2, 4]),
    model=st.sampled_from([1, 2]),
    rows=st.integers(1, 16),
    e=st.integers(1, 8),
    h=st.integers(1, 8),
)
def test_random_sizes_keep_the_cheaper_plan(data, model, rows, e, h):
    """Batch vs embed vs hidden on random meshes: exact, no more bytes than XLA's compiled
    program, and never more than the cheaper plan's closed form (a cheaper split still, where
    one exists, is kept instead: 'another split')."""
    mesh = gv.Mesh({"data": data, "model": model})
    batch, e, h = rows * data, e * 8 * data, h * 8 * model  # even splits: the closed form holds

    def dot(x, w):
        x = gv.mesh_split(x, mesh, ("data", None))
        return x @ gv.mesh_split(w, mesh, ("data", "model"))

    x = jax.random.normal(jax.random.key(rows), (batch, e), jnp.float32)
    w = jax.random.normal(jax.random.key(e + h), (e, h), jnp.float32) / 8
    spmd = gv.partition(gv.propagate(gv.trace(dot, x, w)))
    assert_unpartitioned(spmd, x, w)
    want = closed_form(batch, mesh, e, h)
    (choice,) = spmd.choices
    for name in PLANS:
        assert getattr(choice, name).wire_bytes == pytest.approx(want[name])
    if choice.kept in PLANS:
        assert want[choice.kept] == min(want.values())
    assert spmd.wire_bytes <= min(want.values()) + 1e-6
    theirs = gv.xla.collectives(dot, x, w, mesh=mesh)
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs) + 1e-6


def test_explain_finds_the_gathered_weight_and_the_annotation_that_fixes_it():
    """gv.explain reads the same record: at a decode batch XLA gathers the weight; the finding
    names the reduce plan, and annotating x as it says makes XLA's own program move fewer
    bytes. At a training batch XLA's plan is the cheaper one: no finding."""
    args = _args(4)
    report = gv.explain(fsdp_dot, *args, mesh=MESH)
    (found,) = report.findings_of("gather or reduce")
    assert "f32[4, 256@data]" in found.message and found.bytes == report.xla_bytes

    def annotated(x, w):  # x moved to w's split of the contraction, as the finding says
        x = gv.mesh_split(gv.mesh_split(x, MESH, ("data", None)), MESH, (None, "data"))
        return x @ gv.mesh_split(w, MESH, ("data", "model"))

    fixed = gv.explain(annotated, *args, mesh=MESH)
    assert fixed.xla_bytes < report.xla_bytes / 10
    assert gv.explain(fsdp_dot, *_args(256), mesh=MESH).findings_of("gather or reduce") == []


def test_the_ledger_widget_shows_the_choice_on_every_chip_and_after_bad_input():
    spmd = gv.partition(gv.propagate(gv.trace(fsdp_dot, *_args(4))))
    widget = ledger.LedgerWidget(spmd, device=0)
    for chip in widget.chip.options:
        widget.chip.value = chip
        assert "Gather or reduce" in widget.out.value and "kept reduce" in widget.out.value
    for device in ("0", str(MESH.size - 1)):
        widget.device.value = device
        assert "kept reduce" in widget.out.value
    widget.device.value = "eight"
    assert "is not a number" in widget.message.value and "kept reduce" in widget.out.value
