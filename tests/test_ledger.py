"""The collective ledger: rows replay spmd.collectives, times come from gspmd_viz.sim (the mesh
placed on a TPU slice; on 2x4 the y axis is one 4-chip ring, so the ring formula is an oracle), the
graph puts each collective on its edge, and bad input shows an inline message."""

import re

import jax
import jax.numpy as jnp
import pytest

import gspmd_viz as gv
from gspmd_viz.sim import CHIPS, collective_time
from gspmd_viz.sim import placement as pl
from gspmd_viz.units import format_time
from gspmd_viz.viz.ledger import widget as ledger
from gspmd_viz.viz.ledger.plan_cost import plan_text
from gspmd_viz.xla import cost as xla_cost
from gspmd_viz.zoo import examples

MESH = gv.Mesh({"x": 2, "y": 4})


def mlp(x, w1, w2):
    x = gv.mesh_split(x, MESH, ("x", None))
    h = jax.nn.relu(x @ gv.mesh_split(w1, MESH, (None, "y")))
    return gv.mesh_split(h @ gv.mesh_split(w2, MESH, ("y", None)), MESH, ("x", None))


@pytest.fixture(scope="module")
def spmd():
    args = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
    return gv.partition(gv.propagate(gv.trace(mlp, *args)))


def test_rows_replay_the_partitioners_collectives(spmd):
    (row,) = ledger.rows(spmd, "tpu-v3")
    c = row["collective"]
    assert c == spmd.collectives[0] and row["edge"] == (5, 6)  # dot_general -> constraint
    assert row["time"] == collective_time("all-reduce", 8 * 32 * 4, 4, "tpu-v3")


def test_all_gather_time_uses_the_gathered_size():
    c = gv.Collective("all-gather", ("x",), (4, 8), "float32", 2)
    topo, where = ledger.on_slice(MESH)
    want = collective_time("all-gather", 2 * 4 * 8 * 4, 2, "tpu-v4")  # x: 2 neighbours
    assert ledger.seconds(c, "tpu-v4", topo, where) == pytest.approx(want, rel=1e-12)


def test_the_mesh_is_placed_on_a_named_slice_and_timed_on_its_chips():
    """8 devices: the 2x4 slice; y gets its wrapped dim of 4 (a ring, as the closed form of one
    ring), x its 2 rows. A mesh x=8 gets both dims: the 2-D torus algorithm, not one ring."""
    topo, where = ledger.on_slice(MESH)
    assert topo == gv.sim.preset("2x4") and where == {"x": ((0, 2),), "y": ((1, 4),)}
    c = gv.Collective("all-reduce", ("x",), (1024,), "float32", 8)
    flat = gv.Mesh({"x": 8})
    flat_topo, flat_where = ledger.on_slice(flat)
    sub = pl.sub_torus(flat_where, ("x",), flat_topo)
    assert sub.shape == (2, 4)
    got = ledger.seconds(c, "tpu-v3", flat_topo, flat_where)
    assert got == pytest.approx(gv.sim.simulate(sub, "all-reduce", 4096).time_s, rel=1e-9)
    assert got != pytest.approx(collective_time("all-reduce", 4096, 8, "tpu-v3"))  # not a ring
    assert ledger.on_slice(gv.Mesh({"x": 3}))[0].shape == (3,)  # no preset: one ring


def test_text_lists_bytes_time_and_totals(spmd):
    text = ledger.ledger_text(spmd, "tpu-v4")
    assert text.splitlines()[0] == "times on slice 2x4: x -> dim0:2, y -> dim1:4 (torus)"
    line = text.splitlines()[2]
    assert line.startswith("all-reduce(y)") and "f32[8, 32]" in line and "1.5 KiB" in line
    assert text.splitlines()[-1].startswith("total: 1 collectives")


def test_device_view_shows_local_shapes_and_slices(spmd):
    text = ledger.device_text(spmd, 5)
    assert text.splitlines()[0] == "device 5 (x=1, y=1)"
    assert "b: f32[32, 64@y]  local [32, 16]  holds [0:32, 16:32]" in text


def test_graph_labels_the_edge_that_communicates(spmd):
    source = ledger.ledger_graph(spmd, "tpu-v3").source
    t = format_time(collective_time("all-reduce", 8 * 32 * 4, 4, "tpu-v3"))
    assert f'e5 -> e6 [label="all-reduce(y) 1.5 KiB, {t}"]' in source
    assert "decorate=true" in source  # the label is tied to its edge


def test_graph_is_drawn_at_its_natural_size(spmd):
    html = ledger.ledger_html(spmd)
    assert re.search(r'<svg width="\d+pt" height="\d+pt"', html)  # graphviz's own size, 100%
    assert 'width="100%"' not in html and "42%" not in html


def test_matmul_flops_match_the_unpartitioned_count(spmd):
    """Both matmuls are split over all 8 devices (x on the batch, y on the hidden dim), so a
    device does exactly 1/8 of the global 2*B*D*H FLOPs of each."""
    assert ledger.matmul_flops(spmd) == 2 * (2 * 16 * 32 * 64) / 8


