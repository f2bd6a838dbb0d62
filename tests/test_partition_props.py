"""Property: random chains of einsums, elementwise ops, reductions, reshapes and transposes,
with random shardings (uneven included) on random meshes of up to 8 devices, partition and
run to exactly the unpartitioned result (integers, so equality is exact)."""

import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import gspmd_viz as gv

MESHES = [{"x": 8}, {"x": 2, "y": 4}, {"x": 4, "y": 2}, {"x": 2, "y": 2, "z": 2}, {"x": 3, "y": 2}]
MESHES += [{"x": 4, "y": 1, "z": 2}]  # a size-1 axis splits nothing and sums nothing


@st.composite
def specs(draw, mesh, ndim):
    dims = [[] for _ in range(ndim)]
    for axis in draw(st.permutations(mesh.axis_names)):
        where = draw(st.integers(-1, ndim - 1))
        if where >= 0:
            dims[where].append(axis)
    return tuple(tuple(d) or None for d in dims)


@st.composite
def chains(draw):
    """(mesh, shapes of the arguments, ops): ops is a list of (name, data) steps."""
    mesh = gv.Mesh(draw(st.sampled_from(MESHES)))
    ndim = draw(st.integers(2, 3))
    shape = [draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8])) for _ in range(ndim)]
    # elementwise right away: from here on, padding holds garbage, not zeros
    args, ops = [tuple(shape)], [("annotate", draw(specs(mesh, ndim))), ("elementwise", None)]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["einsum", "elementwise", "reduce", "reshape", "transpose"]))
        if kind == "einsum":  # contract the last dim with a new weight [n, m]
            m = draw(st.sampled_from([2, 3, 4, 6]))
            args.append((shape[-1], m))
            ops.append(("einsum", (len(args) - 1, draw(specs(mesh, 2)))))
            shape[-1] = m
        elif kind == "elementwise":
            ops.append(("elementwise", None))
        elif kind == "reduce" and len(shape) > 1:
            axis = draw(st.integers(0, len(shape) - 1))
            ops.append((draw(st.sampled_from(["sum", "max"])), axis))
            shape.pop(axis)
        elif kind == "reshape" and len(shape) > 1:  # merge the first two dims
            ops.append(("reshape", None))
            shape[:2] = [shape[0] * shape[1]]
        elif kind == "transpose":
            perm = draw(st.permutations(range(len(shape))))
            ops.append(("transpose", tuple(perm)))
            shape = [shape[p] for p in perm]
        if draw(st.booleans()):
            ops.append(("annotate", draw(specs(mesh, len(shape)))))
    return mesh, args, ops


def build(mesh, ops):
    def f(x, *weights):
        for name, data in ops:
            if name == "annotate":
                x = gv.mesh_split(x, mesh, data)
            elif name == "einsum":
                w = gv.mesh_split(weights[data[0] - 1], mesh, data[1])
                x = jnp.einsum("...k,km->...m", x, w)
            elif name == "elementwise":
                x = x * 3 - (x % 5) + 1  # padding stops being zero here
            elif name == "sum":
                x = x.sum(axis=data)
            elif name == "max":
                x = x.max(axis=data)
            elif name == "reshape":
                x = x.reshape(-1, *x.shape[2:])
            elif name == "transpose":
                x = x.transpose(data)
        return x

    return f


UNEVEN = gv.Mesh({"x": 3, "y": 2})
GARBAGE_IN_PADDING = [("annotate", ("x", "y")), ("elementwise", None)]  # 7 rows over 3 devices


@settings(max_examples=30)
@given(chains())
@example((UNEVEN, [(7, 5)], [*GARBAGE_IN_PADDING, ("sum", 0)]))
@example((UNEVEN, [(7, 5)], [*GARBAGE_IN_PADDING, ("max", 0)]))
@example((UNEVEN, [(7, 5), (5, 3)], [*GARBAGE_IN_PADDING, ("einsum", (1, ("y", None)))]))
def test_partitioned_equals_unpartitioned(case):
    mesh, shapes, ops = case
    rng = np.random.default_rng(0)
    args = [jnp.asarray(rng.integers(-5, 6, size=s), jnp.int32) for s in shapes]
    f = build(mesh, ops)
    spmd = gv.partition(gv.propagate(gv.trace(f, *args)))
    want = spmd.program.unpartitioned(*args)
    np.testing.assert_array_equal(spmd(*args), want, err_msg=spmd.per_device_text())
