"""Memory per device and step time of a dense transformer's training step on a TPU pod.

Numbers in, numbers out (numpy only). Assumptions, all overridable through `Precision` and the
arguments: weights, gradients and Adam's two slots in f32 (4 B each); activations in bf16
(2 B); matmuls at `efficiency` x the chip's peak bf16 FLOP/s (chips.py names each chip's
source); the Adam update is HBM-bound (reads p, g, m, v and writes p, m, v: 7 x 4 B per
parameter); collectives do not overlap compute (the sum, an upper bound: REFERENCE "Cost on a
chip"); the pipeline bubble is (S-1)/(M+S-1) of the makespan (GPipe).

Communication comes from the partitioned program's own collectives: `scale_rows` takes the
ledger of a small partitioned step as plain rows and evaluates them at any size (see
core/training_ledger.py for where the rows come from).
"""

from __future__ import annotations

import dataclasses
import math

from gspmd_viz.sim.collectives import placement as pl
from gspmd_viz.sim.collectives.chips import chip as get_chip
from gspmd_viz.sim.collectives.presets import chip_of

STRATEGIES = ("dp", "dp+wus", "2d", "pipeline")


@dataclasses.dataclass(frozen=True)
class Transformer:
    """A stack of the zoo's transformer layers: d_model M, heads N x head_dim D, hidden H."""

    layers: int
    d_model: int
    heads: int
    head_dim: int
    hidden: int
    seq: int

    @property
    def params_per_layer(self) -> int:
        return 4 * self.d_model * self.heads * self.head_dim + 2 * self.d_model * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.params_per_layer

    def flops_per_token(self, remat: bool = False) -> float:
        """Training FLOPs per token: 6 per weight (forward 2, backward 4) + attention's
        4 * seq * N * D per layer forward (scores and weighted sum), x3 for training; a
        re-materialised step runs the forward twice (8 and 16 instead of 6 and 12)."""
        weight, attn = (8, 16) if remat else (6, 12)
        nd = self.heads * self.head_dim
        return weight * self.params + attn * self.layers * self.seq * nd

    def act_elements_per_token(self, model_shards: int = 1) -> float:
        """Activations one layer saves for its backward, per token: the layer input, two
        layer-norm outputs and the residual (4 M), q, k, v and the attention output (4 N D),
        the softmax probabilities (N seq) and the hidden layer before and after gelu (2 H).
        The N and H terms are split over the model axis (lingvo's blnd / blh), M is not."""
        nd = self.heads * self.head_dim
        split = 4 * nd + self.heads * self.seq + 2 * self.hidden
        return 4 * self.d_model + split / model_shards


