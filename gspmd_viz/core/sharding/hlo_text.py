"""GSPMD's HloSharding text, to and from a spec on a mesh (Sharding.to_hlo / from_hlo use it).

`{devices=[2,1,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}`: the bracket gives shards per tensor
dim (plus one trailing dim of replicas when partially tiled); the device ids fill that tile
array in C order. The iota form `<=[4,2]T(1,0)` means: arange, reshape to [4,2], transpose by
(1,0), reshape to the tile dims.  # XLA: HloSharding::ToString / TileAssignment
"""

import itertools
import re
from collections.abc import Sequence

import numpy as np

from gspmd_viz.core.sharding.mesh import Mesh


def _tiles(mesh: Mesh, spec, ndim: int) -> tuple[int, ...]:
    """Shards per tensor dim."""
    return tuple(
        int(np.prod([mesh.axis_size(a) for a in (spec[d] if d < len(spec) else ())], dtype=int))
        for d in range(ndim)
    )


def tile_assignment(mesh: Mesh, spec, ndim: int) -> np.ndarray:
    """Device ids laid out as [shards of dim 0, ..., shards of dim n-1, replicas]."""
    tiled = tuple(a for axes in spec for a in axes)
    rest = tuple(a for a in mesh.axis_names if a not in tiled)
    order = [mesh.axis_index(a) for a in tiled + rest]
    replicas = int(np.prod([mesh.axis_size(a) for a in rest], dtype=int))
    return mesh.device_ids.transpose(order).reshape(*_tiles(mesh, spec, ndim), replicas)


def spec_to_hlo(mesh: Mesh, spec, ndim: int) -> str:
    """HloSharding text of a spec (per dim, the axes splitting it) on `mesh`."""
    tiles = tile_assignment(mesh, spec, ndim)
    if tiles.shape[-1] == mesh.size:
        return "{replicated}"
    if tiles.shape[-1] == 1:
        tiles = tiles[..., 0]
    dims = ",".join(str(n) for n in tiles.shape)
    ids = ",".join(str(d) for d in tiles.ravel())
    suffix = " last_tile_dim_replicate" if tiles.ndim > ndim else ""
    return f"{{devices=[{dims}]{ids}{suffix}}}"


_TILED = re.compile(
    r"^\{devices=\[(?P<dims>[0-9,]+)\](?P<ids>[0-9,]+|<=\[[0-9,]+\](?:T\([0-9,]+\))?)"
    r"(?P<tail>(?:\s+\S.*)?)\}$"
)
_IOTA = re.compile(r"^<=\[(?P<shape>[0-9,]+)\](?:T\((?P<perm>[0-9,]+)\))?$")


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",")]


def _device_ids(ids: str, dims: list[int]) -> np.ndarray:
    iota = _IOTA.match(ids)
    if iota is None:
        flat = np.array(_ints(ids))
    else:
        shape = _ints(iota["shape"])
        perm = _ints(iota["perm"]) if iota["perm"] else list(range(len(shape)))
        if sorted(perm) != list(range(len(shape))):
            raise ValueError(f"iota transpose T({iota['perm']}) is not a permutation of {shape}")
        flat = np.arange(int(np.prod(shape))).reshape(shape).transpose(perm).ravel()
    if flat.size != int(np.prod(dims)):
        raise ValueError(f"HloSharding lists {flat.size} devices for a tile array of shape {dims}")
    return flat.reshape(dims)


def _replicated_last(tail: str) -> bool:
    tail = re.sub(r"metadata=\{.*\}", "", tail).strip()
    if tail in ("", None):
        return False
    if tail in ("last_tile_dim_replicate", "last_tile_dims={replicated}"):
        return True
    raise ValueError(
        f"unsupported HloSharding attribute {tail!r} (manual subgroups are not modelled)"
    )


def parse_tile_assignment(text: str) -> np.ndarray | None:
    """Tile array [tiles..., replicas] from HloSharding text; None for `{replicated}`."""
    text = " ".join(text.split())
    if text == "{replicated}":
        return None
    if text.startswith("{maximal") or text.startswith("{manual"):
        raise ValueError(
            f"{text} places the whole tensor on one device or marks it manual; "
            "a mesh sharding cannot express that"
        )
    match = _TILED.match(text)
    if match is None:
        raise ValueError(
            f"cannot read HloSharding {text!r}: expected '{{replicated}}' or "
            "'{devices=[d0,d1,...]ids [last_tile_dim_replicate]}'"
        )
    dims = _ints(match["dims"])
    tiles = _device_ids(match["ids"], dims)
    return tiles if _replicated_last(match["tail"] or "") else tiles[..., None]


def _same_layout(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal tile arrays, where devices within one replica group may come in any order."""
    return a.shape == b.shape and np.array_equal(np.sort(a, axis=-1), np.sort(b, axis=-1))


def spec_from_hlo(mesh: Mesh, text: str) -> tuple:
    """The spec on `mesh` whose device layout equals this HloSharding text."""
    if not isinstance(text, str):
        raise TypeError(f"HloSharding text must be a string, got {type(text).__name__}")
    tiles = parse_tile_assignment(text)
    if tiles is None:
        return ()
    if sorted(tiles.ravel().tolist()) != list(range(mesh.size)):
        raise ValueError(
            f"{text} uses {tiles.size} device ids; {mesh!r} needs devices "
            f"0..{mesh.size - 1}, each once"
        )
    ndim = tiles.ndim - 1
    for spec in candidate_specs(mesh, tiles.shape[:-1]):
        if _same_layout(tile_assignment(mesh, spec, ndim), tiles):
            return spec
    raise ValueError(
        f"{text} is not expressible on {mesh!r}: no assignment of mesh axes to tensor dims "
        "puts the devices in that order"
    )


def candidate_specs(mesh: Mesh, tiles: Sequence[int]):
    """Every spec on `mesh` whose per-dim shard counts equal `tiles` (size-1 axes unused)."""
    axes = [a for a in mesh.axis_names if mesh.axis_size(a) > 1]

    def assign(dim: int, free: tuple[str, ...]):
        if dim == len(tiles):
            yield ()
            return
        for k in range(len(free) + 1):
            for chosen in itertools.permutations(free, k):
                if int(np.prod([mesh.axis_size(a) for a in chosen], dtype=int)) != tiles[dim]:
                    continue
                rest = tuple(a for a in free if a not in chosen)
                for tail in assign(dim + 1, rest):
                    yield (chosen, *tail)

    yield from assign(0, tuple(axes))
