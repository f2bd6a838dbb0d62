"""FSDP + tensor-parallel weights: where does XLA move fewer bytes than we do? (prints; never
asserts). A weight split over "data" on its contraction dim and over "model" on another meets
activations whose batch is split over "data": gather the weight over data, or move the
activations to the contraction's split and reduce the partial product
(core/choice/gather_or_reduce.py). Swept over the batch, side by side in one run:

1. x[B@data, E] @ w[E@data, H@model] alone, on meshes data=4 x model=2 and data=2 x model=4:
   ours / XLA's compiled program per device (wire bytes, FLOPs with fusion off, memory), the
   closed-form bytes of both plans, and the plan our partitioner kept.
2. The keras-hub decoder models of benchmarks/models.py (tests/library_models.py: llama, its
   keras-hub layout, mixtral, gpt_neox; MaxText-style FSDP + TP layouts) at decode sizes (batch
   2, 1-4 tokens) up to training sizes: exact or not, and ours / XLA's wire bytes, FLOPs and
   memory, with how many of each plan our partitioner kept.
Goals (issue 45): bytes <= 1.0 everywhere; FLOPs <= 1.05.

    PYTHONPATH=$PWD python benchmarks/gather_or_reduce.py
"""

import collections
import sys
from pathlib import Path

import gspmd_viz as gv

gv.use_cpu_devices(8)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import jax.numpy as jnp  # noqa: E402
import library_models  # noqa: E402
from models import _error  # noqa: E402  (benchmarks/ is the script's directory)

from gspmd_viz.units import format_bytes  # noqa: E402
from gspmd_viz.xla import cost as xla_cost  # noqa: E402

E, H = 256, 512
BATCHES = (4, 16, 64, 256, 1024)
MODEL_SIZES = ((2, 1), (2, 4), (4, 16), (16, 32))  # (batch, tokens)


def _ratios(side) -> str:
    return " ".join(f"{side.ratio(k):>6.2f}" for k in ("wire_bytes", "flops", "memory"))


def closed_form(mesh, batch: int) -> tuple[float, float]:
    """(gather, reduce) ring bytes per device, f32: all-gather w over data; all-to-all x to
    [B, E/n] plus reduce-scatter of the [B, H/m] partial product over data."""
    n, m = mesh.shape["data"], mesh.shape["model"]
    share = (n - 1) / n * 4
    return share * E * H / m, share * (batch / n * E + batch * H / m)


def exact_or_error(spmd, args) -> str:
    """Max |ours - the unpartitioned program|, or "exact"."""
    return _error(spmd(*args), spmd.program.unpartitioned(*args))


def dot_row(mesh, batch: int) -> str:
    def f(x, w):
        x = gv.mesh_split(x, mesh, ("data", None))
        return x @ gv.mesh_split(w, mesh, ("data", "model"))

    args = (jnp.ones((batch, E)) / 7, jnp.ones((E, H)) / 3)
    spmd = gv.partition(gv.propagate(gv.trace(f, *args)))
    side = xla_cost.compare(f, args, spmd)
    gather, reduce = map(format_bytes, closed_form(mesh, batch))
    kept = ",".join(c.kept for c in spmd.choices) or "-"
    return (
        f"{batch:>6} {exact_or_error(spmd, args):>6} {_ratios(side)}  {gather:>10} {reduce:>10}  "
        f"{kept:<8} {format_bytes(side.ours.wire_bytes):>10} / "
        f"{format_bytes(side.xla.wire_bytes)}"
    )


def model_row(name: str, batch: int, tokens: int) -> str:
    library_models.BATCH, library_models.SEQ = batch, tokens  # build() reads them when called
    f, args = library_models.build(name)
    spmd = gv.partition(gv.propagate(gv.trace(f, *args)))
    side = xla_cost.compare(f, args, spmd)
    kept = collections.Counter(c.kept for c in spmd.choices)
    plans = " ".join(f"{k} {n}" for k, n in sorted(kept.items())) or "-"
    return (
        f"{name:<8} {batch:>5} {tokens:>6} {exact_or_error(spmd, args):>6} {_ratios(side)}  "
        f"{plans:<28} {format_bytes(side.ours.wire_bytes):>10} / "
        f"{format_bytes(side.xla.wire_bytes)}"
    )


def main() -> None:
    jnp.zeros(())
    print(f"1. x[B@data, {E}] @ w[{E}@data, {H}@model]; ours / XLA's per device")
    for shape in ({"data": 4, "model": 2}, {"data": 2, "model": 4}):
        mesh = gv.Mesh(shape)
        print(f"mesh {shape}")
        print(" batch    err  bytes  FLOPs memory  gather(cf) reduce(cf)  kept     ours / XLA")
        for batch in BATCHES:
            print(dot_row(mesh, batch))
    print("\n2. decoder models, 2 layers, mesh data=2 x model=4; ours / XLA's per device")
    print("model    batch tokens    err  bytes  FLOPs memory  kept plans (gather/reduce)"
          "          ours / XLA")  # fmt: skip
    for name in library_models.MODELS:
        for batch, tokens in MODEL_SIZES:
            print(model_row(name, batch, tokens))


if __name__ == "__main__":
    main()
