"""Per-generation TPU chip and link constants.

Every figure names its public source. "Scaling book" is "How to Scale Your Model", part 2
"How to Think About TPUs" (https://jax-ml.github.io/scaling-book/tpus/), which tabulates HBM,
FLOP/s and ICI bandwidth per generation. Override any field with ``dataclasses.replace`` or pass
your own ``Chip`` wherever a chip name is accepted.
"""

from __future__ import annotations

import dataclasses

from gspmd_viz.units import format_bytes, format_time


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator and its inter-chip links (ICI)."""

    name: str
    peak_bf16_flops: float  # FLOP/s, dense bf16
    hbm_bytes: float  # HBM capacity per chip
    hbm_bandwidth_Bps: float  # HBM bandwidth per chip, bytes/s
    ici_link_bandwidth_Bps: float  # one ICI link, ONE direction, bytes/s
    hop_latency_s: float  # time for a message to cross one link (alpha per hop)
    ici_links: int = 4  # links per chip in the native pod (2-D torus: 4, 3-D torus: 6)
    peak_by_dtype: tuple[tuple[str, float], ...] = ()  # (dtype, FLOP/s or OP/s) beyond bf16
    source: str = ""  # where the figures come from (one line, for tables)

    def peak(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s (OP/s for integers) in `dtype`; clear error when unpublished."""
        table = {"bf16": self.peak_bf16_flops, **dict(self.peak_by_dtype)}
        if dtype not in table:
            raise ValueError(f"chip {self.name!r}: no peak figure for {dtype!r}; has {list(table)}")
        return table[dtype]

    def __post_init__(self):
        for field in ("peak_bf16_flops", "hbm_bytes", "hbm_bandwidth_Bps"):
            if not getattr(self, field) > 0:
                raise ValueError(f"chip {self.name!r}: {field} must be positive")
        if not self.ici_link_bandwidth_Bps > 0:
            raise ValueError(f"chip {self.name!r}: ici_link_bandwidth_Bps must be positive")
        if not self.hop_latency_s >= 0:
            raise ValueError(f"chip {self.name!r}: hop_latency_s must be >= 0")

    def __repr__(self):
        return (
            f"Chip({self.name}: {self.peak_bf16_flops / 1e12:.0f} TFLOP/s bf16, "
            f"HBM {format_bytes(self.hbm_bytes)} @ {self.hbm_bandwidth_Bps / 1e9:.0f} GB/s, "
            f"ICI {self.ici_link_bandwidth_Bps / 1e9:.0f} GB/s/link/direction, "
            f"{format_time(self.hop_latency_s)}/hop)"
        )


# ASSUMPTION (all generations): ~1 us per ICI hop. The scaling book's collectives chapter uses
# "about 1 us" of latency per hop as its rule of thumb; no per-generation figure is published.
_HOP_S = 1e-6
_GiB = 2**30
_BOOK = "scaling book (tpus.md) table"
CLOUD_DOCS = "cloud.google.com/tpu/docs"  # the TPU system-architecture pages cited below

