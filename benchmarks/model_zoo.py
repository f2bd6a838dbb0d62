"""Three decoder model families in plain jax, tiny sizes, random weights, with the layouts
production code ships for them (see benchmarks/models.py). Each block follows the named
Hugging Face transformers implementation (modeling_llama, modeling_mixtral, modeling_gptj)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import gspmd_viz as gv

MESH = gv.Mesh({"data": 2, "model": 4})
B, S, D, H, KV, DH, F, V, E, LAYERS = 4, 16, 64, 8, 4, 16, 128, 256, 4, 2
LAYOUT = {  # parameter -> spec per dim (MaxText's fsdp + tensor rules)
    "embed": ("model", "data"),
    "head": ("data", "model"),
    "wq": ("data", "model", None),
    "wk": ("data", "model", None),
    "wv": ("data", "model", None),
    "wo": ("model", None, "data"),
    "w_gate": ("data", "model"),
    "w_up": ("data", "model"),
    "w_down": ("model", "data"),
    "router": ("data", None),
    "e_gate": ("model", "data", None),
    "e_up": ("model", "data", None),
    "e_down": ("model", None, "data"),
}
ACTS = ("data", None, None)  # the residual stream [batch@data, seq, embed]


def _split(x, spec):
    return gv.mesh_split(x, MESH, spec) if spec else x


def _laid_out(params):
    """Every parameter annotated with its layout (norm scales stay replicated)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, w: _split(w, LAYOUT.get(path[-1].key)), params
    )


def rms_norm(x, w):  # LlamaRMSNorm
    x32 = x.astype(jnp.float32)
    return w * (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6))


def layer_norm(x, w):  # GPTJ's nn.LayerNorm (no bias, for brevity)
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    return w * (x - mean) * jax.lax.rsqrt(var + 1e-5)


def rotate_half(x):  # modeling_llama.rotate_half: split the head dim in halves
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


