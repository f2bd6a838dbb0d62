"""Running per-device code for real: jax.shard_map on the mesh's CPU devices.

Uneven shards: every local buffer has the padded `shard_shape`; the global array handed to
shard_map is padded on the right to `shard_shape * tiles`, and the result is sliced back.
Pending sums (`unreduced` axes) travel as an extra leading dim split over those axes.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from gspmd_viz.core.devices import require_devices
from gspmd_viz.core.sharding import Sharding, spec_entry

# --- one function per step kind (inside shard_map) -----------------------------------------


def _chunk(sharding: Sharding, device: int, ndim: int) -> tuple[int, ...]:
    return tuple(sharding.shard_index(device, d) for d in range(ndim))


def permute_pairs(src: Sharding, dst: Sharding, shape) -> list[tuple[int, int, tuple]]:
    """(source, target, offsets): every device receives its dst shard from one device whose
    src shard contains it (each device sends exactly once: holders and askers of a src shard
    are equally many), sliced at `offsets` in the sender's buffer; data stays put where it can.
    Computed only to run a plan."""
    ndim = len(shape)
    ratio = [dst.dim_shards(d) // src.dim_shards(d) for d in range(ndim)]
    local = dst.shard_shape(shape)
    pools: dict[tuple, set[int]] = {}
    for dev in range(src.mesh.size):
        pools.setdefault(_chunk(src, dev, ndim), set()).add(dev)
    pairs = []
    for dev in range(dst.mesh.size):
        want = _chunk(dst, dev, ndim)
        pool = pools[tuple(i // r for i, r in zip(want, ratio, strict=True))]
        source = dev if dev in pool else min(pool)
        pool.remove(source)
        offsets = tuple((i % r) * k for i, r, k in zip(want, ratio, local, strict=True))
        pairs.append((source, dev, offsets))
    return pairs


def _axis_index(axes):
    """Linear index of this device along `axes` (major first), as jax numbers them."""
    return jax.lax.axis_index(tuple(axes)) if axes else 0


def fit_dim(x, dim: int, size: int):
    """Pad with zeros or trim `dim` to `size` (right side)."""
    have = x.shape[dim]
    if have > size:
        return jax.lax.slice_in_dim(x, 0, size, axis=dim)
    if have < size:
        pad = [(0, 0)] * x.ndim
        pad[dim] = (0, size - have)
        return jnp.pad(x, pad)
    return x


def _local(step, side: str, shape):
    return getattr(step, side).shard_shape(shape)


def _slice(step, x, shape):
    (d,) = step.dims
    size = _local(step, "after", shape)[d]
    n = step.after.dim_shards(d) // step.before.dim_shards(d)
    x = fit_dim(x, d, max(x.shape[d], n * size))
    # [k] -> dynamic_slice(axes) -> [k / n]
    return jax.lax.dynamic_slice_in_dim(x, _axis_index(step.axes) * size, size, axis=d)


def _all_gather(step, x, shape):
    (d,) = step.dims
    # [k] -> all_gather(axes) -> [n k] -> trim to the new shard size
    x = jax.lax.all_gather(x, step.axes, axis=d, tiled=True)
    return fit_dim(x, d, _local(step, "after", shape)[d])


def _reduce_scatter(step, x, shape):
    (d,) = step.dims
    x = fit_dim(x, d, step.collective.shape[d])
    # [n k'] -> psum_scatter(axes) -> [k']
    return jax.lax.psum_scatter(x, step.axes, scatter_dimension=d, tiled=True)


def _all_reduce(step, x, shape):
    return jax.lax.psum(x, step.axes)


def _all_to_all(step, x, shape):
    split, concat = step.dims
    x = fit_dim(x, split, step.collective.shape[split])
    # [.., k_concat, .., n k_split, ..] -> all_to_all(axes) -> [.., n k_concat, .., k_split, ..]
    x = jax.lax.all_to_all(x, step.axes, split, concat, tiled=True)
    return fit_dim(x, concat, _local(step, "after", shape)[concat])


def _collective_permute(step, x, shape):
    mesh = step.before.mesh
    pairs = permute_pairs(step.before, step.after, shape)
    offsets = np.zeros((mesh.size, len(shape)), np.int32)
    for source, _, offset in pairs:
        offsets[source] = offset
    mine = jnp.asarray(offsets)[jax.lax.axis_index(mesh.axis_names)]
    # [k_src] -> slice out what my target needs -> [k_dst] -> ppermute -> [k_dst]
    x = jax.lax.dynamic_slice(x, tuple(mine), step.after.shard_shape(shape))
    return jax.lax.ppermute(x, mesh.axis_names, [(s, t) for s, t, _ in pairs])


_RUN = {
    "slice": _slice,
    "all-gather": _all_gather,
    "reduce-scatter": _reduce_scatter,
    "all-reduce": _all_reduce,
    "all-to-all": _all_to_all,
    "collective-permute": _collective_permute,
}


def apply_plan(plan, x):
    """Run a ReshardPlan on this device's local buffer (call inside shard_map)."""
    for step in plan.steps:
        x = _RUN[step.kind](step, x, plan.shape)
    return x


