"""The zoo: small annotated programs shared by tests, benchmarks and lessons.

`ex = examples.get("mlp")` (default mesh 2x4 {"x": 2, "y": 4}) returns an Example with
`ex.fn`, `ex.args` (small concrete arrays, fixed seed) and `ex.specs` (the annotation of every
named tensor). Annotations can be swapped: `examples.get("mlp", specs={"x": (None, "y")})`,
or left out with `None`. `symbolic=True` gives jax.ShapeDtypeStruct args (huge meshes, no
devices needed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split

DEFAULT_MESH = {"x": 2, "y": 4}


@dataclass(frozen=True)
class Example:
    name: str
    mesh: Mesh
    fn: object = field(repr=False)
    args: tuple = field(repr=False)
    specs: dict  # annotation name -> spec (None: not annotated)
    ranks: dict  # annotation name -> rank of the annotated tensor

    def with_specs(self, **specs) -> Example:
        return get(self.name, self.mesh, {**self.specs, **specs}, symbolic=self.symbolic)

    @property
    def symbolic(self) -> bool:
        return isinstance(self.args[0], jax.ShapeDtypeStruct)


class _Annotator:
    """`ann(x, "name")`: mesh_split x with the spec registered under name (if any)."""

    def __init__(self, mesh: Mesh, specs: dict):
        self.mesh, self.specs, self.ranks = mesh, specs, {}

    def __call__(self, x, name: str):
        self.ranks[name] = x.ndim
        spec = self.specs.get(name)
        return x if spec is None else mesh_split(x, self.mesh, spec)


def _arrays(seed: int, shapes: dict, symbolic: bool):
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype, high in shapes.values():
        if symbolic:
            out.append(jax.ShapeDtypeStruct(shape, dtype))
        elif np.issubdtype(dtype, np.integer):
            out.append(jnp.asarray(rng.integers(0, high, shape), dtype))
        else:
            out.append(jnp.asarray(rng.standard_normal(shape) / np.sqrt(shape[-1]), dtype))
    return tuple(out)


F32, I32 = np.float32, np.int32


# --- MLP --------------------------------------------------------------------------------
MLP_SPECS = {"x": ("x", None), "w1": (None, "y"), "w2": ("y", None)}


def _mlp(ann, x, w1, w2):
    x, w1, w2 = ann(x, "x"), ann(w1, "w1"), ann(w2, "w2")  # [B/x, D], [D, H/y], [H/y, D]
    h = jax.nn.relu(x @ w1)  # [B/x, H/y]
    return h @ w2  # [B/x, D] (partial sums over y)


def mlp(ann):
    shapes = {"x": ((16, 32), F32, 0), "w1": ((32, 64), F32, 0), "w2": ((64, 32), F32, 0)}
    return lambda x, w1, w2: _mlp(ann, x, w1, w2), shapes


def mlp_train_step(ann):
    def step(x, y, w1, w2):
        def loss(w1, w2):
            return jnp.mean((_mlp(ann, x, w1, w2) - y) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    shapes = {
        "x": ((16, 32), F32, 0),
        "y": ((16, 32), F32, 0),
        "w1": ((32, 64), F32, 0),
        "w2": ((64, 32), F32, 0),
    }
    return step, shapes


# --- transformer block (GSPMD paper, lingvo DenseBuilder: batch on x, model dims on y) ----
TRANSFORMER_SPECS = {
    "x": ("x", None, None),  # blm = [0, -1, -1]
    "wq": ("x", "y", None),  # mhd = [0, 1, -1]
    "wk": ("x", "y", None),
    "wv": ("x", "y", None),
    "wo": ("x", "y", None),  # output projection [M, N, D]
    "qkv": ("x", None, "y", None),  # blnd = [0, -1, 1, -1]
    "wi": ("x", "y"),  # mh = [0, 1]
    "h": ("x", None, "y"),  # blh = [0, -1, 1]
    "wout": ("y", "x"),  # hm = [1, 0]
    "attn_out": ("x", None, None),  # the residual stream after attention
    "ffn_in": ("x", None, None),  # its layer norm, the feed-forward input
    "out": ("x", None, None),  # the block's output
}


def _layer_norm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6)


def transformer_layer(ann, x, wq, wk, wv, wo, wi, wout):
    x = ann(x, "x")  # [B/x, L, M]
    y = _layer_norm(x)
    q, k, v = (
        ann(jnp.einsum("blm,mnd->blnd", y, ann(w, n)), "qkv")
        for w, n in ((wq, "wq"), (wk, "wk"), (wv, "wv"))
    )  # [B/x, L, N/y, D]
    logits = jnp.einsum("blnd,bsnd->bnls", q, k) / np.sqrt(q.shape[-1])  # [B/x, N/y, L, L]
    attn = jnp.einsum("bnls,bsnd->blnd", jax.nn.softmax(logits, axis=-1), v)
    x = x + ann(jnp.einsum("blnd,mnd->blm", attn, ann(wo, "wo")), "attn_out")  # [B/x, L, M]
    h = ann(jax.nn.gelu(ann(_layer_norm(x), "ffn_in") @ ann(wi, "wi")), "h")  # [B/x, L, H/y]
    return ann(x + h @ ann(wout, "wout"), "out")  # [B/x, L, M]


def _transformer_shapes(layers: int):
    B, L, M, N, D, H = 8, 16, 32, 4, 8, 64
    per_layer = {"wq": (M, N, D), "wk": (M, N, D), "wv": (M, N, D), "wo": (M, N, D)}
    per_layer |= {"wi": (M, H), "wout": (H, M)}
    shapes = {"x": ((B, L, M), F32, 0)}
    for i in range(layers):
        shapes |= {f"{k}{i}": (s, F32, 0) for k, s in per_layer.items()}
    return shapes


def transformer_block(ann):
    return lambda x, *w: transformer_layer(ann, x, *w), _transformer_shapes(1)


def transformer_stack(ann, layers: int = 24):
    def stack(x, *weights):
        for i in range(layers):
            x = transformer_layer(ann, x, *weights[6 * i : 6 * i + 6])
        return x

    return stack, _transformer_shapes(layers)


# --- GShard MoE layer --------------------------------------------------------------------
MOE_SPECS = {
    "x": ("x", None, None),  # GSM: groups on x
    "combine": ("x", None, None, None),  # GSEC: lingvo splits the gating tensors on G too
    "dispatched": ("x", None, None, None),  # EGCM: experts on x (G -> E: an all-to-all)
    "wi": ("x", None, "y"),  # EMH
    "wo": ("x", "y", None),  # EHM
    "out": ("x", None, None),  # GSM
}


def _one_hot_position(pos, mask, capacity: int):
    """[G, S, E] positions and mask -> [G, S, C]: each token's slot in its expert's buffer."""
    return jax.nn.one_hot((pos * mask).sum(-1).astype(jnp.int32), capacity)


def _top2_gating(logits, capacity: int):
    """GShard top-2 gating: [G, S, E] logits -> combine weights [G, S, E, C]."""
    gates = jax.nn.softmax(logits, axis=-1)  # [G, S, E]
    num_experts = logits.shape[-1]
    mask1 = jax.nn.one_hot(jnp.argmax(gates, axis=-1), num_experts)  # [G, S, E]
    gates2 = gates * (1.0 - mask1)
    mask2 = jax.nn.one_hot(jnp.argmax(gates2, axis=-1), num_experts)
    pos1 = jnp.cumsum(mask1, axis=1) - mask1  # position in expert, [G, S, E]
    pos2 = jnp.cumsum(mask2, axis=1) - mask2 + mask1.sum(axis=1, keepdims=True)
    mask1, mask2 = mask1 * (pos1 < capacity), mask2 * (pos2 < capacity)
    g1, g2 = (gates * mask1).sum(-1), (gates * mask2).sum(-1)  # [G, S]
    norm = g1 + g2 + 1e-9
    combine = (
        (g1 / norm)[..., None, None]
        * mask1[..., None]
        * _one_hot_position(pos1, mask1, capacity)[:, :, None]
    )
    combine += (
        (g2 / norm)[..., None, None]
        * mask2[..., None]
        * _one_hot_position(pos2, mask2, capacity)[:, :, None]
    )
    return combine  # [G, S, E, C]


def moe_capacity(group_size: int, experts: int, capacity_factor: float = 2.0) -> int:
    """Expert capacity C as GShard computes it: int(S * factor / E); when that exceeds the
    default of 4 it is rounded up to a multiple of 4, else C stays 4.
    # lingvo: gshard_layers.Top2GatingOnLogits (expert_capacity_dim, capacity_factor)"""
    auto = int(group_size * capacity_factor / experts)
    return max(4, -(-auto // 4) * 4)


def moe(ann):
    G, S, M, E, H = 4, 8, 16, 4, 32
    C = moe_capacity(S, E)  # top-2: room for 2S/E tokens per expert and group

    def layer(x, wg, wi, wo):
        x = ann(x, "x")  # [G/x, S, M]
        combine = ann(_top2_gating(jnp.einsum("gsm,me->gse", x, wg), C), "combine")  # [G/x,S,E,C]
        dispatch = (combine > 0).astype(x.dtype)
        d = ann(jnp.einsum("gsec,gsm->egcm", dispatch, x), "dispatched")  # [E/x, G, C, M]
        h = jax.nn.relu(jnp.einsum("egcm,emh->egch", d, ann(wi, "wi")))  # [E/x, G, C, H/y]
        e = jnp.einsum("egch,ehm->egcm", h, ann(wo, "wo"))  # [E/x, G, C, M]
        return ann(jnp.einsum("gsec,egcm->gsm", combine, e), "out")  # [G/x, S, M]

    shapes = {
        "x": ((G, S, M), F32, 0),
        "wg": ((M, E), F32, 0),
        "wi": ((E, M, H), F32, 0),
        "wo": ((E, H, M), F32, 0),
    }
    return layer, shapes


# --- embedding + softmax cross-entropy ---------------------------------------------------
EMBED_SPECS = {"ids": ("x", None), "table": ("y", None), "logits": ("x", None, "y")}


def embedding_loss(ann):
    def loss(ids, labels, table):
        table = ann(table, "table")  # [V/y, M]
        emb = jnp.take(table, ann(ids, "ids"), axis=0)  # [B/x, L, M]
        logits = ann(jnp.einsum("blm,vm->blv", emb, table), "logits")  # [B/x, L, V/y]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()

    shapes = {"ids": ((16, 8), I32, 64), "labels": ((16, 8), I32, 64), "table": ((64, 32), F32, 0)}
    return loss, shapes


# --- small conv block --------------------------------------------------------------------
CONV_SPECS = {"img": ("x", None, None, None), "kernel": (None, None, None, "y")}


def conv_block(ann):
    def block(img, kernel, dense):
        img, kernel = ann(img, "img"), ann(kernel, "kernel")  # [N/x, H, W, C], [3, 3, C, F/y]
        y = jax.lax.conv_general_dilated(
            img, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )  # [N/x, H, W, F/y]
        y = jax.lax.reduce_window(
            jax.nn.relu(y), -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
        )  # [N/x, H/2, W/2, F/y]
        return y.mean(axis=(1, 2)) @ dense  # [N/x, 10]

    shapes = {
        "img": ((8, 16, 16, 4), F32, 0),
        "kernel": ((3, 3, 4, 8), F32, 0),
        "dense": ((8, 10), F32, 0),
    }
    return block, shapes


# --- registry ----------------------------------------------------------------------------
ZOO = {
    "mlp": (mlp, MLP_SPECS),
    "transformer_block": (transformer_block, TRANSFORMER_SPECS),
    "moe": (moe, MOE_SPECS),
    "embedding_loss": (embedding_loss, EMBED_SPECS),
    "conv_block": (conv_block, CONV_SPECS),
    "mlp_train_step": (mlp_train_step, MLP_SPECS),
}
EXTRA = {"transformer_stack": (transformer_stack, TRANSFORMER_SPECS)}


def get(
    name: str,
    mesh: Mesh | dict | None = None,
    specs: dict | None = None,
    symbolic: bool = False,
    seed: int = 0,
    ranks: dict | None = None,
) -> Example:
    """Build a zoo example on `mesh` (default 2x4) with `specs` overriding the defaults.

    `ranks` (annotation name -> rank, from an earlier build) skips the trace that finds them.
    """
    table = ZOO | EXTRA
    if name not in table:
        raise KeyError(f"no example {name!r}; the zoo has {sorted(table)}")
    mesh = Mesh(DEFAULT_MESH) if mesh is None else mesh if isinstance(mesh, Mesh) else Mesh(mesh)
    build, defaults = table[name]
    unknown = sorted(set(specs or {}) - set(defaults))
    if unknown:
        raise KeyError(f"{name} has no annotation named {unknown}; it has {sorted(defaults)}")
    specs = {**defaults, **(specs or {})}
    ann = _Annotator(mesh, specs)
    fn, shapes = build(ann)
    args = _arrays(seed, shapes, symbolic)
    if ranks is None:
        jax.make_jaxpr(fn)(*args)  # trace once so ann.ranks knows every annotated tensor
        ranks = dict(ann.ranks)
    return Example(name, mesh, fn, args, specs, dict(ranks))


__all__ = ["REAL_SHAPES", "ZOO", "Example", "get", "real"]


# --- control flow and nested calls (the body of a loop is annotated per iteration) ----------
def transformer_scan(ann, layers: int = 2):
    """transformer_stack with its layers stacked ([layers, ...] weights) under one lax.scan."""

    def stack(x, *stacked):
        def layer(h, weights):
            return transformer_layer(ann, h, *weights), None

        return jax.lax.scan(layer, x, stacked)[0]

    shapes = {"x": _transformer_shapes(1)["x"]}
    for k, (shape, dtype, high) in _transformer_shapes(1).items():
        if k != "x":
            shapes[k[:-1]] = ((layers, *shape), dtype, high)
    return stack, shapes


def scanned_stack(layers: int, mesh: Mesh | dict | None = None) -> Example:
    """transformer_scan with `layers` layers (the benchmarks vary the trip count)."""
    mesh = mesh if isinstance(mesh, Mesh) else Mesh(mesh or DEFAULT_MESH)
    ann = _Annotator(mesh, dict(TRANSFORMER_SPECS))
    fn, shapes = transformer_scan(ann, layers)
    args = _arrays(0, shapes, False)
    jax.make_jaxpr(fn)(*args)
    return Example("transformer_scan", mesh, fn, args, dict(TRANSFORMER_SPECS), dict(ann.ranks))


def mlp_fori(ann):
    """Three applications of one MLP (a residual update) in a fori_loop with a static trip
    count (jax lowers it to a scan with the counter carried)."""

    def run(x, w1, w2):
        return jax.lax.fori_loop(0, 3, lambda i, h: h + _mlp(ann, h, w1, w2), x)

    return run, mlp(ann)[1]


def mlp_remat_grad(ann):
    """mlp_train_step with the MLP under jax.checkpoint: the backward recomputes the forward."""

    def step(x, y, w1, w2):
        body = jax.checkpoint(lambda x, w1, w2: _mlp(ann, x, w1, w2))
        loss = lambda w1, w2: jnp.mean((body(x, w1, w2) - y) ** 2)  # noqa: E731
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    return step, mlp_train_step(ann)[1]


@jax.custom_vjp
def _clipped_relu(x):
    return jnp.clip(x, 0.0, 6.0)


def _clipped_relu_bwd(x, g):
    return (jnp.where((x > 0) & (x < 6), g, 0.0),)


_clipped_relu.defvjp(lambda x: (_clipped_relu(x), x), _clipped_relu_bwd)


def mlp_custom_vjp_grad(ann):
    """The MLP's weight gradient through a custom_vjp activation (its own backward rule)."""

    def grads(x, y, w1, w2):
        def loss(w1, w2):
            x_, w1_, w2_ = ann(x, "x"), ann(w1, "w1"), ann(w2, "w2")
            return jnp.mean((_clipped_relu(x_ @ w1_) @ w2_ - y) ** 2)

        return jax.grad(loss, argnums=(0, 1))(w1, w2)

    return grads, mlp_train_step(ann)[1]


ZOO["transformer_scan"] = (transformer_scan, TRANSFORMER_SPECS)
ZOO["mlp_fori"] = (mlp_fori, MLP_SPECS)
ZOO["mlp_remat_grad"] = (mlp_remat_grad, MLP_SPECS)
ZOO["mlp_custom_vjp_grad"] = (mlp_custom_vjp_grad, MLP_SPECS)
__all__ += ["scanned_stack"]


def mlp_while(ann):
    """Apply the MLP (a residual update) until the activations' norm passes a bound: the trip
    count depends on the data (at most 8 trips)."""

    def run(x, w1, w2):
        def more(c):
            return (jnp.sum(c[1] ** 2) < 4.0 * x.size) & (c[0] < 8)

        return jax.lax.while_loop(
            more, lambda c: (c[0] + 1, c[1] + _mlp(ann, *c[1:], w1, w2)), (0, x)
        )

    return run, mlp(ann)[1]


ZOO["mlp_while"] = (mlp_while, MLP_SPECS)


def mlp_cond(ann):
    """The MLP or its negation, picked by the sign of the batch's sum (a cond: both branches
    leave their result in one sharding; the predicate is a replicated scalar)."""

    def run(x, w1, w2):
        pick = jnp.sum(ann(x, "x")) > 0
        return jax.lax.cond(pick, lambda: _mlp(ann, x, w1, w2), lambda: -_mlp(ann, x, w1, w2))

    return run, mlp(ann)[1]


ZOO["mlp_cond"] = (mlp_cond, MLP_SPECS)


# Dim names of each annotated tensor (one letter a dim), for widgets' annotation rows.
DIM_NAMES = {
    "mlp": {"x": "BD", "w1": "DH", "w2": "HD"},
    "mlp_train_step": {"x": "BD", "w1": "DH", "w2": "HD"},
    "transformer_block": {
        "x": "BLM",
        "wq": "MND",
        "wk": "MND",
        "wv": "MND",
        "wo": "MND",
        "qkv": "BLND",
        "wi": "MH",
        "h": "BLH",
        "wout": "HM",
        "attn_out": "BLM",
        "ffn_in": "BLM",
        "out": "BLM",
    },
    "moe": {
        "x": "GSM",
        "combine": "GSEC",
        "dispatched": "EGCM",
        "wi": "EMH",
        "wo": "EHM",
        "out": "GSM",
    },
    "embedding_loss": {"ids": "BL", "table": "VM", "logits": "BLV"},
    "conv_block": {"img": "NHWC", "kernel": "HWCF"},
}


# --- real sizes (symbolic: no devices, no values) ---------------------------------------
REAL_MESH = {"x": 16, "y": 16}
D_MODEL, VOCAB, HIDDEN = 8192, 32768, 32768
_TOKENS = 8192
REAL_SHAPES = {  # zoo program -> (shape, dtype) of each argument, in order
    "mlp": [((_TOKENS, D_MODEL), F32), ((D_MODEL, HIDDEN), F32), ((HIDDEN, D_MODEL), F32)],
    "mlp_train_step": [
        ((_TOKENS, D_MODEL), F32),
        ((_TOKENS, D_MODEL), F32),
        ((D_MODEL, HIDDEN), F32),
        ((HIDDEN, D_MODEL), F32),
    ],
    "transformer_block": [
        ((16, 2048, D_MODEL), F32),
        *[((D_MODEL, 64, 128), F32)] * 4,
        ((D_MODEL, HIDDEN), F32),
        ((HIDDEN, D_MODEL), F32),
    ],
    "embedding_loss": [((256, 2048), I32), ((256, 2048), I32), ((VOCAB, D_MODEL), F32)],
    "conv_block": [((64, 128, 128, 256), F32), ((3, 3, 256, 512), F32), ((512, 10), F32)],
}


def real(name: str, mesh: Mesh | dict | None = None, specs: dict | None = None) -> Example:
    """The zoo program `name` at real sizes (d_model 8192, vocabulary and feed-forward 32k),
    default mesh 16x16, its arguments jax.ShapeDtypeStructs: partition it, never run it."""
    if name not in REAL_SHAPES:
        raise KeyError(f"no real sizes for {name!r}; known: {sorted(REAL_SHAPES)}")
    toy = get(name, REAL_MESH if mesh is None else mesh, specs, symbolic=True)
    args = tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in REAL_SHAPES[name])
    return dataclasses.replace(toy, args=args)
