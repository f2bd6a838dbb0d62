"""gv.weight_update_sharding and the zoo transformer's training run.

Oracles: the unpartitioned program (annotations dropped, one device), the ring formulas
applied to the parameter bytes counted from their shapes, and an unsharded run of the same
model for 20 Adam steps.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.strategies.weight_update import with_axis
from gspmd_viz.zoo import examples
from gspmd_viz.zoo import training as tz

DP_MESH = gv.Mesh({"x": 8})
MESH_2D = gv.Mesh({"x": 2, "y": 4})


def _partition(step, *args, **options):
    program = gv.trace(step, *args)
    prop = gv.propagate(program)
    return program, prop, gv.partition(prop, **options)


def _bytes_by_kind(spmd, min_bytes=64):
    """{kind: wire bytes} of the collectives bigger than the scalar loss's all-reduce."""
    out = {}
    for c in spmd.collectives:
        if c.operand_bytes >= min_bytes:
            out[c.kind] = out.get(c.kind, 0.0) + c.wire_bytes
    return out


@pytest.fixture(scope="module")
def dp():
    params, opt, batches = tz.init(layers=1, batch=16)
    args = (params, opt, batches(0))
    plain = tz.make_step(DP_MESH, tz.DP_SPECS)
    wus = gv.weight_update_sharding(plain, DP_MESH, "x")
    return args, _partition(plain, *args), _partition(wus, *args), wus


def _param_bytes(params) -> int:
    return sum(int(np.prod(p.shape)) * p.dtype.itemsize for p in jax.tree.leaves(params))


def test_wus_step_equals_the_unpartitioned_plain_step(dp):
    args, (plain_program, _, _), (_, _, wus_spmd), _ = dp
    got = wus_spmd(*args)
    want = plain_program.unpartitioned(*args)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_dp_all_reduces_where_wus_reduce_scatters_and_all_gathers_the_same_bytes(dp):
    args, (_, _, plain), (_, _, wus), _ = dp
    n, param_bytes = 8, _param_bytes(args[0])
    # ring formulas on the parameter bytes counted from their shapes
    assert _bytes_by_kind(plain) == {"all-reduce": 2 * (n - 1) / n * param_bytes}
    assert _bytes_by_kind(wus) == {
        "reduce-scatter": (n - 1) / n * param_bytes,
        "all-gather": (n - 1) / n * param_bytes,
    }
    assert wus.wire_bytes == plain.wire_bytes
    n_weights = len(jax.tree.leaves(args[0]))
    for spmd, kinds in ((plain, ("all-reduce",)), (wus, ("reduce-scatter", "all-gather"))):
        big = [c for c in spmd.collectives if c.operand_bytes >= 64]
        assert sorted(c.kind for c in big) == sorted(kinds * n_weights)
        assert all(c.axes == ("x",) for c in big)


def test_optimizer_state_bytes_per_device_are_one_over_n(dp):
    args, (_, plain_prop, _), (_, wus_prop, _), _ = dp
    n_params = len(jax.tree.leaves(args[0]))
    slots = [p for p in jax.tree.leaves(args[1]) if p.size > 1]  # m and v, not the count
    whole = sum(int(np.prod(p.shape)) * p.dtype.itemsize for p in slots)
    for prop, expected in ((plain_prop, whole), (wus_prop, whole / 8)):
        states = prop.inputs[n_params : n_params + len(jax.tree.leaves(args[1]))]
        shapes = jax.tree.leaves(args[1])
        got = sum(
            s.shard_bytes(p.shape, p.dtype)
            for s, p in zip(states, shapes, strict=True)
            if p.size > 1
        )
        assert got == expected


def test_wus_keeps_the_signature_and_replicates_parameters_again(dp):
    args, _, (_, wus_prop, _), wus = dp
    n_params = len(jax.tree.leaves(args[0]))
    assert all(s.is_replicated for s in wus_prop.outputs[:n_params])
    out = jax.eval_shape(wus, *args)
    assert jax.tree.structure(out) == jax.tree.structure((args[0], args[1], 0.0))
    assert "weight_update_sharding" in repr(wus)


def test_with_axis_splits_the_largest_dividing_dim_and_leaves_what_cannot_split():
    s = gv.Sharding(MESH_2D, (None, "y"))
    assert with_axis(s, (32, 64), "x") == gv.Sharding(MESH_2D, ("x", "y"))
    assert with_axis(s, (3, 64), "x") == gv.Sharding(MESH_2D, (None, ("y", "x")))
    assert with_axis(gv.Sharding(MESH_2D, ()), (), "x") == gv.Sharding(MESH_2D, ())
    assert with_axis(gv.Sharding(MESH_2D, ()), (5,), "x") == gv.Sharding(MESH_2D, ())
    already = gv.Sharding(MESH_2D, ("x", None))
    assert with_axis(already, (8, 8), "x") is already