# name: Chip(name, bf16 FLOP/s, HBM bytes, HBM B/s, ICI B/s per link one way, hop s, ...)
CHIPS: dict[str, Chip] = {
    # TPU v3. Scaling book table: 32 GB HBM (Google Cloud: 32 GiB), 9.0e11 B/s HBM, 1.4e14 bf16,
    # ICI 1e11 B/s per link one way (2e11 bidirectional). The Hot Chips 2020 slides (seed 001)
    # quote 420 TFLOP/s per 4-chip board, i.e. ~105 TFLOP/s per chip at an earlier clock.
    "tpu-v3": Chip("tpu-v3", 1.4e14, 32 * _GiB, 9.0e11, 1.0e11, _HOP_S,
                    ici_links=4,
                    source=f"{_BOOK}; hop latency assumed"),
    # TPU v4 (scaling book "v4p"): 32 GB, 1.2e12 B/s, 2.75e14 FLOP/s, ICI 4.5e10 B/s one way
    # per link; 3-D torus, 6 links. Google Cloud TPU v4 docs also list 275 TFLOP/s, 32 GiB.
    # Google Cloud TPU v4 docs: int8 275 TOP/s (same as bf16).
    "tpu-v4": Chip("tpu-v4", 2.75e14, 32 * _GiB, 1.2e12, 4.5e10, _HOP_S,
                    ici_links=6, peak_by_dtype=(("int8", 2.75e14),),
                    source=f"{_BOOK}; int8: {CLOUD_DOCS}/v4"),
    # TPU v5e. Scaling book: 16 GB (Cloud: 16 GiB), 8.1e11 B/s, 1.97e14 FLOP/s, ICI 4.5e10 B/s per
    # link one way; 2-D torus (16x16 pod), 4 links.
    # Google Cloud v5e docs: 197 TFLOP/s bf16, 393 TOP/s int8, 16 GB at 819 GB/s, 400 GB/s
    # bidirectional ICI per chip over 4 ports.
    "tpu-v5e": Chip("tpu-v5e", 1.97e14, 16 * _GiB, 8.1e11, 4.5e10, _HOP_S,
                    ici_links=4, peak_by_dtype=(("int8", 3.93e14),),
                    source=f"{_BOOK}; int8: {CLOUD_DOCS}/v5e"),
    # TPU v5p. Scaling book: 96 GB, 2.8e12 B/s, 4.59e14 FLOP/s, ICI 9e10 B/s one way per link
    # (Google Cloud v5p docs: 95 GiB, 2765 GB/s, 459 TFLOP/s, 1200 GB/s bidirectional ICI per
    # chip over 6 links = 1e11 B/s per link per direction; we keep the scaling book's ICI figure
    # and the Cloud docs' 95 GiB capacity).
    # Google Cloud TPU7x page's comparison table: v5p FP8 459 TFLOP/s (no faster than bf16).
    "tpu-v5p": Chip("tpu-v5p", 4.59e14, 95 * _GiB, 2.8e12, 9.0e10, _HOP_S,
                    ici_links=6, peak_by_dtype=(("fp8", 4.59e14),),
                    source=f"{_BOOK}; HBM size, fp8: {CLOUD_DOCS}/v5p"),
    # TPU v6e (Trillium). Google Cloud v6e / TPU7x pages: 918 TFLOP/s bf16, 1836 TOP/s int8,
    # 32 GiB HBM at 1640 GB/s, 800 GB/s bidirectional ICI per chip, 4 ports; ICI per link one
    # way 9e10 B/s from the scaling book table. 2-D torus (16x16 pod).
    "tpu-v6e": Chip("tpu-v6e", 9.18e14, 32 * _GiB, 1.64e12, 9.0e10, _HOP_S,
                    ici_links=4, peak_by_dtype=(("int8", 1.836e15),),
                    source=f"{CLOUD_DOCS}/v6e; ICI per link: {_BOOK}"),
    # TPU7x (Ironwood). Google Cloud TPU7x page: 2307 TFLOP/s bf16, 4614 TFLOP/s fp8, 192 GiB
    # HBM at 7380 GB/s, 1200 GB/s bidirectional ICI per chip. SECONDARY/DERIVED: a 3-D torus of
    # 6 links per chip (press reports), so 1200 / 2 / 6 = 1e11 B/s per link one way.
    "tpu7x": Chip("tpu7x", 2.307e15, 192 * _GiB, 7.38e12, 1.0e11, _HOP_S,
                    ici_links=6, peak_by_dtype=(("fp8", 4.614e15),),
                    source=f"{CLOUD_DOCS}/tpu7x; ICI per link derived, "
                           "6 links assumed (secondary)"),
}  # fmt: skip


def chip(name: str | Chip) -> Chip:
    """Return the ``Chip`` called ``name`` (or ``name`` itself when it already is a Chip)."""
    if isinstance(name, Chip):
        return name
    if not isinstance(name, str) or name not in CHIPS:
        known = ", ".join(sorted(CHIPS))
        raise ValueError(f"unknown chip {name!r}; known chips: {known} (or pass a Chip object)")
    return CHIPS[name]
