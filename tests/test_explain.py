"""gv.explain: every collective of XLA's compiled program, on the user's line, explained.

Oracles: gv.xla.collectives (XLA's partitioned HLO read independently of the report) for the
list and its bytes, the function's own source lines for file:line, closed forms for padding and
buffer sizes, the compiler's own warning text for rematerialization."""

import functools
import inspect
from dataclasses import replace

import jax
import jax.numpy as jnp
import pytest
from fuzz_programs import NO_XLA, programs
from hypothesis import given, settings
from jax.sharding import PartitionSpec as P

import gspmd_viz as gv
from gspmd_viz.core.sharding.devices import DeviceCountError
from gspmd_viz.explain.compiled import CompiledProgram
from gspmd_viz.explain.findings import loop_gathers
from gspmd_viz.explain.frames import FrameIndex
from gspmd_viz.explain.report import Entry
from gspmd_viz.xla.compiled import parse_line
from gspmd_viz.zoo import examples

MESH = gv.Mesh({"x": 2, "y": 4})


def _lines_of(fn) -> range:
    lines, first = inspect.getsourcelines(fn)
    return range(first, first + len(lines))


def _check_complete(report, fn, args, mesh, fn_called=None):
    """Every collective XLA emits is in the report, on a line inside fn, with a reason."""
    theirs = gv.xla.collectives(fn_called or fn, *args, mesh=mesh)
    assert sorted(str(c) for c in theirs) == sorted(str(e.collective) for e in report.entries)
    assert report.xla_bytes == pytest.approx(sum(c.wire_bytes for c in theirs))
    inside = _lines_of(fn)
    for e in report.entries:
        assert e.line in inside, e
        assert e.reason.strip()


def mlp_with_helper(x, w1, w2):
    x = gv.mesh_split(x, MESH, ("x", None))
    w1 = gv.mesh_split(w1, MESH, (None, "y"))
    w2 = gv.mesh_split(w2, MESH, ("y", None))
    h = _act(x @ w1)
    return h @ w2


def _act(h):
    return jax.nn.relu(h)


def test_collectives_sit_on_the_users_line_with_the_equation():
    args = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
    report = gv.explain(mlp_with_helper, *args, mesh=MESH)
    _check_complete(report, mlp_with_helper, args, MESH)
    first = _lines_of(mlp_with_helper).start
    # the contracting dim of w2 is split over y: the all-reduce is the last line's dot
    (entry,) = report.entries
    assert (entry.line, entry.kind, entry.axes) == (first + 5, "all-reduce", ("y",))
    assert entry.equation.primitive == "dot_general"
    assert entry.location == f"test_explain.py:{first + 5}"
    assert "reduction" in entry.reason and "y" in entry.reason
    ours = gv.partition(gv.propagate(gv.trace(mlp_with_helper, *args))).wire_bytes
    assert report.our_bytes == pytest.approx(ours)
    text = str(report)
    assert f"line {first + 5}  return h @ w2" in text


def test_a_partial_and_a_pytree_of_arguments_are_explained():
    def layer(params, x, scale):
        x = gv.mesh_split(x, MESH, ("x", None))
        w = gv.mesh_split(params["w"], MESH, ("y", None))
        return scale * (x @ w)

    fn = functools.partial(layer, scale=2.0)
    args = ({"w": jnp.ones((32, 16))}, jnp.ones((16, 32)))
    report = gv.explain(fn, *args, mesh=MESH)
    _check_complete(report, layer, args, MESH, fn_called=fn)
    assert [e.line for e in report.entries] == [_lines_of(layer).start + 3]


def test_time_on_the_chip_is_the_simulators():
    args = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
    report = gv.explain(mlp_with_helper, *args, mesh=MESH, chip="tpu-v4")
    (entry,) = report.entries
    c = entry.collective
    assert entry.seconds == pytest.approx(
        gv.sim.collective_time(c.kind, c.operand_bytes, c.group_size, chip="tpu-v4")
    )


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "mlp_train_step"])
def test_zoo_every_collective_is_explained(name):
    ex = examples.get(name)
    report = gv.explain(ex.fn, *ex.args, mesh=ex.mesh)
    _check_complete(report, ex.fn, ex.args, ex.mesh)


@settings(max_examples=6, derandomize=True)
@given(programs(max_steps=3))
def test_random_programs_every_collective_is_explained(p):
    if any(name in NO_XLA for name, _ in p.steps):
        return
    report = gv.explain(p.fn, *p.args, mesh=p.mesh)
    _check_complete(report, p.fn, p.args, p.mesh)


def uneven(x):
    x = gv.mesh_split(x, MESH, ("y", None))
    return jnp.sin(x) * 2


def test_uneven_annotation_is_found_and_its_padding_costed():
    report = gv.explain(uneven, jnp.ones((6, 8)), mesh=MESH)
    (found,) = report.findings_of("uneven annotation")
    assert found.line == _lines_of(uneven).start + 1
    assert "padded it to 2 per device" in found.message  # ceil(6 / 4) rows per device
    padding = (2 * 4 - 6) * 8 * 4  # rows of padding over all devices x row bytes
    moved = sum(e.wire_bytes for e in report.entries if e.line == found.line)
    boundary = sum(e.wire_bytes for e in report.entries if "stack_frame_id" not in e.hlo)
    assert found.bytes == padding + moved + boundary
    assert "f32[2,8]" in report.compiled.text  # the per-device buffer XLA made


def uneven_result(x, w):
    h = jnp.tanh(x @ w)
    return gv.mesh_split(h, MESH, ("y", None))


