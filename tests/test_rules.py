"""The factor-rule table: closed forms per primitive family, and structural invariants."""

import math

import jax
import jax.numpy as jnp
from hypothesis import assume, given
from hypothesis import strategies as st

import gspmd_viz as gv
from gspmd_viz.core.rules.factors import FactorRule
from gspmd_viz.core.rules.registry import is_known, rule_for
from gspmd_viz.zoo import examples


def rule_of(fn, *shapes, index=-1):
    prog = gv.trace(fn, *(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
    return rule_for(prog.equations[index])


def test_from_einsum_reads_and_prints():
    rule = FactorRule.from_einsum("b i k, b k j -> b i j", dict(b=2, i=3, k=4, j=5), reduction="k")
    assert str(rule) == "([b, i, k], [b, k, j]) -> ([b, i, j])   k: reduction"
    assert rule.factors[2].kind == "reduction" and rule.factors[2].size == 4
    merged = FactorRule.from_einsum("(i j) k -> i j k", dict(i=2, j=3, k=4))
    assert merged.operands == (((0, 1), (2,)),)


def test_dot_general_batch_free_and_contracting():
    rule = rule_of(lambda a, b: jnp.einsum("bik,bkj->bij", a, b), (2, 3, 4), (2, 4, 5))
    assert str(rule) == "([i, j, k], [i, k, l]) -> ([i, j, l])   k: reduction"


def test_reduce_sum_makes_a_reduction_factor():
    assert str(rule_of(lambda a: a.sum(1), (3, 4))) == "([i, j]) -> ([i])   j: reduction"


def test_reshape_uses_compound_factors():
    assert str(rule_of(lambda a: a.reshape(2, 3, 4), (6, 4))) == "([(i j), k]) -> ([i, j, k])"
    assert str(rule_of(lambda a: a.reshape(12), (3, 4))) == "([i, j]) -> ([(i j)])"


def test_sort_cumsum_and_windows():
    assert "j: need_replication" in str(rule_of(lambda a: jnp.sort(a, axis=1), (3, 4)))
    assert "i: need_replication" in str(rule_of(lambda a: jnp.cumsum(a, 0), (3, 4)))
    pool = rule_of(
        lambda a: jax.lax.reduce_window(a, 0.0, jax.lax.add, (1, 2), (1, 2), "VALID"), (4, 8)
    )
    assert str(pool) == "([i, j]) -> ([i, j])   j: windowed"


def test_broadcast_in_dim_new_dims_live_in_the_result_only():
    rule = rule_of(lambda a: jnp.broadcast_to(a[:, None], (3, 5)), (3,))
    assert str(rule).endswith("([i, j])") and rule.operands[0][0] == rule.results[0][0]


def test_gather_for_an_embedding_lookup():
    prog = gv.trace(lambda t, i: jnp.take(t, i, axis=0), jnp.ones((10, 6)), jnp.ones(5, jnp.int32))
    (gather,) = [e for e in prog.equations if e.primitive == "gather"]
    assert str(rule_for(gather)) == "([i, j], [k, _]) -> ([k, j])   i: need_replication"


def test_unknown_primitive_is_conservative_and_named():
    prog = gv.trace(lambda a: jnp.fft.fft(a).real, jnp.ones(8))
    (fft,) = [e for e in prog.equations if e.primitive == "fft"]
    assert not is_known("fft")
    assert all(f.kind == "need_replication" for f in rule_for(fft).factors)
    mesh = gv.Mesh({"x": 2})
    prop = gv.propagate(prog, mesh=mesh, annotations={prog.inputs[0]: ("x",)})
    assert prop.unknown_primitives == ("fft",)


def test_every_zoo_program_has_only_known_primitives():
    for name in examples.ZOO:
        ex = examples.get(name, symbolic=True)
        prog = gv.trace(ex.fn, *ex.args)
        assert [e.primitive for e in prog.equations if not is_known(e.primitive)] == [], name


sizes = st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=1, max_size=4)


@given(sizes, st.randoms(use_true_random=False))
def test_reshape_factors_multiply_to_the_dim_sizes(shape, rnd):
    total = math.prod(shape)
    out, left = [], total
    while left > 1:  # a random factorisation of the same total
        d = rnd.choice([k for k in range(2, left + 1) if left % k == 0])
        out.append(d)
        left //= d
    assume(list(shape) != (out or [1]))
    rule = rule_of(lambda a: a.reshape(out or (1,)), tuple(shape))
    for tensor, dims in ((rule.operands[0], shape), (rule.results[0], out or [1])):
        for fs, n in zip(tensor, dims, strict=True):
            assert math.prod(rule.factors[f].size for f in fs) == n
