"""A slice of a pad is a pad of a slice: slice the real elements first, then pad with what the
slice keeps of the padding. Split along a padded dim, the padded value would be resharded
whole; the rewrite moves only the elements the slice keeps.
# XLA: AlgebraicSimplifier::HandleSlice (a slice of a pad becomes a pad of a slice)
"""

from __future__ import annotations

import jax
from jax.extend.core import ClosedJaxpr


def _kept(cfg, starts, limits, shape):
    """Per dim: (real start, real limit, new low pad, new high pad), or None if some dim keeps
    no real element (or the pad has interior padding)."""
    out = []
    for (lo, _, interior), s, e, n in zip(cfg, starts, limits, shape, strict=True):
        a, b = min(max(s - lo, 0), n), min(max(e - lo, 0), n)
        if interior or a >= b:
            return None
        out.append((a, b, max(lo - s, 0), max(e - lo - n, 0)))
    return out


def rewrite(pad, slice_params) -> tuple[ClosedJaxpr, tuple] | None:
    """For `slice(pad(x, v))`: the jaxpr of `pad(slice(x), v)` and its arguments (x, v), or
    None where the rewrite does not apply (strides, interior padding, nothing real kept)."""
    strides = slice_params.get("strides")
    if pad is None or pad.primitive != "pad" or any(s != 1 for s in strides or ()):
        return None
    x, value = pad.inputs
    cfg = pad.params["padding_config"]
    kept = _kept(cfg, slice_params["start_indices"], slice_params["limit_indices"], x.shape)
    if kept is None:
        return None
    starts, limits = [k[0] for k in kept], [k[1] for k in kept]
    new_cfg = [(k[2], k[3], 0) for k in kept]

    def padded_slice(x, v):  # [.., n, ..] -> slice -> [.., b - a, ..] -> pad -> result
        return jax.lax.pad(jax.lax.slice(x, starts, limits), v, new_cfg)

    avals = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in (x, value)]
    return jax.make_jaxpr(padded_slice)(*avals), (x, value)
