"""A logical device mesh: named axes with sizes, device ids in C order.

The mesh needs no devices until something runs on it, so meshes of 4096+ devices work for
symbolic propagation, partitioning and display.
"""

import math
from collections.abc import Iterable, Mapping
from functools import cached_property

import numpy as np

from gspmd_viz.core.sharding.devices import available_devices


class Mesh:
    """`Mesh({"x": 2, "y": 4})`: axis names, major to minor, with their sizes."""

    def __init__(self, axes: Mapping[str, int]):
        if not isinstance(axes, Mapping) or not axes:
            raise TypeError(
                'Mesh takes a non-empty dict of axis sizes, e.g. Mesh({"x": 2, "y": 4})'
            )
        for name, size in axes.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"mesh axis names must be identifiers, got {name!r}")
            if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
                raise ValueError(f"mesh axis {name!r} must have a positive size, got {size!r}")
        self._axes = tuple((name, int(size)) for name, size in axes.items())
        self._size_of = dict(self._axes)  # read by every shard-shape question: made once
        self._hash = hash(self._axes)  # every sharding's hash holds its mesh's
        self._names = tuple(name for name, _ in self._axes)
        self.unit_axes = frozenset(name for name, size in self._axes if size == 1)
        # the axes that split or sum something, and whether every size is a power of two
        # (the reshard planner asks both for every plan it searches)
        self.split_axes = tuple(name for name, size in self._axes if size > 1)
        self.powers_of_two = all(size & (size - 1) == 0 for _, size in self._axes)
        self._size = math.prod(size for _, size in self._axes)

    @property
    def axis_names(self) -> tuple[str, ...]:
        return self._names

    @property
    def shape(self) -> dict[str, int]:
        return dict(self._axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(size for _, size in self._axes)

    @property
    def size(self) -> int:
        return self._size

    def axis_size(self, name: str) -> int:
        size = self._size_of.get(name)
        if size is None:
            self.check_axis(name)  # says what is wrong
        return size

    def axis_index(self, name: str) -> int:
        self.check_axis(name)
        return self.axis_names.index(name)

    def check_axis(self, name) -> None:
        if name not in self._size_of:
            raise ValueError(
                f"unknown mesh axis {name!r}: this mesh has axes {list(self.axis_names)}"
            )

    @cached_property
    def device_ids(self) -> np.ndarray:
        """int array of shape `sizes`: the logical device id at each mesh coordinate."""
        return np.arange(self.size).reshape(self.sizes)

    def coords(self, device: int) -> dict[str, int]:
        """Mesh coordinate of a device id, by axis name."""
        index = np.unravel_index(device, self.sizes)
        return {name: int(i) for name, i in zip(self.axis_names, index, strict=True)}

    def to_jax(self, explicit: Iterable[str] = ()):
        """A jax.sharding.Mesh over jax's first devices (every process's, ordered by process
        then device id: see devices.available_devices), with Auto (GSPMD) axes.

        Axes named in `explicit` get AxisType.Explicit: jax needs that for unreduced axes.
        """
        from jax.sharding import Mesh as JaxMesh

        devices = np.array(available_devices(self.size)).reshape(self.sizes)
        return JaxMesh(devices, self.axis_names, axis_types=self._axis_types(explicit))

    def _axis_types(self, explicit: Iterable[str] = ()) -> tuple:
        from jax.sharding import AxisType

        explicit = set(explicit)
        for name in explicit:
            self.check_axis(name)
        return tuple(
            AxisType.Explicit if name in explicit else AxisType.Auto for name in self.axis_names
        )

    def to_abstract(self):
        """A device-less jax AbstractMesh with the same axes (for tracing huge meshes)."""
        from jax.sharding import AbstractMesh

        return AbstractMesh(self.sizes, self.axis_names, axis_types=self._axis_types())

    @classmethod
    def from_jax(cls, mesh) -> "Mesh":
        """Our mesh with the axes of a jax Mesh or AbstractMesh."""
        return cls(dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True)))

    def __eq__(self, other) -> bool:
        return isinstance(other, Mesh) and self._axes == other._axes

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "Mesh(" + ", ".join(f"{name}={size}" for name, size in self._axes) + ")"
