"""gv.trace: the program form, inlining, annotations, rejections and the pretty-printer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gspmd_viz as gv
from gspmd_viz.core.program.trace import Literal, Value

MESH = gv.Mesh({"x": 2, "y": 4})


def mlp(x, w):
    x = gv.mesh_split(x, MESH, ("x", None))
    return jnp.tanh(x @ w)


def test_values_and_equations_follow_the_jaxpr():
    prog = gv.trace(mlp, jnp.ones((8, 16)), jnp.ones((16, 4)))
    assert [e.primitive for e in prog.equations] == ["sharding_constraint", "dot_general", "tanh"]
    assert [v.shape for v in prog.inputs] == [(8, 16), (16, 4)]
    assert prog.outputs[0].shape == (8, 4) and prog.outputs[0].dtype == np.float32
    assert prog.mesh == MESH
    (annotated,) = prog.annotations
    assert annotated is prog.equations[0].outputs[0]
    assert prog.annotations[annotated] == gv.Sharding(MESH, ("x", None))


def test_nested_jit_and_custom_derivatives_are_inlined():
    @jax.custom_jvp
    def smooth(x):
        return jnp.sin(x)

    smooth.defjvp(lambda p, t: (smooth(p[0]), t[0]))

    def f(x):
        return jax.jit(lambda y: jax.nn.relu(y) + 1.0)(smooth(x))

    prog = gv.trace(f, jnp.ones(3))
    names = [e.primitive for e in prog.equations]
    assert "jit" not in names and "custom_jvp_call" not in names
    assert names == ["sin", "max", "add"]
    np.testing.assert_allclose(prog(jnp.arange(3.0)), f(jnp.arange(3.0)))


def test_shape_dtype_structs_need_no_values():
    prog = gv.trace(mlp, jax.ShapeDtypeStruct((8, 16), jnp.float32), jnp.ones((16, 4)))
    assert prog.inputs[0].shape == (8, 16)


@pytest.mark.parametrize(
    ("fn", "name", "advice"),
    [
        (
            lambda x: jax.shard_map(
                jnp.sin, mesh=gv.Mesh({"x": 4}).to_jax(), in_specs=P("x"), out_specs=P("x")
            )(x),
            "shard_map",
            r"a:f32\[4\]\): it is already per-device code",
        ),
    ],
)
def test_control_flow_is_rejected_by_name_with_advice(fn, name, advice):
    with pytest.raises(NotImplementedError, match=f"{name!r}.*{advice}"):
        gv.trace(fn, jnp.ones(4))


def test_two_meshes_in_one_program_is_an_error():
    other = gv.Mesh({"a": 8})

    def f(x):
        return gv.mesh_split(gv.mesh_split(x, MESH, ("x",)), other, ("a",))

    with pytest.raises(ValueError, match="different meshes"):
        gv.trace(f, jnp.ones(8))


def test_pretty_shows_types_and_shardings():
    prog = gv.trace(mlp, jnp.ones((8, 16)), jnp.ones((16, 4)))
    text = str(prog)
    assert "c:f32[8@x, 16] = sharding_constraint a  # fixed" in text
    assert "d:f32[8, 4] = dot_general" in text
    prop = gv.propagate(prog)
    assert "e:f32[8@x, 4] = tanh d" in prog.pretty(prop)


def test_literals_and_constants_are_operands_not_values():
    prog = gv.trace(lambda x: x * 2.0 + jnp.arange(3.0), jnp.ones(3))
    mul = prog.equations[0]
    assert isinstance(mul.inputs[1], Literal)
    assert all(isinstance(v, Value) for e in prog.equations for v in e.outputs)


def test_evaluate_rebinds_every_equation():
    x, w = jnp.arange(128.0).reshape(8, 16), jnp.ones((16, 4))
    prog = gv.trace(mlp, x, w)
    np.testing.assert_allclose(prog(x, w), jax.jit(mlp)(x, w), rtol=1e-6)


def test_unpartitioned_drops_the_annotations_and_runs_on_one_device():
    def f(x):
        return gv.mesh_split(x, MESH, ("x", None)) * 2

    x = jnp.arange(32.0).reshape(8, 4)
    prog = gv.trace(f, x)
    out = prog.unpartitioned(x)
    assert out.sharding.device_set == {jax.devices()[0]}
    np.testing.assert_array_equal(out, x * 2)
    assert len(jax.jit(f)(x).sharding.device_set) == MESH.size  # annotated: on the mesh
