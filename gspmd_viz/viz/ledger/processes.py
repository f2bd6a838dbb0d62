"""The ledger across processes: which collectives cross a process (host) boundary.

With several processes the mesh takes jax's devices ordered by (process, device id)
(core.devices.available_devices), so with D devices per process, process p holds logical
devices p*D .. p*D + D - 1. A collective over mesh axes A runs in groups: the devices whose
coordinates differ only along A. It crosses a process boundary when one of its groups holds
devices of two processes; on a cluster those bytes travel the network between hosts (between
TPU slices: the data-center network, DCN), the others stay on one host's own links.
"""

from __future__ import annotations

import numpy as np

from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.spmd.run import SPMDProgram
from gspmd_viz.units import format_bytes
from gspmd_viz.viz.ledger.widget import rows


def process_of(mesh: Mesh, devices_per_process: int) -> np.ndarray:
    """int array of shape mesh.sizes: the process that holds each mesh coordinate's device."""
    if not isinstance(devices_per_process, int) or devices_per_process < 1:
        raise ValueError(f"devices_per_process must be a positive int, got {devices_per_process!r}")
    if mesh.size % devices_per_process:
        raise ValueError(
            f"{mesh!r} has {mesh.size} devices: not a whole number of processes of "
            f"{devices_per_process}"
        )
    return mesh.device_ids // devices_per_process


def crosses_processes(mesh: Mesh, axes, devices_per_process: int) -> bool:
    """True when a group of a collective over `axes` holds devices of two processes."""
    owner = process_of(mesh, devices_per_process)
    moved = [mesh.axis_index(a) for a in axes]
    # [other axes..., group axes...] -> [groups, devices in a group]
    groups = np.moveaxis(owner, moved, range(owner.ndim - len(moved), owner.ndim))
    groups = groups.reshape(-1, int(np.prod([mesh.axis_size(a) for a in axes], dtype=int)))
    return bool(np.any(groups.min(axis=1) != groups.max(axis=1)))


def process_devices_text(mesh: Mesh, devices_per_process: int) -> str:
    """One line per process: its logical devices and their mesh coordinates."""
    owner = process_of(mesh, devices_per_process)
    lines = []
    for p in range(mesh.size // devices_per_process):
        mine = [int(d) for d in mesh.device_ids.flat if owner.flat[d] == p]
        coords = ", ".join(
            "(" + ",".join(f"{k}={v}" for k, v in mesh.coords(d).items()) + ")" for d in mine
        )
        lines.append(f"process {p}: devices {mine} at {coords}")
    return "\n".join(lines)


def crossing_text(spmd: SPMDProgram, devices_per_process: int) -> str:
    """The ledger's collectives summed per kind and mesh axes, those whose groups cross a
    process boundary marked, then the bytes each device sends across it and inside one."""
    per_op = {}  # "kind(axes)" -> [count, wire bytes, crosses]
    for r in rows(spmd):
        c = r["collective"]
        entry = per_op.setdefault(
            f"{c.kind}({','.join(c.axes)})",
            [0, 0.0, crosses_processes(spmd.mesh, c.axes, devices_per_process)],
        )
        entry[0] += 1
        entry[1] += c.wire_bytes
    lines = [
        f"{n:>3} x {op:<20} {format_bytes(wire):>10}" + ("  <- crosses processes" if cross else "")
        for op, (n, wire, cross) in per_op.items()
    ]
    across = sum(wire for _, wire, cross in per_op.values() if cross)
    inside = sum(wire for _, wire, cross in per_op.values() if not cross)
    lines.append(
        f"per device: {format_bytes(across)} across processes, {format_bytes(inside)} inside one"
    )
    return "\n".join(lines)