def test_bad_arguments_get_clear_errors():
    step = tz.make_step(DP_MESH, tz.DP_SPECS)
    with pytest.raises(TypeError, match="gv.Mesh"):
        gv.weight_update_sharding(step, {"x": 8}, "x")
    with pytest.raises(ValueError, match="nope"):
        gv.weight_update_sharding(step, DP_MESH, "nope")
    with pytest.raises(TypeError, match="train step"):
        gv.weight_update_sharding(None, DP_MESH, "x")
    params, opt, batches = tz.init(layers=1)
    other = gv.weight_update_sharding(step, MESH_2D, "x")
    with pytest.raises(ValueError, match="mesh"):
        other.shardings(params, opt, batches(0))


def test_2d_weight_annotations_pin_gradients_so_wus_needs_weights_split_over_data():
    """A sharding constraint on a weight transposes to the same constraint on its gradient:
    weights annotated (None, y) keep an all-reduce over x; lingvo's 2-D specs, which split the
    weights over x as well, reduce-scatter and all-gather the same bytes instead."""
    params, opt, batches = tz.init(layers=1)
    args = (params, opt, batches(0))
    _, _, two_d = _partition(tz.make_step(MESH_2D, tz.TWO_D_SPECS), *args)
    _, _, lingvo = _partition(tz.make_step(MESH_2D, examples.TRANSFORMER_SPECS), *args)

    def over_x(spmd):
        return {k: b for k, b in _bytes_by_kind_axes(spmd).items() if k[1] == ("x",)}

    ar = over_x(two_d)[("all-reduce", ("x",))]
    assert ar == 2 * (2 - 1) / 2 * _param_bytes(params) / 4  # grads split over y(4), AR over x(2)
    assert over_x(lingvo) == {("reduce-scatter", ("x",)): ar / 2, ("all-gather", ("x",)): ar / 2}


def _bytes_by_kind_axes(spmd):
    out = {}
    for c in spmd.collectives:
        if c.operand_bytes >= 64:
            out[(c.kind, c.axes)] = out.get((c.kind, c.axes), 0.0) + c.wire_bytes
    return out


def test_partitioned_runner_accepts_a_scalar_input():
    """Pins a runner bug met here (Adam's step count works around it as a [1] array)."""

    def f(x, s):
        return gv.mesh_split(x, DP_MESH, ("x",)) * s

    x, s = jnp.arange(8.0), jnp.float32(2.0)
    spmd = gv.partition(gv.propagate(gv.trace(f, x, s)))
    np.testing.assert_array_equal(spmd(x, s), x * s)


def test_twenty_step_loss_curves_of_2d_wus_and_unsharded_runs_match():
    params, opt, batches = tz.init(layers=2)
    unsharded = jax.jit(tz.make_step(MESH_2D, {}))  # no annotations: one device
    want = tz.run(unsharded, params, opt, batches, steps=20)
    step = gv.weight_update_sharding(
        tz.make_step(MESH_2D, examples.TRANSFORMER_SPECS), MESH_2D, "x"
    )
    _, _, spmd = _partition(step, params, opt, batches(0))
    got = tz.run(spmd, params, opt, batches, steps=20)
    assert want[-1] < 0.8 * want[0]  # it learns something
    np.testing.assert_allclose(got, want, rtol=1e-4)


def _wire(kind, s, n):
    return {
        "all-reduce": 2 * (n - 1) / n,
        "all-gather": (n - 1) / n,
        "reduce-scatter": (n - 1) / n,
    }[kind] * s


@pytest.mark.parametrize("strategy", ["dp+wus", "2d"])
def test_ledger_rows_scaled_to_a_new_size_equal_a_fresh_partition_there(strategy):
    from gspmd_viz.sim import training as st

    rows = tz.ledger_rows(strategy)
    big = dict(tz.LEDGER_DIMS, B=48, M=112, H=272)
    mesh = MESH_2D if strategy == "2d" else DP_MESH
    step = tz.make_step(mesh, examples.TRANSFORMER_SPECS if strategy == "2d" else tz.DP_SPECS)
    step = gv.weight_update_sharding(step, mesh, "x")
    params, opt, batches = tz.init(1, big["B"], big["L"], 0, big["M"], big["N"], big["D"], big["H"])
    _, _, spmd = _partition(step, params, opt, batches(0), share_idle=False)  # as ledger_rows
    scaled = st.scale_rows(rows, big, mesh.shape, layers=1)
    want = sum(c.wire_bytes for c in spmd.collectives)
    got = sum(n * _wire(k, s, math.prod(mesh.shape[a] for a in axes)) for k, axes, s, n in scaled)
    assert got == pytest.approx(want, rel=1e-12)
