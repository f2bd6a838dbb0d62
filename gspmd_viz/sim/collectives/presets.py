"""Today's TPU slices by name: each generation's shapes and its wraparound rule, with sources.

``preset("tpu-v5e-8x16")`` builds the slice as a ``Topology`` whose links follow the rule:

- v5e, v6e (2-D, 16x16 pods, 4 ICI ports): a slice gets wraparound only on an axis of length
  16; the shorter axes of a sub-slice (2x2 ... 8x16) have none [scaling book ``tpus.md``;
  Google Cloud v5e / v6e topology tables list the shapes].
- v4, v5p, TPU7x (3-D): a slice made of whole 4x4x4 cubes (every axis a multiple of 4) is a
  torus on every axis, joined through optical circuit switches; a slice smaller than a cube has
  no wraparound at all, which "typically doubles" communication time [scaling book ``tpus.md``;
  Google Cloud v4 / v5p pages].
- Twisted tori (v4, v5p): a slice of shape kxkx2k or kx2kx2k, every axis a multiple of 4 (Google
  Cloud v4 docs: "2A=B=C or 2A=2B=C"; the v5p table marks 4x4x8, 4x8x8, 8x8x16, 8x16x16 as
  twistable) may be wired twisted: add ``-twisted`` to the name (``tpu-v4-4x4x8-twisted``). Its
  short axes' wraparound lands k chips along the long axes (``topology.twisted_torus``).

Named pods: ``tpu-v5e-256``, ``tpu-v6e-256`` (16x16), ``tpu-v4-4096`` (16x16x16, 64 cubes),
``tpu-v5p-8960`` (16x20x28, the scaling book's pod), ``tpu7x-9216``. A 2-D name may give the
chip count instead of the shape (``tpu-v5e-128`` is 8x16). Shapes a generation does not offer
raise a ValueError that lists what it does offer; ``twisted_slices()`` names every twisted slice.
"""

from __future__ import annotations

import dataclasses
import math
import re

from gspmd_viz.sim.collectives.chips import CLOUD_DOCS
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.topology import PRESETS, Topology, torus, twisted_torus
from gspmd_viz.sim.collectives.topology import preset as classic_preset


