"""gv.propagate: closed forms, provenance, determinism, device independence, errors."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.zoo import examples

MESH = gv.Mesh({"x": 2, "y": 4})
F32 = jnp.float32


def sds(*shape):
    return jax.ShapeDtypeStruct(shape, F32)


def specs_of(prop):
    return [prop.sharding(v).spec for v in prop.program.values]


def dot_prop(a_spec, b_spec):
    def f(a, b):
        return gv.mesh_split(a, MESH, a_spec) @ gv.mesh_split(b, MESH, b_spec)

    prog = gv.trace(f, sds(8, 16), sds(16, 32))
    return gv.propagate(prog)


def test_dot_of_row_and_column_shards_is_2d_sharded():
    # [i@x, k] . [k, j@y] -> [i@x, j@y]
    prop = dot_prop(("x", None), (None, "y"))
    assert prop.outputs[0] == gv.Sharding(MESH, ("x", "y"))
    assert prop.factor_axes(prop.program.equations[2]) == {0: ("x",), 1: (), 2: ("y",)}


def test_contracting_shards_do_not_reach_the_result():
    # [i, k@x] . [k@x, j] -> [i, j] (partial sums over x; the sharding is replicated)
    prop = dot_prop((None, "x"), ("x", None))
    assert prop.outputs[0] == gv.Sharding(MESH, ())
    assert prop.rule(2).factors[1].kind == "reduction"


def test_contracting_sharding_flows_to_the_other_operand():
    def f(a, b):
        return jnp.tanh(gv.mesh_split(a, MESH, (None, "y")) @ b)

    prop = gv.propagate(gv.trace(f, sds(8, 16), sds(16, 32)))
    assert prop.inputs[1] == gv.Sharding(MESH, ("y", None))


def test_backward_through_elementwise_and_transpose():
    def f(a):
        return gv.mesh_split(jnp.exp(a).T + 1.0, MESH, ("y", "x"))

    prop = gv.propagate(gv.trace(f, sds(8, 16)))
    assert prop.inputs[0] == gv.Sharding(MESH, ("x", "y"))
    assert {s.direction for s in prop.steps} == {"backward"}


def test_reshape_splits_a_sharded_dim_onto_its_major_factor():
    def f(a):
        return gv.mesh_split(a, MESH, (("x", "y"), None)).reshape(2, 4, 16)

    prop = gv.propagate(gv.trace(f, sds(8, 16)))
    assert prop.outputs[0] == gv.Sharding(MESH, ("x", "y", None))


def test_explain_walks_back_to_the_annotations():
    prop = dot_prop(("x", None), (None, "y"))
    text = prop.explain(prop.program.outputs[0])
    assert "eqn 2 dot_general forward" in text
    assert text.count("annotated by the user") == 2
    first = prop.steps[0]
    assert str(first).startswith("[0 pass-through ops]") or str(first).startswith("[1 all ops]")


@pytest.mark.parametrize("name", list(examples.ZOO))
def test_deterministic_and_device_independent(name):
    concrete = examples.get(name)
    a = gv.propagate(gv.trace(concrete.fn, *concrete.args))
    b = gv.propagate(gv.trace(concrete.fn, *concrete.args))
    assert [str(s) for s in a.steps] == [str(s) for s in b.steps]
    big = examples.get(name, mesh={"x": 64, "y": 64}, symbolic=True)  # no devices: abstract mesh
    c = gv.propagate(gv.trace(big.fn, *big.args))
    assert specs_of(a) == specs_of(c)
    assert a.unknown_primitives == ()


def test_conflicting_fixed_annotations_are_an_error():
    prog = gv.trace(lambda a: gv.mesh_split(a, MESH, ("x", None)) * 2, sds(8, 16))
    annotated = next(iter(prog.annotations))
    with pytest.raises(ValueError, match="conflicting fixed annotations"):
        gv.propagate(prog, annotations={annotated: ("y", None)})


def test_rank_mismatch_is_an_error():
    prog = gv.trace(lambda a: a * 2, sds(8, 16))
    with pytest.raises(ValueError, match="rank"):
        gv.propagate(prog, mesh=MESH, annotations={prog.inputs[0]: ("x", None, "y")})
    with pytest.raises(ValueError, match="rank"):
        gv.trace(lambda a: gv.mesh_split(a, MESH, ("x", None, "y")), sds(8, 16))


def test_mesh_the_function_cannot_use_is_an_error():
    prog = gv.trace(lambda a: gv.mesh_split(a, MESH, ("x", None)) * 2, sds(8, 16))
    with pytest.raises(ValueError, match="not the mesh"):
        gv.propagate(prog, mesh=gv.Mesh({"x": 8}))
    with pytest.raises(ValueError, match="no mesh_split annotations"):
        gv.propagate(gv.trace(lambda a: a * 2, sds(4)))
    with pytest.raises(ValueError, match="unknown mesh axis"):
        gv.propagate(prog, annotations={prog.inputs[0]: ("z", None)})


UNARY = [jnp.tanh, jnp.exp, lambda a: a * 3.0, lambda a: -a, jax.nn.relu, jnp.abs]


@given(
    st.lists(st.sampled_from(range(len(UNARY))), min_size=1, max_size=6),
    st.sampled_from([("x", None), (None, "y"), ("y", "x"), (("x", "y"), None)]),
    st.integers(0, 6),
)
def test_elementwise_chains_carry_one_annotation_everywhere(ops, spec, where):
    where = min(where, len(ops))

    def f(a):
        for i, op in enumerate(ops):
            if i == where:
                a = gv.mesh_split(a, MESH, spec)
            a = UNARY[op](a)
        return gv.mesh_split(a, MESH, spec) if where == len(ops) else a

    prop = gv.propagate(gv.trace(f, sds(8, 16)))
    want = gv.Sharding(MESH, spec)
    assert all(prop.sharding(v) == want for v in prop.program.values)


def test_an_annotation_pins_its_only_producer_and_conflicts_are_logged():
    def f(a, b):
        h = jnp.tanh(gv.mesh_split(a, MESH, ("x", None)) @ gv.mesh_split(b, MESH, (None, "x")))
        return gv.mesh_split(h, MESH, (None, None))  # h's only use: pinned replicated

    prop = gv.propagate(gv.trace(f, sds(8, 16), sds(16, 32)))
    tanh = next(e for e in prop.program.equations if e.primitive == "tanh")
    assert prop.sharding(tanh.outputs[0]).is_replicated
    assert "fixed by the annotation on its only use" in prop.explain(tanh.outputs[0])
    dot = next(e for e in prop.program.equations if e.primitive == "dot_general")
    # rows and columns both want x: one factor keeps it (the bigger operand's), never both
    assert sorted(prop.factor_axes(dot).values()) == [(), (), ("x",)]
    assert prop.sharding(dot.outputs[0]) == gv.Sharding(MESH, (None, "x"))
    assert gv.xla.compare(prop).agreement == 1.0


def test_a_conflict_within_a_factor_is_resolved_and_logged():
    def f(a, b):
        return gv.mesh_split(a, MESH, ("x", None)) + gv.mesh_split(b, MESH, ("y", None))

    prop = gv.propagate(gv.trace(f, sds(8, 16), sds(8, 16)))
    assert prop.outputs[0] == gv.Sharding(MESH, ())  # like Shardy: no winner within a factor
    assert prop.conflicts == ("eqn 2 add factor i: x against y, neither propagates",)
