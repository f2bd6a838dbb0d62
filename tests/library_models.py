"""Decoder models from a model library, keras-hub (the Keras team's; a test-only extra that
the Makefile installs), at tiny sizes with random weights (no downloads), each with a
production layout given as a mapping from a keras variable's path to its spec. Used by
benchmarks/models.py and tests/test_library_models.py.

  llama     LlamaCausalLM: RMSNorm, rotary embeddings (split the head dim in halves,
            concatenate), grouped-query attention (8 query heads, 4 key/value), SwiGLU MLP,
            untied output head
  mixtral   MixtralCausalLM: llama's attention and a top-2 MoE of 4 SwiGLU experts,
            experts over "model"
  gpt_neox  GPTNeoXCausalLM: LayerNorm, partial rotary embeddings (a quarter of the head
            dim), parallel attention + MLP, multi-head attention with a fused q/k/v kernel,
            GELU MLP, output head tied to the embedding

Layouts as MaxText ships them (FSDP over "data" + tensor parallel over "model"): embeddings
[vocab@model, embed@data], q/k/v [embed@data, heads@model, ..], out [heads@model, ..,
embed@data], MLP in [embed@data, hidden@model], out [hidden@model, embed@data], experts
[expert@model, embed@data, hidden], tokens [batch@data]; norm scales and biases along the
embedding stay replicated.
  llama_kh  llama with the layout keras-hub itself ships (`LlamaBackbone.get_layout_map`, after
            the Gemma team's training config): q/k/v [embed@model, heads@data, ..], the output
            head replicated, the rest as above
"""

import contextlib
import os
import random
import re

os.environ["KERAS_BACKEND"] = "jax"  # read once, when keras is first imported

import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

import gspmd_viz as gv  # noqa: E402

MESH = gv.Mesh({"data": 2, "model": 4})
BATCH, SEQ = 4, 16
SIZES = {"vocabulary_size": 256, "num_layers": 2, "hidden_dim": 64, "intermediate_dim": 128}
GQA = {"num_query_heads": 8, "num_key_value_heads": 4}
MOE = {"num_experts": 4, "top_k": 2}
TOKENS = ("data", None)  # token ids and padding mask [batch@data, seq]
LOGITS = ("data", None, "model")  # [batch@data, seq, vocab@model]

FSDP_TP = {  # variable path (a regex, matched whole as keras' LayoutMap does) -> spec per dim
    r"token_embedding/embeddings": ("model", "data"),
    r"token_embedding/reverse_embeddings": ("data", "model"),
    r".*/(query|key|value|query_key_value)/kernel": ("data", "model", None),
    r".*/query_key_value/bias": ("model", None),
    r".*/attention_output/kernel": ("model", None, "data"),
    r".*/feedforward_(intermediate|gate)_dense/kernel": ("data", "model"),
    r".*/feedforward_intermediate_dense/bias": ("model",),
    r".*/feedforward_output_dense/kernel": ("model", "data"),
    r".*/sparse_feedforward_gate_dense/kernel": ("data", None),  # the router [embed, expert]
    r".*/expert_feedforward_(gate|intermediate)_dense": ("model", "data", None),
    r".*/expert_feedforward_output_dense": ("model", None, "data"),
}
FSDP_TP_FLAT_OUT = FSDP_TP | {  # GPT-NeoX's attention output kernel is [heads * head_dim, embed]
    r".*/attention_output/kernel": ("model", "data"),
}

MODELS = {  # name -> (causal LM class, backbone class, its arguments, layout: None = keras-hub's)
    "llama": ("LlamaCausalLM", "LlamaBackbone", GQA, FSDP_TP),
    "llama_kh": ("LlamaCausalLM", "LlamaBackbone", GQA, None),
    "mixtral": ("MixtralCausalLM", "MixtralBackbone", GQA | MOE, FSDP_TP),
    "gpt_neox": ("GPTNeoXCausalLM", "GPTNeoXBackbone", {"num_heads": 8}, FSDP_TP_FLAT_OUT),
}
VERSION = keras_hub.__version__


def spec_for(path: str, layout: dict) -> tuple | None:
    """The spec of the variable at `path` (None: replicated); two matching patterns are an
    error, as in keras' LayoutMap."""
    found = [spec for pattern, spec in layout.items() if re.fullmatch(pattern, path)]
    if len(found) > 1:
        raise ValueError(f"variable {path!r} matches {len(found)} layout patterns")
    return found[0] if found else None


def layout_of(name: str) -> dict:
    """Model `name`'s layout: ours, or keras-hub's own `get_layout_map` for its backbone."""
    _, backbone_class, _, layout = MODELS[name]
    if layout is not None:
        return layout
    devices = keras.distribution.list_devices()[: MESH.size]
    mesh = keras.distribution.DeviceMesh(tuple(MESH.sizes), MESH.axis_names, devices)
    backbone = getattr(keras_hub.models, backbone_class)
    shipped = backbone.get_layout_map(mesh, model_parallel_dim_name="model",
                                      data_parallel_dim_name="data")  # fmt: skip
    return {pattern: tuple(shipped[pattern].axes) for pattern in shipped}


def causal_lm(name: str, seed: int = 0, layers: int = SIZES["num_layers"]):
    """keras-hub's causal LM `name` at tiny size with `layers` decoder blocks, weights drawn
    by its own initializers."""
    if keras.config.backend() != "jax":
        raise RuntimeError(f"keras runs on {keras.config.backend()!r}: import this module first")
    lm_class, backbone_class, arguments, _ = MODELS[name]
    with _seeded(seed):
        sizes = SIZES | {"num_layers": layers}
        backbone = getattr(keras_hub.models, backbone_class)(**sizes, **arguments)
        return getattr(keras_hub.models, lm_class)(backbone=backbone, preprocessor=None)


@contextlib.contextmanager
def _seeded(seed: int):
    """keras' initializers draw from `seed`; python's and numpy's global generators, which
    keras.utils.set_random_seed seeds too, are left as they were for other tests."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    keras.utils.set_random_seed(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def _split(x, spec):
    return gv.mesh_split(x, MESH, spec) if spec else x


def build(name: str, seed: int = 0, layers: int = SIZES["num_layers"]):
    """(f, (weights, inputs)): f runs keras-hub's model (`layers` decoder blocks) on weights
    {path: array} and inputs {"token_ids", "padding_mask"} [BATCH, SEQ], every weight annotated
    with its layout; it returns the logits [BATCH, SEQ, vocabulary]."""
    model = causal_lm(name, seed, layers)
    layout = layout_of(name)
    paths = [v.path for v in model.trainable_variables]
    specs = {path: spec_for(path, layout) for path in paths}
    fixed = [v.value for v in model.non_trainable_variables]

    def f(weights, inputs):
        laid_out = [_split(weights[path], specs[path]) for path in paths]
        inputs = {key: _split(x, TOKENS) for key, x in inputs.items()}
        logits = model.stateless_call(laid_out, fixed, inputs)[0]
        return _split(logits, LOGITS)

    weights = {v.path: v.value for v in model.trainable_variables}
    return f, (weights, _inputs(np.random.default_rng(seed)))


def _inputs(rng) -> dict:
    """Random tokens; each row's padding starts somewhere in its second half."""
    token_ids = rng.integers(0, SIZES["vocabulary_size"], (BATCH, SEQ))
    lengths = rng.integers(SEQ // 2, SEQ + 1, (BATCH, 1))
    padding_mask = np.arange(SEQ)[None] < lengths
    return {
        "token_ids": jnp.asarray(token_ids, jnp.int32),
        "padding_mask": jnp.asarray(padding_mask, jnp.int32),
    }
