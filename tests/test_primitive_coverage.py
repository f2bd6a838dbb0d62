"""The primitive coverage table is current, and a primitive with no rule runs replicated,
correctly, with a note in the ledger (spmd.notes)."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from primitive_coverage import table

import gspmd_viz as gv
from gspmd_viz.core.rules.registry import is_known

MESH = gv.Mesh({"x": 2, "y": 4})


def test_the_coverage_table_lists_what_jax_emits_today():
    written = (Path(__file__).parent / "primitive_coverage.md").read_text()
    assert written == table(), "regenerate: python tests/primitive_coverage.py > ...md"


def _split(x):
    return gv.mesh_split(x, MESH, ("x", "y"))


UNRULED = {  # primitive -> a program that emits it on split operands
    "rev": lambda x: jnp.flip(_split(x), 0) * 2,
    "bitcast_convert_type": lambda x: jnp.copysign(_split(x), -1.0),
    "bessel_i0e": lambda x: jnp.i0(_split(x)),
    "scatter-add": lambda x: _split(x).at[jnp.array([0, 3, 3])].add(1.0),
    "tile": lambda x: jnp.tile(_split(x), (2, 1)) + 1,
}


@pytest.mark.parametrize("primitive", sorted(UNRULED))
def test_a_primitive_without_a_rule_is_replicated_correctly_and_noted(primitive):
    x = jnp.asarray(np.random.default_rng(1).standard_normal((8, 8)), jnp.float32)
    spmd = gv.partition(gv.propagate(gv.trace(UNRULED[primitive], x)))
    assert primitive in {e.primitive for e in spmd.program.equations}
    np.testing.assert_allclose(spmd(x), spmd.program.unpartitioned(x), rtol=2e-5, atol=2e-5)
    if not is_known(primitive):
        assert any(f"{primitive!r}" in n and "replicated" in n for n in spmd.notes)