def test_uneven_annotation_on_the_result_is_replicated():
    report = gv.explain(uneven_result, jnp.ones((6, 64)), jnp.ones((64, 32)), mesh=MESH)
    (found,) = report.findings_of("uneven annotation")
    assert found.line == _lines_of(uneven_result).start + 2
    assert "replicated it: every device holds all 6" in found.message
    # jit returns the result whole: XLA's last move gathers it, and every device keeps 6 rows
    (gather,) = report.entries
    assert gather.kind == "all-gather" and gather.collective.result_shape == (8, 32)
    assert found.bytes == (6 - 2) * 32 * 4 + gather.wire_bytes


def remat(a, b, c):
    d = a + b
    d = jax.lax.with_sharding_constraint(d, REMAT_MID.to_named_sharding())
    return c + d


REMAT_MESH = gv.Mesh({"x": 4, "y": 2})
REMAT_MID = gv.Sharding(REMAT_MESH, (None, ("x", "y"), None))


def test_involuntary_rematerialization_is_captured_and_tied_to_its_line(capfd):
    a = jnp.ones((16, 16, 16))
    pins = dict(in_shardings=(P("y", None, "x"),) * 2 + (P(None, ("x", "y"), None),))
    pins["out_shardings"] = P(None, ("x", "y"), None)
    report = gv.explain(remat, a, a, a, mesh=REMAT_MESH, **pins)
    assert "Involuntary full rematerialization" not in capfd.readouterr().err
    assert "Involuntary full rematerialization" in report.compiled.stderr
    (found,) = report.findings_of("involuntary rematerialization")
    assert found.line == _lines_of(remat).start + 1  # d = a + b
    plan = gv.reshard_plan(
        gv.Sharding(REMAT_MESH, ("y", None, "x")), REMAT_MID, (16, 16, 16), jnp.float32
    )
    assert plan.wire_bytes < found.bytes  # the reference's reshard beats the full gather
    assert gv.units.format_bytes(plan.wire_bytes) in found.message


_LOOP_HLO = """
%body (p: (s32[], f32[4,16], f32[2,16])) -> (s32[], f32[4,16], f32[2,16]) {
  %p = (s32[], f32[4,16], f32[2,16]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %h = f32[4,16]{1,0} get-tuple-element(%p), index=1
  %w = f32[2,16]{1,0} get-tuple-element(%p), index=2
  %ag = f32[8,16]{1,0} all-gather(%w), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}
  %hh = f32[4,16]{1,0} add(%h, %h)
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[4,16], f32[2,16]) tuple(%j, %hh, %w)
}
"""


def test_gather_of_a_loop_invariant_value_is_found():
    line = next(x for x in _LOOP_HLO.splitlines() if "all-gather(" in x)
    (c,) = parse_line(line)
    once = c.wire_bytes

    def found_in(text: str, hlo: str):
        entry = Entry(replace(c, trips=5), hlo, 3, None, 0.0, "", ())
        return loop_gathers(CompiledProgram(text, FrameIndex({}), (), "", None), [entry])

    (found,) = found_in(_LOOP_HLO, line)
    assert found.bytes == pytest.approx(4 * once)  # 5 trips gathered, 1 needed
    varying = line.replace("all-gather(%w)", "all-gather(%hh)")  # hh changes every trip
    assert found_in(_LOOP_HLO.replace(line, varying), varying) == []


def test_largest_buffers_are_per_device_against_hbm():
    args = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
    report = gv.explain(mlp_with_helper, *args, mesh=MESH)
    biggest = report.findings_of("memory")[0]
    assert biggest.bytes == 16 // 2 * 32 * 4  # h @ w2: [B/x, D] f32 partial sums per device
    assert biggest.line == _lines_of(mlp_with_helper).start + 5


def test_bad_input_says_what_is_wrong():
    args = (jnp.ones((16, 32)), jnp.ones((32, 64)), jnp.ones((64, 32)))
    with pytest.raises(ValueError, match="no-such-chip"):
        gv.explain(mlp_with_helper, *args, mesh=MESH, chip="no-such-chip")
    with pytest.raises(ValueError, match="in_shardings has 1 entries for 3"):
        gv.explain(mlp_with_helper, *args, mesh=MESH, in_shardings=[None])
    with pytest.raises(TypeError, match="Python function"):
        gv.explain(42, *args, mesh=MESH)
    with pytest.raises(ValueError, match="annotations use Mesh"):
        gv.explain(mlp_with_helper, *args, mesh=gv.Mesh({"x": 4, "y": 2}))
    with pytest.raises(DeviceCountError, match="needs 16 devices"):
        gv.explain(mlp_with_helper, *args, mesh=gv.Mesh({"x": 4, "y": 4}))


def test_a_jitted_functions_own_shardings_are_read():
    a = jnp.ones((16, 16, 16))
    arrives, leaves = P("y", None, "x"), P(None, ("x", "y"), None)
    named = [gv.Sharding(REMAT_MESH, tuple(p)).to_named_sharding() for p in (arrives, leaves)]
    jitted = jax.jit(remat, in_shardings=(named[0], named[0], named[1]), out_shardings=named[1])
    given = gv.explain(remat, a, a, a, mesh=REMAT_MESH, in_shardings=(arrives, arrives, leaves),
                       out_shardings=leaves)  # fmt: skip
    read = gv.explain(jitted, a, a, a, mesh=REMAT_MESH)
    assert [(e.line, e.collective.describe(), e.reason) for e in read.entries] == [
        (e.line, e.collective.describe(), e.reason) for e in given.entries
    ]
    assert [(f.kind, f.line) for f in read.findings] == [(f.kind, f.line) for f in given.findings]
    assert read.our_bytes == given.our_bytes > 0
