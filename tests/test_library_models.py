"""Whole decoder models from keras-hub (tests/library_models.py: llama, mixtral, gpt_neox at
tiny sizes, MaxText's FSDP + tensor-parallel layouts on data=2 x model=4, and llama with
keras-hub's own layout) partitioned by gv.partition: each equals the unpartitioned program,
and every output's sharding is XLA's. benchmarks/models.py prints their bytes, FLOPs, memory
and times beside XLA's."""

import subprocess
import sys

import numpy as np
import pytest
from library_models import FSDP_TP, MESH, MODELS, build, causal_lm, layout_of, spec_for

import gspmd_viz as gv


@pytest.mark.parametrize("name", list(MODELS))
def test_keras_hub_model_partitions_exact_with_xlas_output_shardings(name):
    f, args = build(name)
    prog = gv.trace(f, *args)
    prop = gv.propagate(prog)
    spmd = gv.partition(prop)
    want = np.asarray(prog.unpartitioned(*args))  # [batch, seq, vocab] logits
    np.testing.assert_allclose(np.asarray(spmd(*args)), want, rtol=1e-5, atol=1e-6)
    assert prop.outputs == gv.xla.propagate_program(prog).outputs
    # the traced program is keras-hub's model: the same weights run by keras itself
    keras_run = causal_lm(name).predict_on_batch({k: np.asarray(x) for k, x in args[1].items()})
    np.testing.assert_allclose(np.asarray(keras_run), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [name for name in MODELS if MODELS[name][3] is not None])
def test_every_weight_matrix_of_each_model_has_a_layout_that_fits_it(name):
    """A path keras-hub renames would leave its weight silently replicated."""
    layout = layout_of(name)
    numpy_state = np.random.get_state()[1].copy()
    model = causal_lm(name)
    assert (np.random.get_state()[1] == numpy_state).all()  # left as other tests had it
    for v in model.trainable_variables:
        spec = spec_for(v.path, layout)
        assert spec is not None or len(v.shape) == 1, v.path
        if spec is not None:
            assert len(spec) == len(v.shape), v.path
            sizes = [MESH.shape[axis] if axis else 1 for axis in spec]
            assert all(n % size == 0 for n, size in zip(v.shape, sizes, strict=True)), v.path


def test_keras_hubs_own_llama_layout_splits_what_its_get_layout_map_says():
    layout = layout_of("llama_kh")
    assert spec_for("transformer_layer_1/self_attention/key/kernel", layout) == (
        "model", "data", None)  # fmt: skip
    assert spec_for("token_embedding/reverse_embeddings", layout) is None


def test_a_path_that_two_layout_patterns_match_is_an_error():
    with pytest.raises(ValueError, match="matches 2 layout patterns"):
        spec_for("layer/query/kernel", FSDP_TP | {r".*query.*": ("model", None, None)})


def test_importing_keras_hub_leaves_jax_config_as_it_was():
    """keras must not change a jax setting (x64, matmul precision, ...) that other tests in
    the same pytest worker rely on: checked in a fresh interpreter, a model built too."""
    script = (
        "import os\n"
        "os.environ['KERAS_BACKEND'] = 'jax'\n"
        "import jax\n"
        "before = dict(jax.config.values)\n"
        "import keras_hub\n"
        "keras_hub.models.LlamaBackbone(vocabulary_size=8, num_layers=1, num_query_heads=2,\n"
        "    num_key_value_heads=1, hidden_dim=8, intermediate_dim=8)\n"
        "after = dict(jax.config.values)\n"
        "changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}\n"
        "assert not changed, changed\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
