"""A split is one slice per piece: gv.trace writes `split` that way, so a piece is a windowed
slice of its operand (split along a sharded dim: each device keeps or receives its rows by
halo exchange, no gather) and every other dim passes.
# XLA: jax lowers lax.split_p to one stablehlo.slice per piece; XLA partitions those slices
"""

from __future__ import annotations

import itertools

import jax
from jax.extend.core import ClosedJaxpr


def as_slices(operand, params) -> ClosedJaxpr:
    """The jaxpr of `split(x, sizes, axis)` written as slices, for the operand's aval."""
    axis, sizes = params["axis"], [int(n) for n in params["sizes"]]
    starts = list(itertools.accumulate(sizes, initial=0))[:-1]

    def pieces(x):  # [.., sum(sizes), ..] -> slice per piece -> [.., sizes[k], ..]
        cuts = zip(starts, sizes, strict=True)
        return [jax.lax.slice_in_dim(x, a, a + n, axis=axis) for a, n in cuts]

    aval = jax.ShapeDtypeStruct(operand.shape, operand.dtype)
    return jax.make_jaxpr(pieces)(aval)
