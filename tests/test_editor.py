"""Sharding editor: driven by setting widget values, checked against Sharding itself."""

import html
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from strategies import sharded_shapes

import gspmd_viz as gv
from gspmd_viz.core.sharding.sharding import short_dtype
from gspmd_viz.viz.arrays import editor as editor_module
from gspmd_viz.viz.arrays.editor import DTYPES, ShardingEditor, axis_options
from gspmd_viz.viz.arrays.notation import parse_mesh, parse_tensor_shape


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
    plotted = e.plot.figure  # what the front end will draw
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
    assert parse_tensor_shape("(7, 6)") == (7, 6) and parse_tensor_shape("5,") == (5,)


def _consistent(e: ShardingEditor) -> None:
    """Controls and display agree: every view shows the sharding the controls select."""
    spec = tuple(dd.value for dd in e.dims)
    assert e.sharding == gv.Sharding(parse_mesh(e.mesh_text.value), spec)
    assert e.shape == parse_tensor_shape(e.shape_text.value)
    ndim = len(e.shape)
    assert e.hlo_text.value == e.sharding.to_hlo(ndim)
    assert e.figure.layout.title.text == e.sharding.describe(e.shape, e.dtype.value) + (
        f" on {e.sharding.mesh!r}"
    )
    assert e.plot.figure["layout"]["title"]["text"] == e.figure.layout.title.text
    assert html.escape(e.sharding.to_hlo(ndim)) in e.notation.value
    assert e.error == "" and e.message.value in ("",) or "gv-ok" in e.message.value
    assert "gv-stale" not in e.plot._dom_classes


def _assert_failed_inline(e: ShardingEditor, before: gv.Sharding, words: str) -> None:
    assert words in e.error and "gv-error" in e.message.value
    assert "\n" not in e.error  # one line
    assert e.sharding == before and "gv-stale" in e.plot._dom_classes  # last good state, greyed
    assert "gv-stale" in e.notation._dom_classes


def test_every_control_through_every_option_keeps_controls_and_display_in_sync():
    e = ShardingEditor(mesh="x=2, y=2, z=2", shape="5, 6", spec=())
    for dtype in DTYPES:
        e.dtype.value = dtype
        _consistent(e)
        assert e.figure.layout.title.text.startswith(short_dtype(dtype) + "[")
    for d in range(2):
        for _, value in e.dims[d].options:
            e.dims[1 - d].value = None
            e.dims[d].value = value
            _consistent(e)
    e.dims[1].value = None
    e.dims[0].value = "x"
    e.dims[1].value = ("x", "y")  # an axis used twice: inline message
    _assert_failed_inline(e, gv.Sharding(e.mesh, ("x",)), "used twice")
    e.dims[1].value = "y"
    _consistent(e)
    for text in ("x=8", "a=1, b=2, c=4", "x=2, y=4"):
        e.mesh_text.value = text
        _consistent(e)
    for text in ("7", "3, 5, 7", "2, 3, 4, 5", "(7, 6)"):
        e.shape_text.value = text
        _consistent(e)
    for text in (
        "{devices=[2,4]<=[8]}",
        "{replicated}",
        "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
    ):
        e.hlo_text.value = text
        _consistent(e)


@pytest.mark.parametrize("fails_in", ["layout_dict", "jax_code", "layout_text"])
def test_an_unexpected_exception_in_any_view_is_one_inline_line_and_the_widget_recovers(
    monkeypatch, fails_in
):
    e = ShardingEditor(mesh="x=2, y=4", shape="8, 6", spec=("x",))
    before = e.sharding

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line of a deep traceback")

    monkeypatch.setattr(editor_module, fails_in, broken)
    e.dims[1].value = "y"
    _assert_failed_inline(e, before, "RuntimeError: boom")
    e.shape_text.value = "7, 6"
    _assert_failed_inline(e, before, "RuntimeError: boom")
    monkeypatch.undo()
    e.dims[1].value = None
    e.dims[1].value = "y"
    _consistent(e)
    assert e.sharding == gv.Sharding(e.mesh, ("x", "y")) and e.shape == (7, 6)


def test_a_spec_that_fails_half_way_changes_no_control():
    e = ShardingEditor(mesh="x=2, y=4", shape="8, 6, 4", spec=("x",))
    e.set_spec(("y", ("x", "y", "x", "y")))
    assert "not a choice" in e.error and [dd.value for dd in e.dims] == ["x", None, None]


PROBE = """
import json
shards = {s.device.id: [[i.start or 0, i.stop] for i in s.index] for s in x.addressable_shards}
print("PROBE", json.dumps({"dtype": str(x.dtype), "shards": shards}))
"""
# Every dtype, plus every kind of layout: replicated, partial, several axes on one dim, uneven,
# ranks 1 to 4 (each snippet runs as its own program, all in one process: same 8 devices).
JAX_CASES = [("x=2, y=4", "7, 6", ("x", "y"), dtype) for dtype in DTYPES] + [
    ("x=2, y=4", "8, 8", (), "float32"),
    ("x=2, y=4", "9", (("y", "x"),), "int8"),
    ("x=2, y=2, z=2", "3, 7, 4", (None, ("z", "x"), "y"), "bfloat16"),
    ("x=2, y=2, z=2", "2, 3, 5, 4", ("z", None, "x", None), "float16"),
]
RUNNER = """
import sys
for code in sys.argv[1:]:
    exec(code, {})
"""


def test_the_jax_code_runs_for_every_dtype_and_builds_the_same_layout():
    editors = [ShardingEditor(mesh=m, shape=s, spec=spec, dtype=dt) for m, s, spec, dt in JAX_CASES]
    codes = [e.notations()["jax"] + PROBE for e in editors]
    assert "pad (3, 7, 4) to (3, 8, 4)" in codes[-2] and " np." not in "".join(codes)
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, *codes], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    probes = [json.loads(line[6:]) for line in out.stdout.splitlines() if line.startswith("PROBE")]
    assert len(probes) == len(editors)
    for e, probe in zip(editors, probes, strict=True):
        assert probe["dtype"] == e.dtype.value
        for device, slices in e.sharding.device_slices(e.shape).items():
            clipped = [
                [min(a, n), min(n if b is None else b, n)]
                for (a, b), n in zip(probe["shards"][str(device)], e.shape, strict=True)
            ]
            assert clipped == [[s.start, s.stop] for s in slices], (e.notations()["type"], device)
