"""The collective ledger: rows replay spmd.collectives, times come from gspmd_viz.sim, the
graph puts each collective on its edge, and bad input shows an inline message."""

import jax
import jax.numpy as jnp
import pytest

import gspmd_viz as gv
from gspmd_viz.sim import collective_time
from gspmd_viz.viz import ledger

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
    assert ledger.seconds(c, "tpu-v4") == collective_time("all-gather", 2 * 4 * 8 * 4, 2, "tpu-v4")


def test_text_lists_bytes_time_and_totals(spmd):
    text = ledger.ledger_text(spmd, "tpu-v4")
    line = text.splitlines()[1]
    assert line.startswith("all-reduce(y)") and "f32[8, 32]" in line and "1.5 KiB" in line
    assert text.splitlines()[-1].startswith("total: 1 collectives")


def test_device_view_shows_local_shapes_and_slices(spmd):
    text = ledger.device_text(spmd, 5)
    assert text.splitlines()[0] == "device 5 (x=1, y=1)"
    assert "b: f32[32, 64@y]  local [32, 16]  holds [0:32, 16:32]" in text


def test_graph_labels_the_edge_that_communicates(spmd):
    source = ledger.ledger_graph(spmd).source
    assert 'e5 -> e6 [label="all-reduce(y) 1.5 KiB"]' in source


def test_widget_redraws_and_explains_bad_input(spmd):
    w = ledger.LedgerWidget(spmd)
    w.chip.value = "tpu-v5e"
    assert "tpu-v5e" in w.out.value and "all-reduce(y)" in w.out.value
    w.device.value = 7
    assert "device 7 (x=1, y=3)" in w.out.value
    bad = ledger.LedgerWidget(42)
    assert "gv.partition" in bad.out.value and "color:#b00020" in bad.out.value
    assert "no example" in ledger.LedgerWidget("not-in-the-zoo").out.value
