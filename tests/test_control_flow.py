"""Calls and control flow: inlined calls keep their boundary in the record, and rematerialised
code partitions like the code it recomputes (bytes at most XLA's, results exact)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.core.spmd.loops_branches import RunCond, RunLoop

MESH = gv.Mesh({"x": 2, "y": 4})
RNG = np.random.default_rng(0)


def arrays(*shapes):
    return tuple(jnp.asarray(RNG.standard_normal(s) / np.sqrt(s[-1]), jnp.float32) for s in shapes)


def mlp(x, w1, w2):
    x = gv.mesh_split(x, MESH, ("x", None))  # [B/x, D]
    h = jax.nn.relu(x @ gv.mesh_split(w1, MESH, (None, "y")))  # [B/x, H/y]
    return h @ gv.mesh_split(w2, MESH, ("y", None))  # [B/x, D] {sum over y}


def gradient(body):
    def step(x, y, w1, w2):
        return jax.grad(lambda w1, w2: jnp.mean((body(x, w1, w2) - y) ** 2), (0, 1))(w1, w2)

    return step


MLP_ARGS = arrays((16, 32), (16, 32), (32, 64), (64, 32))


def partitioned(f, *args):
    prop = gv.propagate(gv.trace(f, *args))
    return prop, gv.partition(prop)


def xla_bytes(f, prop, *args) -> float:
    theirs = gv.xla.collectives(
        f, *args, mesh=prop.mesh, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    return sum(c.wire_bytes for c in theirs)


def assert_runs_exact(spmd, *args):
    got, want = spmd(*args), spmd.program.unpartitioned(*args)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


# --- inlined calls ------------------------------------------------------------------------------


def test_remat_mlp_gradient_partitions_like_the_plain_one():
    prop, spmd = partitioned(gradient(jax.checkpoint(mlp)), *MLP_ARGS)
    _, plain = partitioned(gradient(mlp), *MLP_ARGS)
    assert "remat2" in [c.primitive for c in prop.program.calls]
    assert not prop.unknown_primitives
    assert spmd.wire_bytes <= xla_bytes(gradient(jax.checkpoint(mlp)), prop, *MLP_ARGS)
    assert spmd.wire_bytes == plain.wire_bytes
    assert_runs_exact(spmd, *MLP_ARGS)


@jax.custom_vjp
def scaled_tanh(x):
    return 2 * jnp.tanh(x)


scaled_tanh.defvjp(lambda x: (2 * jnp.tanh(x), x), lambda x, g: (2 * g * (1 - jnp.tanh(x) ** 2),))


def test_calls_keep_their_boundary_in_the_record():
    @jax.jit
    def inner(x):
        return jax.checkpoint(scaled_tanh)(x) * 3

    def f(x):
        return inner(gv.mesh_split(x, MESH, ("x", "y"))) + 1

    (x,) = arrays((8, 8))
    prog = gv.trace(f, x)
    jit, remat, vjp = prog.calls
    assert (jit.primitive, jit.name, jit.parent) == ("jit", "inner", None)
    assert (remat.primitive, remat.parent, vjp.primitive, vjp.parent) == (
        "remat2",
        jit.index,
        "custom_vjp_call",
        remat.index,
    )
    tanh = next(e for e in prog.equations if e.primitive == "tanh")
    assert tanh.call == vjp.index and tanh.index in vjp.equations
    assert set(vjp.equations) <= set(remat.equations) <= set(jit.equations)
    assert jit.outputs == prog.producer[prog.outputs[0]].inputs[:1]
    assert "custom_vjp_call[scaled_tanh]" in str(vjp)
    prop, spmd = partitioned(f, x)
    assert prop.sharding(tanh.outputs[0]).spec == (("x",), ("y",))
    assert not spmd.collectives
    assert_runs_exact(spmd, x)


def test_custom_vjp_gradient_runs_its_own_backward_rule():
    def loss(x, w):
        h = gv.mesh_split(x, MESH, ("x", None)) @ gv.mesh_split(w, MESH, (None, "y"))
        return jnp.sum(scaled_tanh(h) ** 2)

    x, w = arrays((16, 32), (32, 64))
    f = jax.grad(loss, argnums=1)
    prop, spmd = partitioned(f, x, w)
    assert spmd.wire_bytes <= xla_bytes(f, prop, x, w)
    assert_runs_exact(spmd, x, w)
    np.testing.assert_allclose(spmd(x, w), f(x, w), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("policy", [None, jax.checkpoint_policies.dots_saveable])
def test_remat_policies_inline_alike(policy):
    f = gradient(jax.checkpoint(mlp, policy=policy))
    prop, spmd = partitioned(f, *MLP_ARGS)
    assert spmd.wire_bytes <= xla_bytes(f, prop, *MLP_ARGS)
    assert_runs_exact(spmd, *MLP_ARGS)


# --- scan ----------------------------------------------------------------------------------------


def residual_stack(x, ws):
    """[B/x, D] through a scan over stacked [L, D, D/y] weights, with a per-layer output."""
    x = gv.mesh_split(x, MESH, ("x", None))
    ws = gv.mesh_split(ws, MESH, (None, None, "y"))

    def layer(h, w):
        return h + jnp.tanh(h @ w), jnp.sum(h, axis=1)

    return jax.lax.scan(layer, x, ws)


def test_a_scanned_stack_is_partitioned_once_and_counts_every_trip():
    texts, loop_bytes = [], []
    for layers in (2, 6):
        x, ws = arrays((16, 32), (layers, 32, 32))
        prop, spmd = partitioned(residual_stack, x, ws)
        (loop,) = [ins for ins in spmd.instructions if isinstance(ins, RunLoop)]
        assert all(c.trips == layers for c in loop.collectives) and loop.collectives
        theirs = xla_bytes(residual_stack, prop, x, ws)
        assert spmd.wire_bytes <= theirs
        assert f"scan × {layers} trips" in spmd.per_device_text()
        texts.append("\n".join(ins.text() for ins in loop.body))
        loop_bytes.append(sum(c.wire_bytes for c in loop.collectives) / layers)
        assert_runs_exact(spmd, x, ws)
    assert texts[0] == texts[1]  # the same per-device body, whatever the trip count
    assert loop_bytes[0] == loop_bytes[1]


def test_the_carried_value_has_one_sharding_on_entry_in_the_body_and_on_exit():
    x, ws = arrays((16, 32), (3, 32, 32))
    prop, spmd = partitioned(residual_stack, x, ws)
    (loop,) = prop.program.loops
    (init, param, result, final) = loop.carries[0]
    assert prop.sharding(param) == prop.sharding(result) == prop.sharding(final)
    assert prop.sharding(param).spec[0] == ("x",)  # from the annotation on the initial value
    (run,) = [i for i in spmd.instructions if isinstance(i, RunLoop)]
    assert run.carry_shardings == (prop.sharding(param),)
    (_, sliced), ((y, stacked),) = loop.xs[0], loop.ys
    assert prop.sharding(sliced).spec == prop.sharding(loop.xs[0][0]).spec[1:]  # [D, D/y]
    assert prop.sharding(stacked).spec == ((), *prop.sharding(y).spec)  # scanned dim whole


def test_fori_loop_reverse_and_nested_scans_run_exact():
    (x, w) = arrays((16, 32), (32, 32))

    def nested(x, w):
        x = gv.mesh_split(x, MESH, ("x", "y"))

        def outer(h, _):
            inner = jax.lax.scan(lambda g, _: (jnp.tanh(g @ w), None), h, None, length=3)[0]
            return inner, inner.sum()

        h, sums = jax.lax.scan(outer, x, None, length=2, reverse=True)
        return jax.lax.fori_loop(0, 4, lambda i, g: g * 0.5 + i, h), sums

    prop, spmd = partitioned(nested, x, w)
    assert len(prop.program.loops) == 3
    counts = {c.trips for c in spmd.collectives}
    assert counts <= {1, 2, 4, 6} and 6 in counts  # the inner body runs 2 x 3 times
    assert spmd.wire_bytes <= xla_bytes(nested, prop, x, w)
    assert_runs_exact(spmd, x, w)


def test_xla_collectives_count_the_trips_of_their_loop():
    x, ws = arrays((16, 32), (5, 32, 32))
    prop, _ = partitioned(residual_stack, x, ws)
    theirs = gv.xla.collectives(
        residual_stack, x, ws, mesh=MESH, in_shardings=prop.inputs, out_shardings=prop.outputs
    )
    in_loop = [c for c in theirs if "while/body" in c.source]
    assert in_loop and all(c.trips == 5 for c in in_loop)
    assert all(c.trips == 1 for c in theirs if c not in in_loop)


def test_a_stacked_input_split_on_its_scanned_dim_is_gathered_before_the_loop():
    x, ws = arrays((16, 32), (4, 32, 32))

    def f(x, ws):
        return residual_stack(x, gv.mesh_split(ws, MESH, ("x", None, "y")))

    prop, spmd = partitioned(f, x, ws)
    (run,) = [i for i in spmd.instructions if isinstance(i, RunLoop)]
    before = [c for c in spmd.collectives if c.trips == 1]
    assert any(c.kind == "all-gather" and c.axes == ("x",) for c in before)
    assert_runs_exact(spmd, x, ws)


# --- while ---------------------------------------------------------------------------------------


def test_a_data_dependent_while_counts_one_trip_and_says_so():
    x, w = arrays((16, 32), (32, 32))

    def f(x, w):
        x, w = gv.mesh_split(x, MESH, ("x", None)), gv.mesh_split(w, MESH, (None, "y"))
        more = lambda c: (jnp.abs(c[1]).sum() < 200.0) & (c[0] < 50)  # noqa: E731
        return jax.lax.while_loop(more, lambda c: (c[0] + 1, jnp.tanh(c[1] @ w) * 1.5), (0, x))

    prop, spmd = partitioned(f, x, w)
    assert int(f(x, w)[0]) > 1  # the loop really runs several trips
    (loop,) = prop.program.loops
    assert prop.sharding(loop.pred).is_replicated
    assert "data-dependent trip count: one trip counted" in spmd.per_device_text()
    assert spmd.collectives and all(c.trips == 1 and c.trips_note for c in spmd.collectives)
    assert "one trip counted" in str(spmd.collectives[0])
    assert spmd.wire_bytes <= xla_bytes(f, prop, x, w)
    assert_runs_exact(spmd, x, w)


# --- cond / switch -------------------------------------------------------------------------------


def three_way(x, w, k):
    """k: i32[1] (a 0-d argument trips the runner's padding: issue 10 item 5)."""
    x, w = gv.mesh_split(x, MESH, ("x", None)), gv.mesh_split(w, MESH, (None, "y"))
    return jax.lax.switch(
        k[0],
        [lambda x, w: jnp.tanh(x @ w), lambda x, w: (x @ w) * 2, lambda x, w: x[:, :32] * w.sum()],
        x,
        w,
    )


def test_switch_branches_agree_on_their_outputs_and_every_branch_runs_exact():
    x, w = arrays((16, 32), (32, 32))
    prop, spmd = partitioned(three_way, x, w, jnp.array([0], jnp.int32))
    (cond,) = prop.program.conds
    ((results, out),) = cond.results
    assert all(prop.sharding(r) == prop.sharding(out) for r in results)
    (run,) = [i for i in spmd.instructions if isinstance(i, RunCond)]
    assert run.shardings == (prop.sharding(out),)  # every branch hands back this layout
    assert prop.sharding(cond.selector).is_replicated
    assert spmd.wire_bytes <= xla_bytes(three_way, prop, x, w, jnp.array([0], jnp.int32))
    for k in (0, 1, 2, 7):  # switch clamps the index
        assert_runs_exact(spmd, x, w, jnp.array([k], jnp.int32))
    assert "switch" in spmd.per_device_text() and "branch 2:" in spmd.per_device_text()


def test_unsupported_primitives_are_named_with_their_operands():
    def per_device(x):
        spec = jax.sharding.PartitionSpec("x")
        return jax.shard_map(jnp.sin, mesh=MESH.to_jax(), in_specs=spec, out_specs=spec)(x)

    with pytest.raises(NotImplementedError, match=r"'shard_map' \(here on a:f32\[8, 4\]\)"):
        gv.trace(lambda x: per_device(x[::1]), jnp.ones((8, 4)))


def test_the_program_text_marks_bodies_conditions_and_branches():
    x, w = arrays((16, 32), (32, 32))
    text = str(gv.trace(three_way, x, w, jnp.array([0], jnp.int32)))
    assert [ln.strip() for ln in text.splitlines() if "#" in ln and "fixed" not in ln] == [
        "# cond branch 0 {",
        "# }",
        "# cond branch 1 {",
        "# }",
        "# cond branch 2 {",
        "# }",
    ]
    x, ws = arrays((16, 32), (3, 32, 32))
    assert "# scan body × 3 {" in str(gv.trace(residual_stack, x, ws))


# --- views ---------------------------------------------------------------------------------------


def test_ledger_opens_loops_and_the_graph_draws_them_as_clusters():
    from gspmd_viz.viz.ledger import widget as ledger

    x, ws = arrays((16, 32), (4, 32, 32))
    _, spmd = partitioned(residual_stack, x, ws)
    rows = ledger.rows(spmd)
    assert sum(r["collective"].wire_bytes for r in rows) == spmd.wire_bytes
    assert len(rows) == len(spmd.collectives) and all(r["collective"].trips == 4 for r in rows)
    source = ledger.ledger_graph(spmd).source
    assert "subgraph cluster_0" in source and "scan body, × 4 trips; carries" in source
    assert "(× 4 trips)" in source
    x, w = arrays((16, 32), (32, 32))
    _, spmd = partitioned(three_way, x, w, jnp.array([0], jnp.int32))
    source = ledger.ledger_graph(spmd).source
    assert all(f"cond branch {k} of 3" in source for k in range(3))


@pytest.mark.parametrize("remat", [False, True])
def test_the_gradient_of_a_scanned_stack_runs_its_reverse_scan_partitioned(remat):
    def loss(x, ws):
        layer = lambda h, w: (h + jnp.tanh(h @ w), None)  # noqa: E731
        layer = jax.checkpoint(layer) if remat else layer
        x = gv.mesh_split(x, MESH, ("x", None))
        h = jax.lax.scan(layer, x, gv.mesh_split(ws, MESH, (None, None, "y")))[0]
        return jnp.sum(h**2)

    f = jax.grad(loss, argnums=1)
    x, ws = arrays((16, 32), (4, 32, 32))
    prop, spmd = partitioned(f, x, ws)
    assert [loop.reverse for loop in prop.program.loops] == [False, True]
    assert spmd.wire_bytes <= xla_bytes(f, prop, x, ws)
    assert_runs_exact(spmd, x, ws)