def test_chip_changes_compute_and_communication_time(spmd):
    for chip in CHIPS:
        compute, comm = ledger.step_times(spmd, chip)
        assert compute == ledger.matmul_flops(spmd) / CHIPS[chip].peak_bf16_flops
        assert comm == collective_time("all-reduce", 8 * 32 * 4, 4, chip)
    assert len({ledger.step_times(spmd, c) for c in CHIPS}) == len(CHIPS)


def test_widget_every_control_every_option_and_bad_text(spmd):
    """Kernel side: every chip, every device id (both ends), bad device text: an inline
    message, the stale figure greyed, and the next good value brings it back."""
    w = ledger.LedgerWidget(spmd)
    drawn = set()
    for chip in w.chip.options:
        w.chip.value = chip
        assert f"{chip}: compute" in w.out.value and "gv-ok" in w.message.value
        drawn.add(ledger.times_text(spmd, chip))
    assert len(drawn) == len(CHIPS)  # the TPU control changes what is drawn
    for device in range(spmd.mesh.size):
        w.device.value = str(device)
        coords = ", ".join(f"{a}={i}" for a, i in spmd.mesh.coords(device).items())
        assert f"device {device} ({coords})" in w.out.value
    for bad, words in (("99", "device 99 is out of range"), ("-1", "out of range"),
                       ("abc", "is not a number"), ("", "is not a number")):  # fmt: skip
        w.device.value = bad
        assert words in w.message.value and "gv-stale" in w.out.value
        assert "device 7" in w.out.value  # the last good figure, greyed
        w.device.value = "7"
        assert "gv-stale" not in w.out.value and "gv-ok" in w.message.value
    assert w.static_figure() == w.out.value


def test_widget_explains_a_bad_program():
    bad = ledger.LedgerWidget(42)
    assert "gv.partition" in bad.message.value and "color:#b00020" in bad.message.value
    assert "no example" in ledger.LedgerWidget("not-in-the-zoo").message.value


def test_an_exception_while_drawing_is_shown_inline(spmd, monkeypatch):
    w = ledger.LedgerWidget(spmd)
    monkeypatch.setattr(ledger, "ledger_html", lambda *a: 1 / 0)
    w.chip.value = "tpu-v4"
    assert "division by zero" in w.message.value and "gv-stale" in w.out.value
    monkeypatch.undo()
    w.chip.value = "tpu-v5e"
    assert "gv-stale" not in w.out.value and "tpu-v5e: compute" in w.out.value


def test_halos_rolls_and_gathered_dims_are_in_the_ledger():
    """Every collective the program runs is a row (halo exchanges and block moves included, so
    the rows add up to the total), and the partitioner's notes close the table."""
    mesh = gv.Mesh({"x": 4})

    def f(x, w):
        x = gv.mesh_split(x, mesh, (None, None, "x"))
        y = jax.lax.conv_general_dilated(x, w, (1,), "SAME")  # 3-wide: a halo
        z = jax.lax.conv_general_dilated(y, w[:, :, :1].repeat(7, 2), (1,), "SAME")  # too wide
        return jnp.roll(y, 2, axis=2) + jax.lax.bessel_i0e(z)  # no rule: replicated, noted

    x, w = jnp.ones((1, 2, 8)), jnp.ones((2, 2, 3))
    spmd = gv.partition(gv.propagate(gv.trace(f, x, w)))
    table = ledger.rows(spmd, "tpu-v3")
    assert [r["collective"] for r in table] == spmd.collectives
    kinds = {r["collective"].kind for r in table}
    assert "collective-permute" in kinds
    text = ledger.ledger_text(spmd)
    notes = [line for line in text.splitlines() if line.startswith("note: ")]
    assert notes and all(n[len("note: ") :] in spmd.notes for n in notes)
    assert any("no factor rule for 'bessel_i0e'" in n for n in notes)
    assert f"total: {len(spmd.collectives)} collectives" in text


def test_the_plans_cost_is_timed_on_the_chosen_chip(spmd):
    for chip in ("tpu-v3", "tpu-v5p"):
        text = plan_text(spmd, chip)
        # per device: [8, 32] @ [32, 16], relu on [8, 16], [8, 16] @ [16, 32]; an all-reduce
        # summing the [8, 32] partials (one FLOP an element)
        flops = 2 * 8 * 32 * 16 + 8 * 16 + 2 * 8 * 16 * 32 + 8 * 32
        comm = collective_time("all-reduce", 8 * 32 * 4, 4, chip)
        t = flops / CHIPS[chip].peak_bf16_flops + comm
        assert f"our plan on {chip}" in text and f"{flops:,.0f} FLOPs" in text
        assert format_time(t) in text and "1.5 KiB on the wire" in text


def test_a_zoo_ledger_shows_xlas_compiled_figures_beside_ours():
    w = ledger.LedgerWidget("mlp")
    ex = examples.get("mlp")
    side = xla_cost.compare(ex.fn, ex.args, w.spmd)  # the oracle: both compiled programs
    assert w.xla == side
    assert side.text() in w.figure and f"FLOPs {side.ratio('flops'):.2f}x" in w.figure
    w.chip.value = "tpu-v4"
    assert "our plan on tpu-v4" in w.figure and "ours / XLA&#x27;s" in w.figure
