"""Which device holds which block of an array: the data behind the layout figure, as text.

A *block* is one shard of the array: a box of global indices (clipped to the array) plus the
padding that the last shard of an uneven dim carries, and the devices that hold it (more than
one when the sharding replicates over some mesh axes). Tests assert on these blocks and on the
text; the figure in arrays.py draws exactly the same blocks.
"""

import functools
from dataclasses import dataclass
from math import prod

import numpy as np

from gspmd_viz.core.sharding.sharding import Sharding, short_dtype
from gspmd_viz.units import format_bytes


@dataclass(frozen=True)
class Block:
    index: tuple[int, ...]  # which shard along each tensor dim
    start: tuple[int, ...]  # first global index along each dim
    stop: tuple[int, ...]  # one past the last real (unpadded) index along each dim
    padded_stop: tuple[int, ...]  # one past the last index including right padding
    devices: tuple[int, ...]  # every device holding this block, ascending

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(a, b) for a, b in zip(self.start, self.stop, strict=True))

    @property
    def size(self) -> int:
        return prod(b - a for a, b in zip(self.start, self.stop, strict=True))

    @property
    def padding(self) -> int:
        """Elements of padding: the padded box minus the real data."""
        return prod(b - a for a, b in zip(self.start, self.padded_stop, strict=True)) - self.size

    def box(self) -> str:
        """`[0:4, 0:6]`: the block's real extent in numpy slice notation."""
        return "[" + ", ".join(f"{a}:{b}" for a, b in zip(self.start, self.stop, strict=True)) + "]"


def shard_indices(sharding: Sharding, ndim: int) -> np.ndarray:
    """int array [devices, ndim]: the shard index each device holds along each tensor dim."""
    mesh = sharding.mesh
    coords = np.indices(mesh.sizes).reshape(len(mesh.sizes), -1)  # [mesh dims, devices]
    out = np.zeros((mesh.size, ndim), dtype=int)
    for d in range(ndim):
        for axis in sharding.dim_axes(d):
            out[:, d] = out[:, d] * mesh.axis_size(axis) + coords[mesh.axis_index(axis)]
    return out


def blocks(sharding: Sharding, shape) -> list[Block]:
    """Every distinct block of an array of `shape`, in C order of shard index."""
    return list(_blocks(sharding, tuple(int(n) for n in shape)))


@functools.lru_cache(maxsize=16)
def _blocks(sharding: Sharding, shape: tuple[int, ...]) -> tuple[Block, ...]:
    """Computed once per (sharding, shape): the figure, the bars and the text all ask (a
    4096-device layout took ~0.4 s per call device by device)."""
    tiles = sharding.tiles(len(shape))
    number = np.ravel_multi_index(shard_indices(sharding, len(shape)).T, tiles)  # [devices]
    order = np.argsort(number, kind="stable")  # devices grouped by block, ascending ids
    firsts = np.flatnonzero(np.r_[True, np.diff(number[order]) != 0])  # [blocks]
    holders = np.split(order, firsts[1:])
    index = np.array(np.unravel_index(number[order[firsts]], tiles)).T  # [blocks, ndim]
    n, k = np.array(shape), np.array(sharding.shard_shape(shape))
    start = np.minimum(n, index * k)
    stop = np.minimum(n, (index + 1) * k)
    padded = np.maximum((index + 1) * k, start)
    rows = zip(index.tolist(), start.tolist(), stop.tolist(), padded.tolist(), holders, strict=True)
    return tuple(
        Block(tuple(i), tuple(a), tuple(b), tuple(p), tuple(h.tolist())) for i, a, b, p, h in rows
    )


def device_label(devices, limit: int = 6) -> str:
    """Compact device list: `0-3`, `0,2,4,6`, or `0,8,16,…+61` when long."""
    if len(devices) == 1:  # most blocks of a big mesh: no sorting
        return str(devices[0])
    devices = sorted(devices)
    step = devices[1] - devices[0] if len(devices) > 1 else 1
    if len(devices) > 2 and step == 1 and devices == list(range(devices[0], devices[-1] + 1)):
        return f"{devices[0]}-{devices[-1]}"
    if len(devices) <= limit:
        return ",".join(str(d) for d in devices)
    shown = ",".join(str(d) for d in devices[: limit - 1])
    return f"{shown},…+{len(devices) - limit + 1}"


def summary(sharding: Sharding, shape, dtype="float32") -> str:
    """One line: type with sharding, mesh, shards x replicas, per-device allocation."""
    shape = tuple(shape)
    tiles = prod(sharding.tiles(len(shape)))
    replicas = sharding.mesh.size // tiles
    local = short_dtype(dtype) + str(list(sharding.shard_shape(shape))).replace(" ", "")
    return (
        f"{sharding.describe(shape, dtype)} on {sharding.mesh!r}: {tiles} shard(s) x "
        f"{replicas} replica(s); each device allocates {local} = "
        f"{format_bytes(sharding.shard_bytes(shape, dtype))}"
    )


def layout_text(sharding: Sharding, shape, dtype="float32", max_lines: int = 16) -> str:
    """The layout as text: a summary line, then one line per block (devices, bytes, padding)."""
    itemsize = np.dtype(dtype).itemsize
    rows = blocks(sharding, shape)
    lines = [summary(sharding, shape, dtype)]
    width = max(len(b.box()) for b in rows)
    for b in rows[:max_lines]:
        pad = f" + {format_bytes(b.padding * itemsize)} padding" if b.padding else ""
        lines.append(
            f"  block {b.box():<{width}}  on devices {device_label(b.devices):<12} "
            f"{format_bytes(b.size * itemsize)}{pad}"
        )
    if len(rows) > max_lines:
        lines.append(f"  … {len(rows) - max_lines} more blocks")
    return "\n".join(lines)