@dataclasses.dataclass(frozen=True)
class Generation:
    name: str  # the prefix of its preset names, e.g. "tpu-v5e"
    chip: str  # a key of chips.CHIPS
    ndim: int
    max_chips: int
    pod_shape: tuple[int, ...]
    source: str  # where its topology rules come from
    twists: bool = False  # offers twisted tori (kxkx2k, kx2kx2k)

    def wrap(self, shape: tuple[int, ...]) -> tuple[bool, ...]:
        """The wraparound this generation gives a slice of `shape` (see the module docstring)."""
        if self.ndim == 2:
            return tuple(n == 16 for n in shape)
        return (all(n % 4 == 0 for n in shape),) * 3

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise a ValueError naming what this generation offers unless it offers `shape`."""
        if len(shape) == self.ndim and math.prod(shape) <= self.max_chips:
            if self.ndim == 2 and shape in _SHAPES_2D:
                return
            if self.ndim == 3 and (shape in _SUB_CUBE or all(n % 4 == 0 for n in shape)):
                return
        raise ValueError(f"{self.name} does not offer a {'x'.join(map(str, shape))} slice; "
                         f"{self.offers()}")  # fmt: skip

    def check_twist(self, shape: tuple[int, ...]) -> None:
        """Raise a ValueError unless this generation offers `shape` as a twisted torus."""
        k = min(shape)
        if not self.twists:
            raise ValueError(f"{self.name} offers no twisted tori (v4 and v5p do)")
        if k % 4 or shape not in ((k, k, 2 * k), (k, 2 * k, 2 * k)):
            dims = "x".join(map(str, shape))
            raise ValueError(
                f"{self.name} cannot twist a {dims} slice: twisted tori are kxkx2k or kx2kx2k "
                "with k a multiple of 4 (4x4x8, 4x8x8, 8x8x16, ...)"
            )

    def offers(self) -> str:
        if self.ndim == 2:
            shapes = ", ".join("x".join(map(str, s)) for s in _SHAPES_2D)
            return f"it offers {shapes} (or the chip count, e.g. {self.name}-128)"
        small = ", ".join("x".join(map(str, s)) for s in sorted(_SUB_CUBE))
        return (f"it offers {small} and whole cubes (every axis a multiple of 4) up to "
                f"{self.max_chips:,} chips")  # fmt: skip


# Google Cloud v5e / v6e topology tables (single slices, 2-D)
_SHAPES_2D = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
# Google Cloud v4 / v5p tables: slices smaller than one 4x4x4 cube
_SUB_CUBE = {(2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4)}

GENERATIONS = {
    g.name: g
    for g in [
        Generation("tpu-v5e", "tpu-v5e", 2, 256, (16, 16),
                   f"scaling book tpus.md (wrap rule); {CLOUD_DOCS}/v5e (16x16, 4 ICI ports)"),
        Generation("tpu-v6e", "tpu-v6e", 2, 256, (16, 16),
                   f"scaling book tpus.md (wrap rule); {CLOUD_DOCS}/v6e (16x16)"),
        Generation("tpu-v4", "tpu-v4", 3, 4096, (16, 16, 16),
                   f"scaling book tpus.md (cubes, OCS); {CLOUD_DOCS}/v4 (4096 chips, twisted "
                   "tori)", twists=True),
        Generation("tpu-v5p", "tpu-v5p", 3, 8960, (16, 20, 28),
                   f"scaling book tpus.md (16x20x28 pod); {CLOUD_DOCS}/v5p (8960 chips); "
                   f"twisted shapes: {CLOUD_DOCS}/supported-versions", twists=True),
        # SECONDARY: Cloud gives 9,216 chips per pod and a 3-D torus with OCS; the 16x24x24
        # shape (144 cubes) is our assumption, not a published figure.
        Generation("tpu7x", "tpu7x", 3, 9216, (16, 24, 24),
                   f"{CLOUD_DOCS}/tpu7x (9216 chips); 16x24x24 shape assumed (secondary)"),
    ]
}  # fmt: skip
# named pods: name -> (generation, shape)
NAMED = {f"{g.name}-{g.max_chips}": (g.name, g.pod_shape) for g in GENERATIONS.values()}

_NAME = re.compile(rf"^({'|'.join(map(re.escape, GENERATIONS))})-(\d+(?:x\d+)*)(-twisted)?$")


def parse(name: str) -> tuple[Generation, tuple[int, ...]]:
    """(generation, shape) of a preset name such as ``tpu-v5p-4x4x8`` or ``tpu-v6e-256``
    (a ``-twisted`` suffix is checked here; ``preset`` builds the twist)."""
    match = _NAME.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"unknown topology preset {name!r}; {known()}")
    gen = GENERATIONS[match.group(1)]
    shape = tuple(int(n) for n in match.group(2).split("x"))
    if name in NAMED:
        return gen, NAMED[name][1]
    if len(shape) == 1 and gen.ndim == 2:  # a chip count: the offered shape with that many
        shape = next((s for s in _SHAPES_2D if math.prod(s) == shape[0]), shape)
    gen.check(shape)
    if match.group(3):
        gen.check_twist(shape)
    return gen, shape


def preset(name: str) -> Topology:
    """A named topology: a classic one (``PRESETS``) or a slice of today's pods (see above)."""
    if name in PRESETS:
        return classic_preset(name)
    gen, shape = parse(name)
    if name.endswith("-twisted"):
        return twisted_torus(shape, name=name)
    return torus(shape, gen.wrap(shape), name=name)


def twisted_slices() -> list[str]:
    """Names of every twisted slice the generations offer (kxkx2k, kx2kx2k, k a multiple of 4,
    fitting in the pod), generation by generation, smallest first."""
    names = []
    for g in (g for g in GENERATIONS.values() if g.twists):
        for k in range(4, max(g.pod_shape) + 1, 4):
            for shape in ((k, k, 2 * k), (k, 2 * k, 2 * k)):
                fits = all(a <= b for a, b in zip(sorted(shape), sorted(g.pod_shape), strict=True))
                if fits and math.prod(shape) <= g.max_chips:
                    names.append(f"{g.name}-{'x'.join(map(str, shape))}-twisted")
    return names


def chip_of(topo: Topology) -> str:
    """The chip a slice of today's pods implies; "tpu-v3" for classic or unnamed topologies."""
    if topo.name in PRESETS or _NAME.match(topo.name) is None:
        return "tpu-v3"
    return GENERATIONS[_NAME.match(topo.name).group(1)].chip


def known() -> str:
    names = [*PRESETS, *NAMED]
    return (f"known: {', '.join(names)}, or a slice such as tpu-v5e-8x16, tpu-v5p-4x4x8 or "
            "tpu-v4-4x4x8-twisted")  # fmt: skip


def table() -> list[dict]:
    """One row per generation: its pod, wrap rule, chip figures and their sources."""
    rows = []
    for g in GENERATIONS.values():
        c = get_chip(g.chip)
        rows.append({
            "preset": f"{g.name}-{g.max_chips}", "pod": "x".join(map(str, g.pod_shape)),
            "wraparound": "axes of length 16" if g.ndim == 2 else "whole cubes only",
            "bf16 TFLOP/s": c.peak_bf16_flops / 1e12, "HBM GiB": c.hbm_bytes / 2**30,
            "ICI GB/s/link/dir": c.ici_link_bandwidth_Bps / 1e9, "chip source": c.source,
            "topology source": g.source,
        })  # fmt: skip
    return rows