def llama_rope(q, k, dim):
    inv_freq = 1.0 / (10000 ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    freqs = jnp.arange(S, dtype=jnp.float32)[:, None] * inv_freq[None]  # [S, dim/2]
    emb = jnp.concatenate([freqs, freqs], -1)[None, :, None, :]  # [1, S, 1, dim]
    cos, sin = jnp.cos(emb), jnp.sin(emb)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def rotate_every_two(x):  # modeling_gptj.rotate_every_two: interleaved pairs, stacked back
    x1, x2 = x[..., ::2], x[..., 1::2]
    return jnp.stack((-x2, x1), axis=-1).reshape(x.shape)


def gptj_rope(x, rot):
    inv_freq = 1.0 / (10000 ** (jnp.arange(0, rot, 2, dtype=jnp.float32) / rot))
    freqs = jnp.arange(S, dtype=jnp.float32)[:, None] * inv_freq[None]  # [S, rot/2]
    sin = jnp.repeat(jnp.sin(freqs), 2, axis=-1)[None, :, None, :]  # duplicate_interleave
    cos = jnp.repeat(jnp.cos(freqs), 2, axis=-1)[None, :, None, :]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    return jnp.concatenate([x_rot * cos + rotate_every_two(x_rot) * sin, x_pass], -1)


def attention(x, p, rope):
    """[B, S, D] -> [B, S, D]: q over H heads, k and v over KV heads (repeat_kv), causal."""
    q = jnp.einsum("bsd,dhk->bshk", x, p["wq"])
    k = jnp.einsum("bsd,dhk->bshk", x, p["wk"])
    v = jnp.einsum("bsd,dhk->bshk", x, p["wv"])
    q, k = rope(q, k)
    groups = q.shape[2] // k.shape[2]
    k, v = (jnp.repeat(t, groups, axis=2) for t in (k, v))  # repeat_kv
    scores = jnp.einsum("bshk,bthk->bhst", q, k) / np.sqrt(DH)
    causal = jnp.tril(jnp.ones((S, S), bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    out = jnp.einsum("bhst,bthk->bshk", probs, v)
    return jnp.einsum("bshk,hkd->bsd", out, p["wo"])


def swiglu(x, p):  # LlamaMLP
    gate = jax.nn.silu(x @ p["w_gate"])
    return (gate * (x @ p["w_up"])) @ p["w_down"]


def moe(x, p, top_k=2):
    """MixtralSparseMoeBlock, dense dispatch: softmax router, top-2 renormalised, every
    expert's SwiGLU weighted by its combine weight. [B, S, D] -> [B, S, D]"""
    probs = jax.nn.softmax(x @ p["router"], axis=-1)  # [B, S, E]
    weights, chosen = jax.lax.top_k(probs, top_k)
    weights = weights / weights.sum(-1, keepdims=True)
    combine = jnp.sum(jax.nn.one_hot(chosen, E) * weights[..., None], axis=-2)  # [B, S, E]
    gate = jax.nn.silu(jnp.einsum("bsd,edf->bsef", x, p["e_gate"]))
    hidden = gate * jnp.einsum("bsd,edf->bsef", x, p["e_up"])
    out = jnp.einsum("bsef,efd->bsed", hidden, p["e_down"])
    return jnp.einsum("bsed,bse->bsd", out, combine)


def _decoder(params, tokens, block, norm):
    params = _laid_out(params)
    tokens = _split(tokens, ("data", None))
    h = _split(jnp.take(params["embed"], tokens, axis=0), ACTS)  # [B, S, D]
    for layer in params["layers"]:
        h = _split(block(h, layer), ACTS)
    logits = norm(h, params["final_norm"]) @ params["head"]  # [B, S, V]
    return _split(logits, ("data", None, "model"))


def llama_block(h, p, mlp=swiglu):
    rope = functools.partial(llama_rope, dim=DH)
    h = h + attention(rms_norm(h, p["attn_norm"]), p, rope)
    return h + mlp(rms_norm(h, p["mlp_norm"]), p)


def gptj_block(h, p):
    x = layer_norm(h, p["attn_norm"])
    rope = lambda q, k: (gptj_rope(q, DH // 2), gptj_rope(k, DH // 2))  # noqa: E731
    mlp = jax.nn.gelu(x @ p["w_up"]) @ p["w_down"]
    return h + attention(x, p, rope) + mlp


def _params(rng, kv: int, moe_layer: bool, layers: int):
    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape) * 0.02, jnp.float32)

    def layer():
        p = {"wq": w(D, H, DH), "wk": w(D, kv, DH), "wv": w(D, kv, DH), "wo": w(H, DH, D)}
        p |= {"attn_norm": jnp.ones(D), "mlp_norm": jnp.ones(D)}
        if moe_layer:
            return p | {"router": w(D, E), "e_gate": w(E, D, F), "e_up": w(E, D, F),
                        "e_down": w(E, F, D)}  # fmt: skip
        return p | {"w_gate": w(D, F), "w_up": w(D, F), "w_down": w(F, D)}

    stack = [layer() for _ in range(layers)]
    return {"embed": w(V, D), "head": w(D, V), "final_norm": jnp.ones(D), "layers": stack}


MODELS = {  # name -> (block, final norm, kv heads, MoE)
    "llama": (llama_block, rms_norm, KV, False),
    "mixtral": (functools.partial(llama_block, mlp=moe), rms_norm, KV, True),
    "gptj": (gptj_block, layer_norm, H, False),
}


def build(name: str, seed: int = 0, layers: int = LAYERS):
    """(f, (params, tokens)) for one model family with `layers` decoder blocks."""
    block, norm, kv, moe_layer = MODELS[name]
    rng = np.random.default_rng(seed)
    params = _params(rng, kv, moe_layer, layers)
    tokens = jnp.asarray(rng.integers(0, V, (B, S)), jnp.int32)
    return functools.partial(_decoder, block=block, norm=norm), (params, tokens)
