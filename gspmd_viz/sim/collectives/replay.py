"""Run a schedule for real: every step becomes jax.lax.ppermute calls inside jax.shard_map.

Chip i of the topology is ``devices[i]``: the caller passes the jax devices (e.g.
``jax.devices()`` after ``gv.use_cpu_devices(8)``), so sim imports nothing from the compiler
package. A step whose chips send or receive several transfers is split into rounds that are each
a (partial) permutation, as ppermute requires; all rounds of a step read the buffers as they were
when the step began, like the simulator assumes.
The result must equal jax.lax.psum (all-reduce) exactly for integer data.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.sim.collectives.algorithms import CollectiveSchedule, Step

AXIS = "chips"


def rounds(step: Step) -> list[np.ndarray]:
    """Split a step's transfers into groups with no repeated sender and no repeated receiver."""
    used_src: list[set] = []
    used_dst: list[set] = []
    groups: list[list[int]] = []
    for t, (s, d) in enumerate(zip(step.src.tolist(), step.dst.tolist(), strict=True)):
        for g in range(len(groups)):
            if s not in used_src[g] and d not in used_dst[g]:
                break
        else:
            g = len(groups)
            groups.append([])
            used_src.append(set())
            used_dst.append(set())
        groups[g].append(t)
        used_src[g].add(s)
        used_dst[g].add(d)
    return [np.array(g, np.int64) for g in groups]


def _round_tables(step, idx, n):
    """Per-device lookup tables for one round (ppermute needs the same program everywhere)."""
    tab = {k: np.zeros(n, np.int32) for k in ("send", "recv", "count", "reduce")}
    tab["send"][step.src[idx]] = step.chunk[idx]
    tab["recv"][step.dst[idx]] = step.dst_chunk[idx]
    tab["count"][step.dst[idx]] = step.count[idx]
    tab["reduce"][step.dst[idx]] = step.reduce[idx]
    perm = list(zip(step.src[idx].tolist(), step.dst[idx].tolist(), strict=True))
    return tab, perm, int(step.count[idx].max())


def _apply_round(x0, x, tab, perm, width, n_chunks):
    import jax
    import jax.numpy as jnp

    me = jax.lax.axis_index(AXIS)
    lane = jnp.arange(width)
    send = jnp.clip(jnp.asarray(tab["send"])[me] + lane, 0, n_chunks - 1)
    # [width, L] -> ppermute(perm) -> [width, L]: the chunks this device's source sent it
    got = jax.lax.ppermute(x0[send], AXIS, perm)
    valid = lane < jnp.asarray(tab["count"])[me]
    where = jnp.where(valid, jnp.asarray(tab["recv"])[me] + lane, n_chunks)  # n_chunks: dropped
    if (tab["reduce"] == 1).any():
        red = valid & (jnp.asarray(tab["reduce"])[me] == 1)
        x = x.at[jnp.where(red, where, n_chunks)].add(got, mode="drop")
    if (tab["reduce"][tab["count"] > 0] == 0).any():
        cp = valid & (jnp.asarray(tab["reduce"])[me] == 0)
        x = x.at[jnp.where(cp, where, n_chunks)].set(got, mode="drop")
    return x


def _mesh(devices, n: int):
    """A 1-D jax mesh over the first n of `devices`, one chip per device."""
    from jax.sharding import Mesh

    devices = list(devices)
    if len(devices) < n:
        raise ValueError(
            f"this runs {n} chips, one per device, but got {len(devices)} devices: "
            f"call gv.use_cpu_devices({n}) before any jax computation and pass jax.devices()"
        )
    return Mesh(np.array(devices[:n]), (AXIS,))


def run_on_devices(schedule: CollectiveSchedule, x: np.ndarray, devices) -> np.ndarray:
    """Execute `schedule` on jax `devices`. x: [n_chips, n_chunks, L] -> same shape, per chip."""
    import jax
    from jax.sharding import PartitionSpec

    n, k = schedule.topo.n_chips, schedule.n_chunks
    if x.shape[:2] != (n, k):
        raise ValueError(f"x must have shape ({n}, {k}, L), got {x.shape}")
    mesh = _mesh(devices, n)
    plan = [[_round_tables(st, idx, n) for idx in rounds(st)] for st in schedule.steps]

    def body(xb):  # xb: [1, K, L] on each device
        x = xb[0]
        for step_rounds in plan:
            x0 = x  # every round of a step reads the buffers as of the step's start
            for tab, perm, width in step_rounds:
                x = _apply_round(x0, x, tab, perm, width, k)
        return x[None]

    spec = PartitionSpec(AXIS)
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec))
    return np.asarray(f(x))


def psum_on_devices(x: np.ndarray, devices) -> np.ndarray:
    """The oracle: jax.lax.psum over all chips of x [n_chips, ...], result on every chip."""
    import jax
    from jax.sharding import PartitionSpec

    mesh = _mesh(devices, x.shape[0])
    spec = PartitionSpec(AXIS)
    f = jax.shard_map(lambda b: jax.lax.psum(b, AXIS), mesh=mesh, in_specs=spec, out_specs=spec)
    return np.asarray(jax.jit(f)(x))


def all_to_all_on_devices(x: np.ndarray, devices) -> np.ndarray:
    """The oracle for all-to-all: chip j ends with chunk j of every chip, in chip order."""
    import jax
    from jax.sharding import PartitionSpec

    mesh = _mesh(devices, x.shape[0])
    spec = PartitionSpec(AXIS)

    def body(b):  # [1, N, L]: split dim 1 across chips, concatenate on dim 1
        return jax.lax.all_to_all(b, AXIS, split_axis=1, concat_axis=1, tiled=True)

    f = jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)
    return np.asarray(jax.jit(f)(x))
