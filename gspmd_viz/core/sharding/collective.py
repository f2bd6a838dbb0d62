"""The `Collective` record: one piece of communication, with the bytes each device sends.

Wire bytes follow the bandwidth-optimal ring formulas (Patarasuk and Yuan 2009), with n
devices in the group and S the per-device operand size in bytes:

    all-reduce          2 (n-1)/n * S
    all-gather          (n-1)/n * S_out = (n-1) * S      (S_out = n * S)
    reduce-scatter      (n-1)/n * S
    all-to-all          (n-1)/n * S
    collective-permute  S
"""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from gspmd_viz.core.sharding.sharding import as_dtype, short_dtype
from gspmd_viz.units import format_bytes

# the ring formulas' factors on the operand bytes, per collective kind (n devices a group)
_FACTORS = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: n - 1,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "collective-permute": lambda n: 1.0,
}
KINDS = tuple(_FACTORS)


def wire_bytes(kind: str, operand_bytes: float, group_size: int) -> float:
    """Bytes each device sends for one collective (ring algorithms)."""
    factor = _FACTORS.get(kind)
    if factor is None:
        raise ValueError(f"unknown collective kind {kind!r}; known: {', '.join(KINDS)}")
    if group_size <= 1:
        return 0.0
    return factor(group_size) * operand_bytes


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective: `kind` over mesh `axes` on a per-device operand of `shape` and `dtype`.

    `group_size` is the number of devices in each group (the product of the axes' sizes for
    the collectives we emit; read from replica_groups for XLA's). `source` names the equation
    (or resharding) that caused it. `dims` says which tensor dims it works on (gather/scatter
    dim; for all-to-all the (split, concat) dims).
    """

    kind: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    group_size: int
    source: str = ""
    dims: tuple[int, ...] = ()
    trips: int = 1  # runs once per iteration of the loop around it: wire_bytes counts all trips
    trips_note: str = ""  # why that trip count ("data-dependent: one trip counted")

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown collective kind {self.kind!r}; known: {', '.join(KINDS)}")
        object.__setattr__(self, "axes", tuple(self.axes))
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        object.__setattr__(self, "dtype", as_dtype(self.dtype))

    @property
    def operand_bytes(self) -> int:
        return self.dtype.itemsize * int(math.prod(self.shape))

    @property
    def payload_bytes(self) -> int:
        """The S of the ring formulas: all-gather's result bytes, the operand's otherwise."""
        return self.operand_bytes * (self.group_size if self.kind == "all-gather" else 1)

    @property
    def wire_bytes(self) -> float:
        """Bytes each device sends, over every trip of the loops around it."""
        return self.trips * wire_bytes(self.kind, self.operand_bytes, self.group_size)

    @property
    def result_shape(self) -> tuple[int, ...]:
        """Per-device result shape (all-gather grows, reduce-scatter shrinks its dim)."""
        shape = list(self.shape)
        n = self.group_size
        if self.kind == "all-gather" and self.dims:
            shape[self.dims[0]] *= n
        elif self.kind == "reduce-scatter" and self.dims:
            shape[self.dims[0]] //= n
        elif self.kind == "all-to-all" and len(self.dims) == 2:
            shape[self.dims[0]] //= n
            shape[self.dims[1]] *= n
        return tuple(shape)

    def type_text(self, shape: Sequence[int] | None = None) -> str:
        dims = ", ".join(str(n) for n in (self.shape if shape is None else shape))
        return f"{short_dtype(self.dtype)}[{dims}]"

    def describe(self) -> str:
        """`all-gather(x) f32[4, 16] -> f32[8, 16]  (64 B on the wire)`."""
        axes = ",".join(self.axes) or "-"
        text = f"{self.kind}({axes}) {self.type_text()} -> {self.type_text(self.result_shape)}"
        if self.trips != 1 or self.trips_note:
            note = f", {self.trips_note}" if self.trips_note else ""
            text += f" × {self.trips} trips{note}"
        return f"{text}  ({format_bytes(self.wire_bytes)} on the wire)"

    def __str__(self) -> str:
        src = f"  [{self.source}]" if self.source else ""
        return self.describe() + src


def total_wire_bytes(collectives) -> float:
    return float(sum(c.wire_bytes for c in collectives))