@dataclasses.dataclass(frozen=True)
class Precision:
    weight: int = 4
    grad: int = 4
    slots: int = 2 * 4  # Adam: m and v
    act: int = 2
    update_bytes_per_param: int = 7 * 4


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the devices are used: data x model (x stages for pipelining), M microbatches."""

    strategy: str
    data: int
    model: int = 1
    stages: int = 1
    microbatches: int = 1
    remat: bool = False

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; known: {', '.join(STRATEGIES)}")
        for name in ("data", "model", "stages", "microbatches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.strategy != "2d" and self.model != 1:
            raise ValueError(f"strategy {self.strategy!r} has no model axis; use '2d'")
        if self.strategy != "pipeline" and self.stages != 1:
            raise ValueError(f"strategy {self.strategy!r} has no stages; use 'pipeline'")

    @property
    def devices(self) -> int:
        return self.data * self.model * self.stages


def memory(cfg: Transformer, lay: Layout, batch: int, prec: Precision = Precision()) -> dict:
    """Bytes per device: weights, grads, slots, activations, transient (one layer's gathered
    weights or whole gradient, held only while that layer runs)."""
    p, d, m, s = cfg.params, lay.data, lay.model, lay.stages
    if batch % (d * lay.microbatches):
        raise ValueError(
            f"batch {batch} does not split into {d} replicas x {lay.microbatches} microbatches"
        )
    if cfg.layers % s:
        raise ValueError(f"{cfg.layers} layers do not split into {s} stages")
    sharded = slot_shards(lay)  # slots always; gradients except under plain DP
    weight_shards = 1 if lay.strategy in ("dp", "dp+wus") else sharded
    layer = cfg.params_per_layer
    transient = {
        "dp": 0,
        "dp+wus": layer * prec.grad,
        "pipeline": 0,
        "2d": layer / m * (prec.weight + prec.grad),
    }[lay.strategy]
    tokens = batch // d * cfg.seq  # a pipeline stage stashes every microbatch (GPipe)
    layers_here = cfg.layers // s
    full = cfg.act_elements_per_token(m) * prec.act
    saved = (cfg.d_model * prec.act * layers_here + full) if lay.remat else full * layers_here
    return {
        "weights": p * prec.weight / weight_shards,
        "grads": p * prec.grad / (1 if lay.strategy == "dp" else sharded),
        "slots": p * prec.slots / sharded,
        "activations": tokens * saved,
        "transient": transient,
    }


def slot_shards(lay: Layout) -> int:
    """Ways each optimizer slot (and the update that writes it) is split."""
    return {"dp": 1, "dp+wus": lay.data, "2d": lay.data * lay.model, "pipeline": lay.stages}[
        lay.strategy
    ]


def scale_rows(rows, dims: dict, mesh: dict, layers: int) -> list[tuple]:
    """Evaluate ledger rows at a new size: [(kind, axes, S bytes per device, count)].

    A row is (kind, axes, itemsize, per-layer?, ((dim name, shard axes), ...)): one collective
    of the small program, its operand's dims named after the model's dims and the mesh axes
    splitting each. S follows the wire formulas (all-gather: the gathered size).
    """
    out = []
    for kind, axes, itemsize, per_layer, operand in rows:
        elements = math.prod(math.ceil(dims[name] / _size(mesh, sh)) for name, sh in operand)
        s = itemsize * elements * (_size(mesh, axes) if kind == "all-gather" else 1)
        out.append((kind, tuple(axes), float(s), layers if per_layer else 1))
    return out


def _size(mesh: dict, axes) -> int:
    return math.prod(mesh[a] for a in axes)


def step_time(cfg, lay, batch, rows, topo, chip=None, efficiency=0.8, prec=Precision()):
    """Seconds per step split into compute, update, communication and bubble, plus MFU.

    `topo` may be any preset (today's slices too); `chip` defaults to the one it names."""
    spec = get_chip(chip or chip_of(topo))
    tokens = batch * cfg.seq
    compute = (
        tokens * cfg.flops_per_token(lay.remat) / lay.devices / (spec.peak_bf16_flops * efficiency)
    )
    update = cfg.params / slot_shards(lay) * prec.update_bytes_per_param / spec.hbm_bandwidth_Bps
    comm = communication(cfg, lay, batch, rows, topo, spec, prec)
    bubble = 0.0
    if lay.strategy == "pipeline":
        frac = (lay.stages - 1) / (lay.microbatches + lay.stages - 1)
        bubble = compute * frac / (1 - frac)
    total = compute + update + comm + bubble
    model_flops = tokens * cfg.flops_per_token(False) / lay.devices
    mfu = model_flops / spec.peak_bf16_flops / total
    return {
        "compute": compute,
        "update": update,
        "communication": comm,
        "bubble": bubble,
        "total": total,
        "mfu": mfu,
    }


def communication(cfg, lay, batch, rows, topo, spec, prec=Precision()) -> float:
    """Sum of every collective's time on the pod, each on the chips its mesh axes occupy."""
    mesh = {"x": lay.data, "y": lay.model, "stage": lay.stages}
    where = pl.place(mesh, topo)
    dims = {
        "B": batch,
        "L": cfg.seq,
        "M": cfg.d_model,
        "N": cfg.heads,
        "D": cfg.head_dim,
        "H": cfg.hidden,
    }
    scaled = scale_rows(rows, dims, mesh, cfg.layers // lay.stages)
    if lay.strategy == "pipeline":  # the stage shift: one permute per iteration, each way
        mb = batch // lay.data // lay.microbatches * cfg.seq * cfg.d_model * prec.act
        scaled.append(
            ("collective-permute", ("stage",), mb, 2 * (lay.microbatches + lay.stages - 1))
        )
    total = 0.0
    for kind, axes, s, count in scaled:
        total += count * pl.collective_seconds(kind, s, pl.sub_torus(where, axes, topo), spec)
    return total
