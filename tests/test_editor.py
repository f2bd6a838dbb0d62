"""Sharding editor: driven by setting widget values, checked against Sharding itself."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from strategies import sharded_shapes

import gspmd_viz as gv
from gspmd_viz.viz.editor import ShardingEditor, axis_options
from gspmd_viz.viz.notation import parse_mesh, parse_shape


def _mesh_text(mesh: gv.Mesh) -> str:
    return ", ".join(f"{a}={n}" for a, n in mesh.shape.items())


def test_default_editor_shows_the_sharding_in_every_notation():
    e = ShardingEditor(mesh="x=2, y=4", shape="7, 6", spec=("x",))
    s = gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x",))
    assert e.sharding == s and e.error == ""
    n = e.notations()
    assert n["type"] == "f32[7@x, 6]"
    assert n["PartitionSpec"] == "P('x', None)"
    assert n["dims_mapping"].startswith("[0, -1]")
    assert n["HloSharding"] == s.to_hlo(2)
    assert s.to_hlo(2) in e.notation.value  # shown, not only computed
    assert e.figure.layout.title.text.startswith("f32[7@x, 6] on Mesh(x=2, y=4)")
    (shown,) = e.plot.outputs  # what the notebook's Output widget will draw
    plotted = shown["data"]["application/vnd.plotly.v1+json"]
    assert plotted["layout"]["title"]["text"] == e.figure.layout.title.text


def test_changing_a_dropdown_redraws_the_layout():
    e = ShardingEditor(mesh="x=2, y=4", shape="8, 6", spec=("x",))
    before = e.figure
    e.dims[1].value = "y"
    assert e.sharding == gv.Sharding(e.mesh, ("x", "y"))
    assert e.figure is not before and "8@x, 6@y" in e.figure.layout.title.text
    e.dims[1].value = ("y", "x")  # several axes on one dim, major first
    assert e.error == "mesh axis 'x' is used twice in Sharding(Mesh(x=2, y=4), ('x', ('y', 'x')))"
    assert "used twice" in e.message.value and e.sharding == gv.Sharding(e.mesh, ("x", "y"))
    e.dims[0].value = None  # fixing the conflict clears the message
    assert e.error == "" and e.message.value == ""
    assert e.notations()["dims_mapping"].startswith("not expressible: tensor dim 1 is split")


@settings(max_examples=15)
@given(sharded_shapes(max_devices=64, max_rank=4, max_side=9))
def test_any_sharding_set_through_the_widgets_round_trips(case):
    sharding, shape = case
    e = ShardingEditor(mesh=_mesh_text(sharding.mesh), shape=", ".join(map(str, shape)), spec=())
    e.set_spec(sharding.spec)
    if any(len(axes) > 3 for axes in sharding.spec):
        assert "not a choice" in e.error  # the dropdown offers up to three axes per dim
        return
    assert e.error == "" and e.sharding == sharding
    assert e.notations()["HloSharding"] == sharding.to_hlo(len(shape))
    e.set_spec(())
    e.hlo_text.value = sharding.to_hlo(len(shape))  # pasting the text restores the layout
    assert e.error == ""
    assert gv.Sharding.from_hlo(sharding.mesh, e.notations()["HloSharding"]) == e.sharding


def test_pasted_iota_hlo_is_shown():
    e = ShardingEditor(mesh="x=2, y=2, z=2", shape="8, 4")
    e.hlo_text.value = "{devices=[4,2]<=[2,2,2]T(1,0,2)}"
    assert e.sharding == gv.Sharding(e.mesh, (("y", "x"), "z"))
    assert "read {devices=[4,2]&lt;=[2,2,2]T(1,0,2)} as P(('y', 'x'), 'z')" in e.message.value


@pytest.mark.parametrize(
    ("widget", "text", "words"),
    [
        ("mesh_text", "x=2, y=0", "positive size"),
        ("mesh_text", "x=2, x=4", "named twice"),
        ("mesh_text", "__import__('os').system('touch /tmp/gv_pwned')", "cannot read mesh axis"),
        ("mesh_text", "", "at least one axis"),
        ("shape_text", "7, six", "cannot read the shape"),
        ("shape_text", "1, 2, 3, 4, 5", "ranks 1 to 4"),
        ("shape_text", "0, 3", "positive sizes"),
        ("hlo_text", "{devices=[2,2]0,1,2}", "lists 3 devices"),
        ("hlo_text", "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "rank 3 but the shape"),
        ("hlo_text", "{devices=[2,4]<=[4,2]T(1,0)}", "not expressible"),
        ("hlo_text", "devices=[8]<=[8]", "cannot read HloSharding"),
    ],
)
def test_bad_input_is_an_inline_message_and_the_widget_keeps_working(widget, text, words):
    e = ShardingEditor(mesh="x=2, y=4", shape="8, 6", spec=("x",))
    getattr(e, widget).value = text
    assert words in e.error and "gv-error" in e.message.value
    assert e.sharding == gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x",))  # last good state kept
    e.mesh_text.value, e.shape_text.value = "x=2, y=4", "8, 6"
    e.dims[0].value = "y"
    assert e.error == "" and e.sharding == gv.Sharding(e.mesh, ("y",))


def test_axis_options_list_ordered_axis_tuples():
    values = [v for _, v in axis_options(("x", "y"))]
    assert values == [None, "x", "y", ("x", "y"), ("y", "x")]
    assert len(axis_options(("a", "b", "c", "d"))) == 1 + 4 + 12 + 24


def test_parsers():
    assert parse_mesh("x=2, y=4") == gv.Mesh({"x": 2, "y": 4})
    assert parse_mesh("{data: 4 model: 2}") == gv.Mesh({"data": 4, "model": 2})
    assert parse_shape("(7, 6)") == (7, 6) and parse_shape("5,") == (5,)


PROBE = """
import json
shards = {s.device.id: [[i.start or 0, i.stop] for i in s.index] for s in x.addressable_shards}
print(json.dumps(shards))
"""


def test_the_jax_code_builds_the_same_layout_padding_uneven_dims():
    e = ShardingEditor(mesh="x=2, y=2, z=2", shape="3, 7, 4", spec=(None, ("z", "x"), "y"))
    code = e.notations()["jax"]
    assert "pad (3, 7, 4) to (3, 8, 4)" in code
    out = subprocess.run(
        [sys.executable, "-c", code + PROBE], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout.splitlines()[-1])
    for device, slices in e.sharding.device_slices((3, 7, 4)).items():
        clipped = [
            [min(a, n), min(n if b is None else b, n)]
            for (a, b), n in zip(theirs[str(device)], (3, 7, 4), strict=True)
        ]
        assert clipped == [[s.start, s.stop] for s in slices], device
