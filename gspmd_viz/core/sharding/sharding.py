"""One sharding representation: per tensor dim, the mesh axes that split it (major first).

Everything else is a derived view: PartitionSpec, GSPMD dims_mapping, HloSharding text
(the codec is hlo_text.py), the tile-assignment array, per-device slices and bytes.
"""

import contextlib
import functools
import math
from collections.abc import Iterable, Sequence

import jax
import numpy as np

from gspmd_viz.core.sharding.hlo_text import spec_from_hlo, spec_to_hlo, tile_assignment
from gspmd_viz.core.sharding.mesh import Mesh

DimAxes = tuple[str, ...]  # the mesh axes splitting one tensor dim, major to minor

_SHORT_DTYPES = {"bool": "pred", "bfloat16": "bf16"}


def as_dtype(dtype):
    """A numpy dtype, or jax's own extended dtype (a PRNG key, `key<fry>`: it has a name
    and an itemsize, and numpy cannot interpret it). Kept per dtype asked about: every
    shard's bytes ask, and jax's subtype test is slow."""
    try:
        return _KNOWN_DTYPES[dtype]
    except (KeyError, TypeError):  # not asked before, or unhashable
        pass
    found = dtype if jax.dtypes.issubdtype(dtype, jax.dtypes.extended) else np.dtype(dtype)
    with contextlib.suppress(TypeError):
        _KNOWN_DTYPES[dtype] = found
    return found


_KNOWN_DTYPES: dict = {}


def short_dtype(dtype) -> str:
    """XLA's short dtype names: float32 -> f32, int8 -> s8, uint32 -> u32, bool -> pred."""
    name = as_dtype(dtype).name
    if name in _SHORT_DTYPES:
        return _SHORT_DTYPES[name]
    for long, short in (("float", "f"), ("uint", "u"), ("int", "s"), ("complex", "c")):
        if name.startswith(long):
            return short + name[len(long) :]
    return name


def _dim_axes(entry, dim: int) -> DimAxes:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, (tuple, list)) and all(isinstance(a, str) for a in entry):
        return tuple(entry)
    raise TypeError(
        f"spec entry for tensor dim {dim} must be None, a mesh axis name or a tuple of them, "
        f"got {entry!r}"
    )


class _once:
    """functools.cached_property without its lock (Python 3.11 takes one on every first read):
    the value is worked out on the first read and kept in the instance's __dict__. Sharding's
    key and hash: the partitioner makes and hashes thousands of shardings per program."""

    def __init__(self, func):
        self.func, self.name = func, func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


