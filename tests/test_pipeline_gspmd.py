"""GSPMD's pipelining through our own partitioner: a vmapped stage over weights split on the
stage axis and a shifted state buffer partition into collective-permutes (never a gather of
the buffer), run equal to the sequential model, and move no more bytes than XLA.

Oracles: `gspmd_sequential` (the layers one after another, on one device) for values; XLA's
partitioner on the same program and shardings for bytes; the iteration count's closed form."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.strategies.gspmd_pipeline import gspmd_iterations, gspmd_pipeline, gspmd_sequential

RNG = np.random.default_rng(7)


def stage_fn(w, h):  # one stage on one microbatch: [B, D] -> [B, D]
    return jnp.tanh(h @ w["w"] + w["b"])


def _weights(stages, repeats, d):
    lead = (stages, repeats) if repeats > 1 else (stages,)
    w = RNG.normal(size=lead + (d, d)) / np.sqrt(d)
    return {
        "w": jnp.asarray(w, jnp.float32),
        "b": jnp.asarray(RNG.normal(size=lead + (d,)), jnp.float32),
    }


CASES = [  # (stages, microbatches, repeats, shift, loop)
    (4, 4, 1, "roll", "unrolled"),
    (4, 6, 1, "concatenate", "unrolled"),
    (4, 8, 1, "roll", "scan"),
    (2, 3, 1, "concatenate", "scan"),
    (4, 4, 2, "roll", "unrolled"),
    (2, 3, 3, "concatenate", "scan"),
    (4, 5, 2, "roll", "scan"),
]


@pytest.mark.parametrize("stages, m, repeats, shift, loop", CASES)
def test_the_gspmd_pipeline_is_exact_with_permutes_and_no_more_bytes_than_xla(
    stages, m, repeats, shift, loop
):
    mesh = gv.Mesh({"stage": stages})
    weights, xs = _weights(stages, repeats, 8), jnp.asarray(RNG.normal(size=(m, 2, 8)), jnp.float32)
    f = gspmd_pipeline(stage_fn, mesh, shift=shift, loop=loop, repeats=repeats)
    prog = gv.trace(f, weights, xs)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    want = np.asarray(gspmd_sequential(stage_fn, weights, xs, repeats))
    np.testing.assert_allclose(np.asarray(spmd(weights, xs)), want, rtol=1e-5, atol=1e-5)
    kinds = collections.Counter(c.kind for c in spmd.collectives)
    assert set(kinds) == {"collective-permute", "all-reduce"}, kinds  # never a gather
    trips = gspmd_iterations(stages, m, repeats)
    per_trip = 1 if loop == "scan" else trips
    assert kinds["collective-permute"] == per_trip  # one shift per iteration
    shifted = [c for c in spmd.collectives if c.kind == "collective-permute"]
    assert {c.shape for c in shifted} == {(1, 2, 8)}  # one stage's slot, never the buffer
    assert sum(c.trips for c in shifted) == trips
    theirs = gv.xla.collectives(f, weights, xs, mesh=mesh, in_shardings=prop.inputs,
                                out_shardings=prop.outputs)  # fmt: skip
    assert spmd.wire_bytes <= sum(c.wire_bytes for c in theirs)


def test_iterations_is_r_times_m_plus_the_fill():
    assert [gspmd_iterations(4, 8), gspmd_iterations(4, 8, 2), gspmd_iterations(8, 8, 4)] == [
        11,
        19,
        39,
    ]


def test_sequential_is_the_layers_in_order():
    """Layer r·S + s is stage s's repeat r: composing by hand gives the same."""
    weights, xs = _weights(2, 2, 4), jnp.asarray(RNG.normal(size=(3, 1, 4)), jnp.float32)
    h = xs
    for r in range(2):
        for s in range(2):
            h = stage_fn({"w": weights["w"][s, r], "b": weights["b"][s, r]}, h)
    np.testing.assert_allclose(
        np.asarray(gspmd_sequential(stage_fn, weights, xs, 2)), np.asarray(h)
    )


def test_the_pipeline_also_runs_unpartitioned_under_jit():
    mesh = gv.Mesh({"stage": 4})
    weights, xs = _weights(4, 1, 8), jnp.asarray(RNG.normal(size=(4, 2, 8)), jnp.float32)
    f = jax.jit(gspmd_pipeline(stage_fn, mesh))
    np.testing.assert_allclose(
        np.asarray(f(weights, xs)), np.asarray(gspmd_sequential(stage_fn, weights, xs)), rtol=1e-5
    )


@pytest.mark.parametrize(
    "kwargs, lead, m, message",
    [
        ({"shift": "rotate"}, (4,), 4, "shift must be one of"),
        ({"loop": "while"}, (4,), 4, "loop must be one of"),
        ({}, (3,), 4, "leading dims (4,)"),
        ({"repeats": 2}, (4,), 4, "leading dims (4, 2)"),
        ({"repeats": 2}, (4, 2), 3, "at least as many microbatches as stages"),
    ],
)
def test_bad_pipelines_say_what_is_wrong(kwargs, lead, m, message):
    mesh = gv.Mesh({"stage": 4})
    weights = {"w": jnp.zeros(lead + (8, 8)), "b": jnp.zeros(lead + (8,))}
    f = gspmd_pipeline(stage_fn, mesh, **kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        f(weights, jnp.zeros((m, 2, 8)))
