"""The zoo transformer as a training program: Adam, a loss, a step, a loop.

`make_step(mesh, specs)` builds `step(params, opt_state, batch) -> (params, opt_state, loss)`
for a stack of `examples.transformer_layer`s regressing a fixed target; `specs` chooses the
sharding (DP, 2-D, ...) exactly as the zoo's annotation names do. Shared by tests, the
training benchmark and lesson 07.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.partition.whole_plan import best_plan
from gspmd_viz.core.program.trace import trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split
from gspmd_viz.strategies.weight_update import weight_update_sharding
from gspmd_viz.zoo.examples import TRANSFORMER_SPECS, transformer_layer

WEIGHTS = ("wq", "wk", "wv", "wo", "wi", "wout")
# pure data parallelism: only the activations' batch dim is split
DP_SPECS = {name: None for name in TRANSFORMER_SPECS} | {
    "x": ("x", None, None),
    "attn_out": ("x", None, None),
    "ffn_in": ("x", None, None),
    "out": ("x", None, None),
}
# 2-D (data x model): weights split over the model axis y only, as Megatron-style 2-D sharding;
# the zoo's own TRANSFORMER_SPECS split them over x too (lingvo's DenseBuilder)
TWO_D_SPECS = TRANSFORMER_SPECS | {
    "wq": (None, "y", None),
    "wk": (None, "y", None),
    "wv": (None, "y", None),
    "wo": (None, "y", None),
    "wi": (None, "y"),
    "wout": ("y", None),
}


# --- Adam (Kingma & Ba, arXiv 1412.6980), in a few lines -----------------------------------
def adam_init(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    # count is [1], not a scalar: a 0-d input crashes our partitioned runner (jnp.pad in
    # core/execute.pad_global); tests/test_training.py pins that bug
    return {"m": zeros, "v": zeros, "count": jnp.zeros((1,), jnp.int32)}


def adam_update(params, grads, state, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    count = state["count"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    t = count[0].astype(jnp.float32)
    scale = lr * jnp.sqrt(1 - b2**t) / (1 - b1**t)  # bias corrections folded into the step size
    new = jax.tree.map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps), params, m, v)
    return new, {"m": m, "v": v, "count": count}


# --- the model and its step ----------------------------------------------------------------
def _annotator(mesh: Mesh, specs: dict):
    def ann(x, name):
        spec = specs.get(name)
        return x if spec is None else mesh_split(x, mesh, spec)

    return ann


def make_step(mesh: Mesh, specs: dict, lr: float = 1e-3):
    """step(params, opt_state, (x, y)) -> (params, opt_state, loss); params: list of layers,
    each a dict of the six weights named in WEIGHTS."""
    ann = _annotator(mesh, specs)

    def loss_fn(params, x, y):
        for layer in params:
            x = transformer_layer(ann, x, *(layer[n] for n in WEIGHTS))  # [B/x, L, M]
        return jnp.mean((x - y) ** 2)

    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        params, opt_state = adam_update(params, grads, opt_state, lr)
        return params, opt_state, loss

    return step


def init(
    layers: int = 2,
    batch: int = 8,
    seq: int = 16,
    seed: int = 0,
    model: int = 32,
    heads: int = 4,
    head_dim: int = 8,
    hidden: int = 64,
):
    """(params, opt_state, batches) with a fixed seed; batches: a function step -> (x, y)."""
    rng = np.random.default_rng(seed)
    shapes = {
        "wq": (model, heads, head_dim),
        "wk": (model, heads, head_dim),
        "wv": (model, heads, head_dim),
        "wo": (model, heads, head_dim),
        "wi": (model, hidden),
        "wout": (hidden, model),
    }

    def normal(shape, fan_in):
        return jnp.asarray(rng.standard_normal(shape) / np.sqrt(fan_in), jnp.float32)

    params = [{n: normal(s, s[0]) for n, s in shapes.items()} for _ in range(layers)]
    target = normal((model, model), model)  # y = tanh(x @ target): something to learn

    def batches(i: int):
        x = np.random.default_rng([seed, i]).standard_normal((batch, seq, model))
        x = jnp.asarray(x, jnp.float32)
        return x, jnp.tanh(x @ target)

    return params, adam_init(params), batches


def run(step, params, opt_state, batches, steps: int = 20) -> np.ndarray:
    """Losses of `steps` training steps (the step is any callable: jitted, partitioned, ...)."""
    losses = []
    for i in range(steps):
        params, opt_state, loss = step(params, opt_state, batches(i))
        losses.append(float(loss))
    return np.array(losses)


# --- the ledger the step-time model scales (gv.sim.training) ---------------------------------
# Small sizes that name themselves: 8 x distinct odd primes, so every per-device dim of every
# collective tells which model dim it is and how many ways it is split.
LEDGER_DIMS = {"B": 24, "L": 40, "M": 56, "N": 88, "D": 104, "H": 136}


def ledger_rows(strategy: str) -> list[tuple]:
    """Rows of one layer's partitioned Adam step for a gv.sim.training strategy."""
    mesh = Mesh({"x": 2, "y": 4}) if strategy == "2d" else Mesh({"x": 8})
    specs = TRANSFORMER_SPECS if strategy == "2d" else DP_SPECS
    step = make_step(mesh, specs)
    if strategy in ("dp+wus", "2d"):
        step = weight_update_sharding(step, mesh, "x")
    d = LEDGER_DIMS
    params, opt, batches = init(1, d["B"], d["L"], 0, d["M"], d["N"], d["D"], d["H"])
    shapes = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, opt, batches(0))
    )
    # the strategy's plan as GSPMD runs it: idle devices sharing work is chosen at toy sizes by
    # bytes, and its collectives on activations scale with the batch (lesson 07: MFU 41% -> 12%)
    plan = best_plan(propagate(trace(step, *shapes)), share_idle=False)
    return collective_rows(plan, LEDGER_DIMS)


