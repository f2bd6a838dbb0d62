"""gv.pipeline.run executes any schedule on CPU devices and equals the sequential model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gspmd_viz as gv

pipe = gv.pipeline


def stage_fn(p, h):
    return jnp.tanh(h @ p["w"] + p["b"])  # [b, D] @ [D, D] -> [b, D]


def loss_fn(h, y):
    return jnp.mean((h - y) ** 2)


def sequential(params, xs, ys):
    """The oracle: every microbatch through layers 0..L-1 in a Python loop, mean of losses."""
    total = 0.0
    for m in range(xs.shape[0]):
        h = xs[m]
        for lay in range(params["w"].shape[0]):
            h = stage_fn({"w": params["w"][lay], "b": params["b"][lay]}, h)
        total = total + loss_fn(h, ys[m])
    return total / xs.shape[0]


def _problem(S, M, V, D, seed=0):
    rng = np.random.default_rng(seed)
    params = {
        "w": jnp.asarray(rng.normal(size=(S * V, D, D)) / np.sqrt(D), jnp.float32),
        "b": jnp.asarray(rng.normal(size=(S * V, D)) * 0.1, jnp.float32),
    }
    xs = jnp.asarray(rng.normal(size=(M, 2, D)), jnp.float32)
    ys = jnp.asarray(rng.normal(size=(M, 2, D)), jnp.float32)
    return params, xs, ys


def _check(name, S, M, V, D, mesh=None, seed=0):
    params, xs, ys = _problem(S, M, V, D, seed)
    sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
    mesh = mesh or gv.Mesh({"stage": S})
    loss, grads = pipe.run(sched, stage_fn, params, xs, ys, loss_fn, mesh=mesh, axis="stage")
    want, want_grads = jax.value_and_grad(sequential)(params, xs, ys)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    for key in params:
        assert grads[key].shape == params[key].shape
        np.testing.assert_allclose(grads[key], want_grads[key], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "name,S,M,V",
    [
        ("gpipe", 2, 3, 1),
        ("1f1b", 4, 2, 1),
        ("interleaved-1f1b", 2, 4, 2),
        ("circular", 4, 4, 2),
        ("zb-h1", 3, 3, 1),
    ],
)
def test_every_schedule_equals_the_sequential_model(name, S, M, V):
    _check(name, S, M, V, D=3)


@settings(max_examples=6)
@given(
    name=st.sampled_from(gv.pipeline.SCHEDULES),
    S=st.integers(2, 4),
    groups=st.integers(1, 2),
    V=st.integers(1, 3),
    D=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_run_equals_sequential_for_random_shapes(name, S, groups, V, D, seed):
    V = V if name in ("interleaved-1f1b", "circular") else 1
    # M < S too, where the schedule allows it
    M = S * groups if V > 1 or name == "zb-h1" else S * groups - 1
    _check(name, S, M, V, D, seed=seed)


def test_other_mesh_axes_stay_free():
    _check("1f1b", 4, 4, 1, D=2, mesh=gv.Mesh({"data": 2, "stage": 4}))


@pytest.mark.parametrize(
    "mesh,axis,change,match",
    [
        (gv.Mesh({"stage": 2}), "stage", None, "has 2 devices but the schedule has 4 stages"),
        (gv.Mesh({"stage": 4}), "pipe", None, "no axis 'pipe'"),
        (gv.Mesh({"stage": 4}), "stage", "params", "leading layer dim of S\\*V"),
        (gv.Mesh({"stage": 4}), "stage", "xs", "leading dim of M = 4"),
        (gv.Mesh({"stage": 4}), "stage", "shape", "same shape and dtype"),
    ],
)
def test_bad_input_gets_a_clear_error(mesh, axis, change, match):
    params, xs, ys = _problem(4, 4, 1, 3)
    fn = stage_fn
    if change == "params":
        params = {"w": params["w"][:3], "b": params["b"]}
    elif change == "xs":
        xs = xs[:3]
    elif change == "shape":
        fn = lambda p, h: (h @ p["w"])[..., :2]  # noqa: E731
    sched = pipe.schedule("1f1b", stages=4, microbatches=4)
    with pytest.raises(ValueError, match=match):
        pipe.run(sched, fn, params, xs, ys, loss_fn, mesh=mesh, axis=axis)


def test_a_schedule_name_instead_of_a_schedule_is_refused():
    params, xs, ys = _problem(2, 2, 1, 3)
    with pytest.raises(TypeError, match="gv.pipeline.schedule"):
        pipe.run("1f1b", stage_fn, params, xs, ys, loss_fn, mesh=gv.Mesh({"stage": 2}))