def ceil_div(n: int, k: int) -> int:
    """ceil(n / k) for integers: the size of each of k shards of n (padding on the right)."""
    return -(-n // k)


class Sharding:
    """`Sharding(mesh, ("x", None), unreduced={"y"})`.

    spec[i] is None (dim i replicated), an axis name, or a tuple of axis names (major first).
    Mesh axes named nowhere hold replicas; `unreduced` axes hold pending partial sums.
    A spec shorter than the tensor's rank leaves the trailing dims replicated.
    """

    def __init__(self, mesh: Mesh, spec: Iterable = (), unreduced: Iterable[str] = ()):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"Sharding needs a gv.Mesh, got {type(mesh).__name__}")
        if isinstance(spec, str):
            raise TypeError(f"spec must be a tuple with one entry per tensor dim, e.g. ({spec!r},)")
        self.mesh = mesh
        self.spec: tuple[DimAxes, ...] = tuple(_dim_axes(e, i) for i, e in enumerate(spec))
        self.unreduced: frozenset[str] = frozenset(
            (unreduced,) if isinstance(unreduced, str) else unreduced
        )
        self._validate()

    @classmethod
    def of_axes(cls, mesh: Mesh, spec: tuple, unreduced: Iterable[str] = ()) -> "Sharding":
        """A sharding from a spec already in canonical form (a tuple of axis-name tuples, as
        the partitioner builds from a factor split): only the check that no axis repeats
        (the partitioner makes thousands per program; the full checks dominated)."""
        axes = [a for dim in spec for a in dim]
        if len(axes) != len(set(axes)) or set(unreduced) & set(axes):
            return cls(mesh, spec, unreduced)  # the full checks say what is wrong
        made = cls.__new__(cls)
        made.mesh, made.spec, made.unreduced = mesh, spec, frozenset(unreduced)
        return made

    def _validate(self) -> None:
        seen: set[str] = set()
        for axis in [a for axes in self.spec for a in axes] + sorted(self.unreduced):
            self.mesh.check_axis(axis)
            if axis in seen:
                raise ValueError(f"mesh axis {axis!r} is used twice in {self!r}")
            seen.add(axis)

    # --- identity -----------------------------------------------------------------------
    @_once
    def identity(self) -> tuple:
        """(mesh, spec, unreduced): what tells layouts apart. Size-1 mesh axes split nothing
        and sum nothing, and trailing replicated dims are implied, so neither counts."""
        ones, spec = self.mesh.unit_axes, list(self.spec)
        if ones:
            spec = [tuple(a for a in axes if a not in ones) for axes in spec]
        while spec and not spec[-1]:
            spec.pop()
        return (self.mesh, tuple(spec), self.unreduced - ones)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sharding) and self.identity == other.identity

    def __hash__(self) -> int:
        return self._hash

    @_once
    def _hash(self) -> int:  # the partitioner hashes layouts hundreds of thousands of times
        return hash(self.identity)

    def __repr__(self) -> str:
        entries = ", ".join(repr(spec_entry(axes)) for axes in self.spec)
        comma = "," if len(self.spec) == 1 else ""
        extra = f", unreduced={sorted(self.unreduced)}" if self.unreduced else ""
        return f"Sharding({self.mesh!r}, ({entries}{comma}){extra})"

    # --- structure ----------------------------------------------------------------------
    def dim_axes(self, dim: int) -> DimAxes:
        return self.spec[dim] if dim < len(self.spec) else ()

    def dim_shards(self, dim: int) -> int:
        shards = 1
        for axis in self.dim_axes(dim):
            shards *= self.mesh.axis_size(axis)
        return shards

    @property
    def tiled_axes(self) -> tuple[str, ...]:
        return tuple(a for axes in self.spec for a in axes)

    @property
    def replicated_axes(self) -> tuple[str, ...]:
        """Mesh axes along which devices hold identical data."""
        used = set(self.tiled_axes) | self.unreduced
        return tuple(a for a in self.mesh.axis_names if a not in used)

    @property
    def is_replicated(self) -> bool:
        return not self.tiled_axes and not self.unreduced

    def check_rank(self, ndim: int) -> None:
        if len(self.spec) > ndim:
            raise ValueError(
                f"spec {self.to_partition_spec()} has {len(self.spec)} entries but the tensor "
                f"has rank {ndim}"
            )

    def tiles(self, ndim: int) -> tuple[int, ...]:
        """Number of shards along each tensor dim."""
        self.check_rank(ndim)
        return tuple(self.dim_shards(d) for d in range(ndim))

    # --- per-device layout --------------------------------------------------------------
    def shard_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Local (padded) shape on every device: ceil division, padding on the right."""
        shape = tuple(shape)
        try:
            return _local_shape(self, shape)  # checked as it is made: a cached shape is good
        except TypeError:  # unhashable: not a shape
            _check_shape(shape)
            raise

    def shard_index(self, device: int, dim: int) -> int:
        """Which shard of tensor dim `dim` a device holds (mixed radix over the dim's axes)."""
        coords = self.mesh.coords(device)
        index = 0
        for axis in self.dim_axes(dim):
            index = index * self.mesh.axis_size(axis) + coords[axis]
        return index

    def device_slices(self, shape: Sequence[int]) -> dict[int, tuple[slice, ...]]:
        """{device id: slices into the global array}; right-padded shards are clipped."""
        local = self.shard_shape(shape)
        return {
            device: tuple(
                slice(min(n, i * k), min(n, (i + 1) * k))
                for n, k, i in zip(
                    shape,
                    local,
                    (self.shard_index(device, d) for d in range(len(shape))),
                    strict=True,
                )
            )
            for device in range(self.mesh.size)
        }

    def device_bytes(self, shape: Sequence[int], dtype) -> dict[int, int]:
        """Bytes of real (unpadded) data each device holds."""
        itemsize = as_dtype(dtype).itemsize
        return {
            d: itemsize * math.prod(s.stop - s.start for s in slices)
            for d, slices in self.device_slices(shape).items()
        }

    def shard_bytes(self, shape: Sequence[int], dtype) -> int:
        """Bytes of one padded local shard (what each device allocates)."""
        return _shard_bytes(self, tuple(shape), dtype)  # a list shape too (lru keys hash)

    def replica_groups(self) -> list[list[int]]:
        """Groups of devices holding the same data (one group per shard), sorted."""
        groups: dict[tuple, list[int]] = {}
        for device in range(self.mesh.size):
            coords = self.mesh.coords(device)
            key = tuple(coords[a] for a in self.mesh.axis_names if a not in self.replicated_axes)
            groups.setdefault(key, []).append(device)
        return sorted(groups.values())

    # --- text ---------------------------------------------------------------------------
    def describe(self, shape: Sequence[int], dtype) -> str:
        """Compact type with sharding: `f32[8@x, 4@(y,z)]`, pending sums as `{sum over y}`."""
        self.check_rank(len(shape))
        dims = []
        for d, n in enumerate(shape):
            axes = self.dim_axes(d)
            dims.append(f"{n}@{axes_text(axes)}" if axes else f"{n}")
        pending = f"{{sum over {','.join(sorted(self.unreduced))}}}" if self.unreduced else ""
        return f"{short_dtype(dtype)}[{', '.join(dims)}]{pending}"

    # --- other notations ----------------------------------------------------------------
    def to_partition_spec(self):
        from jax.sharding import PartitionSpec

        entries = [spec_entry(axes) for axes in self.spec]
        if self.unreduced:
            return PartitionSpec(*entries, unreduced=set(self.unreduced))
        return PartitionSpec(*entries)

    def to_named_sharding(self):
        from jax.sharding import NamedSharding

        # jax accepts unreduced axes only on Explicit mesh axes; the rest stay Auto (GSPMD).
        return NamedSharding(self.mesh.to_jax(self.unreduced), self.to_partition_spec())

    def dims_mapping(self, ndim: int) -> list[int]:
        """GSPMD's mesh_split dims_mapping: the mesh dim splitting each tensor dim, or -1."""
        self.check_rank(ndim)
        mapping = []
        for d in range(ndim):
            axes = self.dim_axes(d)
            if len(axes) > 1:
                raise ValueError(
                    f"tensor dim {d} is split by several mesh axes {axes}; a GSPMD dims_mapping "
                    "names one mesh dim per tensor dim"
                )
            mapping.append(self.mesh.axis_index(axes[0]) if axes else -1)
        return mapping

    @classmethod
    def from_dims_mapping(cls, mesh: Mesh, dims_mapping: Sequence[int]) -> "Sharding":
        """GSPMD `mesh_split(tensor, device_mesh, dims_mapping)`: -1 means replicated."""
        spec = []
        for d, m in enumerate(dims_mapping):
            if not isinstance(m, (int, np.integer)) or not -1 <= m < len(mesh.sizes):
                raise ValueError(
                    f"dims_mapping[{d}] = {m!r}: must be -1 or a mesh dim "
                    f"in 0..{len(mesh.sizes) - 1}"
                )
            spec.append(None if m < 0 else mesh.axis_names[m])
        return cls(mesh, spec)

    @classmethod
    def from_partition_spec(cls, mesh: Mesh, pspec) -> "Sharding":
        entries = getattr(pspec, "partitions", None)  # jax refuses *pspec when unreduced is set
        return cls(
            mesh, tuple(pspec) if entries is None else entries, getattr(pspec, "unreduced", ())
        )

    @classmethod
    def from_named_sharding(cls, named) -> "Sharding":
        return cls.from_partition_spec(Mesh.from_jax(named.mesh), named.spec)

    def tile_assignment(self, ndim: int) -> np.ndarray:
        """Device ids laid out as [shards of dim 0, ..., shards of dim n-1, replicas]."""
        self.check_rank(ndim)
        return tile_assignment(self.mesh, self.spec, ndim)

    def to_hlo(self, ndim: int) -> str:
        if self.unreduced:
            raise ValueError(
                f"{self!r} holds pending partial sums over {sorted(self.unreduced)}; "
                "HloSharding text has no notation for that (reduce first)"
            )
        self.check_rank(ndim)
        return spec_to_hlo(self.mesh, self.spec, ndim)

    @classmethod
    def from_hlo(cls, mesh: Mesh, text: str) -> "Sharding":
        return cls(mesh, spec_from_hlo(mesh, text))


def spec_entry(axes: DimAxes):
    """One PartitionSpec entry: None, 'x', or ('x', 'y') (major first)."""
    return None if not axes else axes[0] if len(axes) == 1 else axes


def axes_text(axes: DimAxes, unsplit: str = "-") -> str:
    """How every text view names one dim's axes: `x`, `(x,y)`, or `unsplit`."""
    return unsplit if not axes else axes[0] if len(axes) == 1 else f"({','.join(axes)})"


@functools.lru_cache(maxsize=1 << 16)
def _local_shape(sharding: Sharding, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Sharding.shard_shape, made once per (layout, shape): the partitioner asks it thousands
    of times per program while costing splits."""
    _check_shape(shape)
    return tuple(ceil_div(n, t) for n, t in zip(shape, sharding.tiles(len(shape)), strict=True))


@functools.lru_cache(maxsize=1 << 16)
def _shard_bytes(sharding: Sharding, shape: tuple[int, ...], dtype) -> int:
    """Sharding.shard_bytes, once per (layout, shape, dtype): costing a split asks for the
    bytes of each of its operands and results."""
    return as_dtype(dtype).itemsize * math.prod(sharding.shard_shape(shape))


def _check_shape(shape: tuple) -> None:
    if not all(isinstance(n, (int, np.integer)) and n >= 0 for n in shape):
        raise ValueError(f"a shape holds non-negative whole numbers, got {shape}")