# --- global <-> per-device buffers -----------------------------------------------------------


def padded_shape(sharding: Sharding, shape) -> tuple[int, ...]:
    """The global shape whose even split gives every device its padded shard."""
    tiles = sharding.tiles(len(shape))
    return tuple(k * t for k, t in zip(sharding.shard_shape(shape), tiles, strict=True))


def pad_global(x, sharding: Sharding):
    target = padded_shape(sharding, x.shape)
    return jnp.pad(x, [(0, t - n) for n, t in zip(x.shape, target, strict=True)])


def unpad_global(x, shape):
    return x[tuple(slice(0, n) for n in shape)]


def pending_axes(sharding: Sharding) -> tuple[str, ...]:
    """Unreduced axes in mesh order: the leading dim that carries partial sums."""
    return tuple(a for a in sharding.mesh.axis_names if a in sharding.unreduced)


def in_spec(sharding: Sharding) -> PartitionSpec:
    """shard_map spec of a value; pending sums get a leading dim split over their axes."""
    entries = [spec_entry(axes) for axes in sharding.spec]
    pending = pending_axes(sharding)
    return PartitionSpec(pending, *entries) if pending else PartitionSpec(*entries)


def device_buffers(fn, mesh, in_shardings, out_sharding, *args):
    """Run `fn` per device; return {device id: its local output buffer} (for tests)."""
    jmesh = mesh.to_jax()
    everyone = PartitionSpec(mesh.axis_names)

    def body(*locals_):
        locals_ = [x[0] if s.unreduced else x for x, s in zip(locals_, in_shardings, strict=True)]
        return fn(*locals_)[None]

    run = jax.shard_map(
        body,
        mesh=jmesh,
        in_specs=tuple(in_spec(s) for s in in_shardings),
        out_specs=everyone,
        check_vma=False,
    )
    out = np.asarray(jax.jit(run)(*args))
    return {d: out[d] for d in range(mesh.size)}


# --- a whole per-device program ----------------------------------------------------------------


def _runner(spmd):
    """jit(shard_map(body)) over padded global arrays, built once per SPMDProgram."""
    prop, program = spmd.prop, spmd.program
    in_sh = [prop.sharding(v) for v in program.inputs]
    outs = [(i, name) for i, name in enumerate(spmd.outputs) if isinstance(name, str)]
    out_sh = [prop.sharding(program.outputs[i]) for i, _ in outs]

    from gspmd_viz.core.combine import combinable, combined_gather

    groups, alias = combinable(spmd.instructions, [v.name for v in program.inputs])

    def body(*locals_):
        env = dict(zip((v.name for v in program.inputs), locals_, strict=True))
        for group in groups:
            if len(group) > 1:
                combined_gather(group, env, alias)
            else:
                group[0].run(env)
        return tuple(env[name] for _, name in outs)

    mapped = jax.shard_map(
        body,
        mesh=spmd.mesh.to_jax(),
        in_specs=tuple(in_spec(s) for s in in_sh),
        out_specs=tuple(in_spec(s) for s in out_sh),
        check_vma=False,
    )

    @jax.jit
    def run(*flat):
        padded = [pad_global(x, s) for x, s in zip(flat, in_sh, strict=True)]
        results = mapped(*padded)
        shapes = [program.outputs[i].shape for i, _ in outs]
        return [unpad_global(r, shape) for r, shape in zip(results, shapes, strict=True)]

    return run, outs


def run_spmd(spmd, *args):
    """Run the per-device program on the mesh's devices; returns global arrays like f(*args)."""
    if spmd._runner is None:
        require_devices(spmd.mesh.size, f"running on {spmd.mesh!r}")
        spmd._runner = _runner(spmd)
    run, outs = spmd._runner
    flat = spmd.program.flatten_args(*args)
    for v, x in zip(spmd.program.inputs, flat, strict=True):
        if tuple(np.shape(x)) != v.shape:
            raise ValueError(
                f"argument {v.name} has shape {tuple(np.shape(x))}, but the program was traced "
                f"and partitioned for {v.type_text()}: partition again for new shapes"
            )
    results = iter(run(*flat))
    values = [next(results) if isinstance(o, str) else jnp.asarray(o.value) for o in spmd.outputs]
    return jax.tree.unflatten(spmd.program.out_tree, values)