# --- the ledger as plain rows, for gv.sim's step-time model ---------------------------------
def collective_rows(spmd, dims: dict) -> list[tuple]:
    """Every collective of a partitioned step as a plain row the simulator can rescale:
    (kind, axes, itemsize, per-layer?, ((dim name, shard axes), ...)).

    Each per-device operand dim is named by matching it to `dims` (name -> global size): pick
    global sizes whose ratios cannot collide (distinct odd primes times the mesh size), so a
    local size k names the one dim g with g / k a product of mesh axis sizes. A scalar (the
    loss's all-reduce) happens once per step; every other collective once per layer.
    """
    splits = _axis_subsets(spmd.mesh)
    rows = []
    for c in spmd.collectives:
        operand = tuple(_name_dim(k, dims, splits, c) for k in c.shape)
        rows.append((c.kind, c.axes, c.dtype.itemsize, bool(c.shape), operand))
    return rows


def _axis_subsets(mesh: Mesh) -> dict[int, tuple[str, ...]]:
    """shard count -> the mesh axes giving it (every subset's product must be unique)."""
    out: dict[int, tuple[str, ...]] = {}
    names = mesh.axis_names
    for bits in range(1 << len(names)):
        axes = tuple(a for i, a in enumerate(names) if bits >> i & 1)
        n = 1
        for a in axes:
            n *= mesh.axis_size(a)
        if n in out and n != 1:
            raise ValueError(f"{mesh!r}: axes {out[n]} and {axes} both split {n} ways")
        out.setdefault(n, axes)
    return out


def _name_dim(local: int, dims: dict, splits: dict, coll) -> tuple[str, tuple[str, ...]]:
    hits = [
        (name, splits[g // local])
        for name, g in dims.items()
        if g % local == 0 and g // local in splits
    ]
    if len(hits) != 1:
        raise ValueError(
            f"cannot name dim of size {local} in {coll}: matches {hits or 'nothing'} among "
            f"{dims}; choose dim sizes whose ratios cannot collide"
        )
    return hits[0]
