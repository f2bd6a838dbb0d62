"""The ledger at two sizes (viz/ledger/sizes.py) and the zoo at real sizes (examples.real):
with FSDP-style annotations the MLP's first matmul moves its activations at a few tokens and
gathers its weight at many, flipping where the two ways' wire bytes (closed forms) cross."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import gspmd_viz as gv
from gspmd_viz.viz.ledger.sizes import moves_by_equation, size_change_text, size_changes
from gspmd_viz.zoo import examples

FSDP = {"x": ("x", None), "w1": ("x", "y"), "w2": ("y", "x")}  # weights stored 256 ways
D, H, N = examples.D_MODEL, examples.HIDDEN, 16  # N: devices on each mesh axis


def _partition(ex):
    return gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))


def _at_tokens(tokens: int):
    ex = examples.real("mlp", specs=FSDP)
    args = (jax.ShapeDtypeStruct((tokens, D), jnp.float32), *ex.args[1:])
    return _partition(dataclasses.replace(ex, args=args))


def _ring(local_bytes: float) -> float:  # all-gather's result, all-to-all / reduce-scatter operand
    return (N - 1) / N * local_bytes


def _ways(tokens: int) -> dict[str, float]:
    """Per-device wire bytes of x @ w1 ([B/x, D] @ [D/x, H/y]) each way, f32."""
    gather_weight = _ring(4 * D * H / N)  # w1 -> [D, H/y]
    move_activations = _ring(4 * tokens / N * D) + _ring(4 * tokens * H / N)  # x to [B, D/x],
    return {"weight": gather_weight, "activations": move_activations}  # sums to [B/x, H/y]


@pytest.mark.parametrize("tokens", [16, 4096, 6400, 6656, 8192])
def test_the_first_matmul_moves_whichever_side_is_cheaper(tokens):
    spmd = _at_tokens(tokens)
    moved = moves_by_equation(spmd)[3]  # eqn 3: x @ w1
    ways = _ways(tokens)
    cheaper = min(ways, key=ways.get)
    kinds = sorted(m.what.split(" of ")[0] for m in moved)
    expected = {"weight": ["all-gather(x)"], "activations": ["all-to-all(x)", "reduce-scatter(x)"]}
    assert kinds == expected[cheaper]
    assert sum(m.wire_bytes for m in moved) == pytest.approx(ways[cheaper])


def test_the_flip_is_where_the_closed_forms_cross():
    crossing = D * H / (D + H)  # 6553.6 tokens: gather_weight == move_activations
    below, above = _ways(int(crossing)), _ways(int(crossing) + 1)
    assert below["activations"] < below["weight"] and above["activations"] > above["weight"]


def test_size_changes_name_the_equation_that_flipped():
    toy = _partition(examples.get("mlp", mesh=examples.REAL_MESH, specs=FSDP, symbolic=True))
    real = _partition(examples.real("mlp", specs=FSDP))
    (where, small, large), *rest = size_changes(toy, real)
    assert where == "eqn 3 dot_general"
    # eqn 5 flips too, from propagation: its result's tokens (from h) and model dim (from w2)
    # both want x; w2 is bigger at toy sizes, the two tie at real ones and h, the earlier
    # operand, wins the tie (as in Shardy: test_propagate_random_xla)
    assert [r[0] for r in rest] == ["eqn 5 dot_general"]
    out = real.program.outputs[0]
    assert real.prop.sharding(out).spec == (("x",), ())
    assert [m.what for m in small] == ["all-to-all(x) of d", "reduce-scatter(x) of g"]
    assert [(m.what, m.local) for m in large] == [("all-gather(x) of e", "f32[512, 2048]")]
    assert large[0].wire_bytes == _ways(examples.REAL_SHAPES["mlp"][0][0][0])["weight"]
    text = size_change_text(toy, real)
    assert (
        "eqn 3 dot_general" in text and "large  all-gather(x) of e f32[512, 2048]: 60.0 MiB" in text
    )


def test_the_zoo_mlp_keeps_its_plan_at_real_size():
    toy = _partition(examples.get("mlp", mesh=examples.REAL_MESH, symbolic=True))
    real = _partition(examples.real("mlp"))
    assert size_changes(toy, real) == []
    assert "same collectives at both sizes" in size_change_text(toy, real)
    assert real.wire_bytes > toy.wire_bytes


@pytest.mark.parametrize("tokens", [512, 2048])  # ids [256, tokens] over x: 16 rows a device
def test_the_lookup_moves_whichever_is_cheaper_the_table_or_the_rows_it_looks_up(tokens):
    """table [V/y, D] looked up by ids [256/x, tokens]: all-gather the table over y, or look
    up the local rows and all-reduce them (XLA's toy-size plan). The matmul after needs the rows
    whole over y either way, so gathering the table is no redundant work; the bytes decide."""
    ex = examples.real("embedding_loss")
    ids = jax.ShapeDtypeStruct((256, tokens), jnp.int32)
    spmd = _partition(dataclasses.replace(ex, args=(ids, ids, ex.args[2])))
    ways = {
        "all-gather(y) of d": _ring(4 * examples.VOCAB * D),  # the table
        "all-reduce(y) of j": 2 * _ring(4 * 256 // N * tokens * D),  # the rows looked up
    }
    cheaper = min(ways, key=ways.get)
    (moved,) = moves_by_equation(spmd)[6]  # eqn 6: the lookup (gather)
    assert (moved.what, moved.wire_bytes) == (cheaper, ways[cheaper])


def test_real_sizes_are_symbolic_and_checked():
    ex = examples.real("transformer_block")
    assert [a.shape for a in ex.args][:2] == [(16, 2048, D), (D, 64, 128)]
    assert all(isinstance(a, jax.ShapeDtypeStruct) for a in ex.args)
    with pytest.raises(KeyError, match="no real sizes for 'moe'"):
        examples.real("moe")


def test_two_different_programs_are_refused():
    a = _partition(examples.get("mlp", mesh=examples.REAL_MESH, symbolic=True))
    b = _partition(examples.get("mlp_train_step", mesh=examples.REAL_MESH, symbolic=True))
    with pytest.raises(ValueError, match="one program at two sizes"):
        size_changes(a, b)
