"""Our propagation against XLA's own (Shardy's), read from the compile dump."""

import jax.numpy as jnp
import pytest

import gspmd_viz as gv
from gspmd_viz.xla.dump import entry_instructions, parse_instruction
from gspmd_viz.zoo import examples

MESH = gv.Mesh({"x": 2, "y": 4})


@pytest.mark.parametrize("name", list(examples.ZOO))
def test_zoo_agrees_with_xla(name):
    ex = examples.get(name)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    table = gv.xla.compare(prop)
    arrays = [r for r in table.rows if r.value.ndim]  # XLA often leaves scalars unsharded
    compared = [r for r in table.compared if r.value.ndim]
    assert len(compared) >= 0.7 * len(arrays)  # the rest: no-ops, iotas, dead code
    assert table.agreement >= 0.95, table.text(only_differences=True)


def test_xla_propagate_reads_every_equation_of_an_mlp():
    ex = examples.get("mlp")
    xla = gv.xla.propagate(ex.fn, *ex.args, mesh=ex.mesh)
    dot1, relu, dot2 = (v for e in xla.program.equations[3:] for v in e.outputs)
    assert xla.sharding(dot1) == gv.Sharding(MESH, ("x", "y"))
    assert xla.sharding(relu) == gv.Sharding(MESH, ("x", "y"))
    assert xla.sharding(dot2) == gv.Sharding(MESH, ("x", None))
    assert xla.inputs[2] == gv.Sharding(MESH, ("y", None))  # propagated back to a parameter


def test_compare_refuses_annotations_xla_cannot_see():
    prog = gv.trace(lambda a: a * 2, jnp.ones((8, 4)))
    prop = gv.propagate(prog, mesh=MESH, annotations={prog.inputs[0]: ("x",)})
    with pytest.raises(ValueError, match="XLA cannot see them"):
        gv.xla.compare(prop)


HLO = """HloModule m

ENTRY %main.0 (a: f32[8,16]) -> f32[8] {
  %a = f32[8,16]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name="a"}
  %c = f32[] constant(0)
  ROOT %r.1 = f32[8]{0} reduce(%a, %c), dimensions={1}, to_apply=%add, sharding={devices=[2,4]<=[8] last_tile_dim_replicate}, metadata={op_name="jit(f)/eqn5/reduce_sum" stack_frame_id=4}
}
"""  # noqa: E501


def test_dump_lines_parse():
    a, c, r = entry_instructions(HLO)
    assert a.parameter == 0 and a.shape == (8, 16) and a.dtype == "f32"
    assert c.sharding is None and c.eqn is None
    assert r.eqn == 5 and r.opcode == "reduce"
    assert gv.Sharding.from_hlo(MESH, r.sharding) == gv.Sharding(MESH, ("x",))
    assert parse_instruction("not an instruction") is None
