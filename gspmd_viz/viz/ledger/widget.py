"""The collective ledger: where the partitioned program communicates, and what it costs.

The program graph (common/program_graph.py, drawn at 100%) with every collective written on
the edge that needs it (the label tied to its edge by a leader line), a table of collectives
(kind, mesh axes, per-device shape, wire bytes, time on a chosen TPU generation with the mesh
placed on a TPU slice: sim.placement), the per-device compute and communication time on that
chip, and a device picker that shows what one device holds; where the partitioner weighed
gathering a weight against reducing the partial product, both plans' costs (choices.py).
Everything is replayed from `spmd` (the partitioner's record); nothing is recomputed.
`ledger_text` and `choices.choices_text` are the same content as text (what tests assert).
"""

from __future__ import annotations

import html
import math

from gspmd_viz.core.program.trace import Value, trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.spmd.instructions import (
    Combine,
    Compute,
    Halo,
    MoveBlocks,
    Reshard,
    instruction_collectives,
)
from gspmd_viz.core.spmd.run import SPMDProgram
from gspmd_viz.partition_on_chip import partition
from gspmd_viz.sim import CHIPS, placement
from gspmd_viz.units import format_bytes, format_time
from gspmd_viz.viz.common.inline import error_html, inline_errors, stale_html
from gspmd_viz.viz.common.program_graph import program_graph, svg
from gspmd_viz.viz.ledger.choices import choices_text
from gspmd_viz.viz.ledger.plan_cost import plan_text
from gspmd_viz.xla import cost as xla_cost
from gspmd_viz.zoo import examples

COLLECTIVE = "#b00020"  # edge labels: the communication stands out


def on_slice(mesh) -> tuple:
    """(slice, placement): the TPU slice the ledger times `mesh` on and where each axis lands."""
    topo = placement.slice_for(mesh.size)
    return topo, placement.place(mesh.shape, topo)


def seconds(c, chip: str, topo, where) -> float:
    """Time on `chip` over every trip of the loops around the collective, on the chips of the
    slice `topo` its mesh axes occupy (`where`: sim.placement.place)."""
    sub = placement.sub_torus(where, c.axes, topo)
    return c.trips * placement.collective_seconds(c.kind, c.payload_bytes, sub, chip)


# --- rows: one per collective, with the graph edge it belongs to -------------------------------


def _node(program, v: Value) -> int:
    """Graph node index of a value's producer: eqn index, or -1-k for input k."""
    producer = program.producer.get(v)
    return producer.index if producer is not None else -1 - program.inputs.index(v)


def rows(spmd: SPMDProgram, chip: str = "tpu-v3") -> list[dict]:
    out, (topo, where) = [], on_slice(spmd.mesh)
    for ins, collectives in instruction_collectives(spmd.instructions):  # loops opened up
        if not isinstance(ins, (Reshard, Combine, Halo, MoveBlocks)) or ins.value.id < 0:
            continue
        consumer = getattr(ins, "consumer", None)
        src = _node(spmd.program, ins.value)
        edge = (src, consumer.index) if consumer is not None else None
        for c in collectives:
            out.append(
                {
                    "collective": c,
                    "edge": edge,
                    "node": src,
                    "value": ins.value.name,
                    "where": c.source,
                    "time": seconds(c, chip, topo, where),
                }
            )
    return out


def matmul_flops(spmd: SPMDProgram) -> float:
    """FLOPs one device spends in matmuls: 2 x local result size x local contracted size."""
    total = 0.0
    for ins in spmd.instructions:
        if not isinstance(ins, Compute) or ins.eqn.primitive != "dot_general":
            continue
        lhs = ins.eqn.inputs[0]
        (contract, _), _ = ins.eqn.params["dimension_numbers"]
        local_lhs = ins.operand_shardings[0].shard_shape(lhs.shape)
        out = ins.eqn.outputs[0]
        local_out = ins.shardings[0].shard_shape(out.shape)
        total += 2 * math.prod(local_out) * math.prod(local_lhs[d] for d in contract)
    return total


def step_times(spmd: SPMDProgram, chip: str) -> tuple[float, float]:
    """(compute, communication) seconds per device on `chip`: matmuls at peak bf16 FLOP/s
    (other ops and HBM traffic ignored), collectives one after another (no overlap)."""
    compute = matmul_flops(spmd) / CHIPS[chip].peak_bf16_flops
    return compute, sum(r["time"] for r in rows(spmd, chip))


def times_text(spmd: SPMDProgram, chip: str) -> str:
    compute, comm = step_times(spmd, chip)
    return (
        f"{chip}: compute {format_time(compute)} ({matmul_flops(spmd):.3g} matmul FLOPs per "
        f"device at peak bf16), communication {format_time(comm)}"
    )


def ledger_text(spmd: SPMDProgram, chip: str = "tpu-v3") -> str:
    """The ledger as a table: one line per collective, then the totals."""
    table = rows(spmd, chip)
    topo, where = on_slice(spmd.mesh)
    lines = [
        f"times on slice {placement.describe(where, topo)} ({topo.kind})",
        f"{'collective':<34} {'per-device operand':<20} {'wire':>10} {chip:>12}  where",
    ]
    for r in table:
        c = r["collective"]
        op = f"{c.kind}({','.join(c.axes)})"
        lines.append(
            f"{op:<34} {c.type_text():<20} {format_bytes(c.wire_bytes):>10} "
            f"{format_time(r['time']):>12}  {r['where']}"
        )
    total_t = sum(r["time"] for r in table)
    lines.append(
        f"{'total: ' + str(len(table)) + ' collectives':<55} "
        f"{format_bytes(spmd.wire_bytes):>10} {format_time(total_t):>12}"
    )
    return "\n".join(lines + [f"note: {n}" for n in spmd.notes])


def device_text(spmd: SPMDProgram, device: int) -> str:
    """What one device holds: every input and output, its slice of the global array."""
    mesh, prop = spmd.mesh, spmd.prop
    coords = ", ".join(f"{a}={i}" for a, i in mesh.coords(device).items())
    lines = [f"device {device} ({coords})"]
    values = list(spmd.program.inputs) + [v for v in spmd.program.outputs if isinstance(v, Value)]
    for v in dict.fromkeys(values):
        s = prop.sharding(v)
        local = s.shard_shape(v.shape)
        ranges = []
        for d, (n, k) in enumerate(zip(v.shape, local, strict=True)):
            i = s.shard_index(device, d)
            ranges.append(f"{min(n, i * k)}:{min(n, (i + 1) * k)}")
        lines.append(
            f"  {v.name}: {v.type_text(s)}  local {list(local)}  holds [{', '.join(ranges)}]"
        )
    return "\n".join(lines)


# --- the graph ---------------------------------------------------------------------------------


def ledger_graph(spmd: SPMDProgram, chip: str = "tpu-v3"):
    """Program graph with collectives on the edges that need them (outputs: under the node)."""
    edges: dict[tuple[int, int], list[str]] = {}
    notes: dict[int, list[str]] = {}
    for r in rows(spmd, chip):
        c = r["collective"]
        text = (
            f"{c.kind}({','.join(c.axes)}) {format_bytes(c.wire_bytes)}, {format_time(r['time'])}"
        )
        text += f" (× {c.trips} trips)" if c.trips != 1 else ""
        if r["edge"] is not None:
            edges.setdefault(r["edge"], []).append(text)
        elif r["node"] >= 0:
            notes.setdefault(r["node"], []).append(text)
    g = program_graph(
        spmd.program,
        sharding=spmd.computed_sharding,
        edge_labels={k: "\n".join(v) for k, v in edges.items()},
        notes={k: "; ".join(v) for k, v in notes.items()},
        highlight=tuple(sorted({k[1] for k in edges} | set(notes))),
    )
    # decorate: a leader line ties each label to its edge, so no label floats free
    g.edge_attr.update(
        fontcolor=COLLECTIVE, fontname="Helvetica-Bold", fontsize="11", decorate="true"
    )
    return g


def time_bars(spmd: SPMDProgram, chip: str) -> str:
    """Compute and communication time on `chip` as bars on one scale for every chip, so
    switching chips moves them."""
    worst = max(sum(step_times(spmd, c)) for c in CHIPS) or 1.0
    bar = (
        "<div style='display:flex;align-items:center;gap:6px;font:12px Helvetica'>"
        "<span style='width:110px'>{}</span><span style='display:inline-block;height:12px;"
        "width:{:.0f}px;background:{}'></span> {}</div>"
    )
    compute, comm = step_times(spmd, chip)
    return (
        "<div class='gv-times'>"
        + "".join(
            bar.format(name, 400 * t / worst, colour, format_time(t))
            for name, t, colour in (
                ("compute", compute, "#1f77b4"),
                ("communication", comm, COLLECTIVE),
            )
        )
        + "</div>"
    )


def ledger_html(spmd: SPMDProgram, chip: str = "tpu-v3", device: int = 0, xla=None) -> str:
    """Graph (at its natural size), times, the plan's cost (beside XLA's, given `xla`: an
    xla.cost.Side), collective table, one device's view, and gather-or-reduce choices."""
    pre = "<pre style='font-size:12px;margin:4px 0 12px 0'>{}</pre>"
    graph = svg(ledger_graph(spmd, chip))
    graph = graph[graph.index("<svg") :]
    weighed = choices_text(spmd)
    if weighed:
        weighed = f"<div><b>Gather or reduce</b>{pre.format(html.escape(weighed))}</div>"
    return (
        f"<div class='gv-ledger-graph' style='max-height:720px;overflow:auto'>{graph}</div>"
        f"<b>{html.escape(times_text(spmd, chip))}</b>{time_bars(spmd, chip)}"
        f"<pre class='gv-plan-cost'>{html.escape(plan_text(spmd, chip, xla))}</pre>"
        "<div style='display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start'>"
        f"<div><b>Collectives, time on {html.escape(chip)}</b>"
        f"{pre.format(html.escape(ledger_text(spmd, chip)))}</div>"
        f"<div><b>What one device holds</b>"
        f"{pre.format(html.escape(device_text(spmd, device)))}</div>{weighed}</div>"
    )


# --- the widget --------------------------------------------------------------------------------


def _as_spmd(program) -> tuple[SPMDProgram, object]:
    """(the partitioned program, XLA's compiled figures beside ours for a zoo name, else None)."""
    if isinstance(program, SPMDProgram):
        return program, None
    if isinstance(program, str):
        ex = examples.get(program)
        spmd = partition(propagate(trace(ex.fn, *ex.args)))
        return spmd, xla_cost.compare(ex.fn, ex.args, spmd)
    raise TypeError(
        "the ledger shows a partitioned program: pass gv.partition(...) or a zoo name "
        f"such as 'mlp', not {type(program).__name__}"
    )


def device_id(text: str, size: int) -> int:
    """The device box's text as a device id of a `size`-device mesh, or a clear error."""
    text = str(text).strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"device {text!r} is not a number: give a device id 0 to {size - 1}")
    device = int(text)
    if not 0 <= device < size:
        raise ValueError(f"device {device} is out of range: the mesh has devices 0 to {size - 1}")
    return device


class LedgerWidget:
    """Chip and device pickers over the ledger; bad input shows an inline message, the stale
    figure greyed out, and the widget keeps working."""

    def __init__(self, program="mlp", chip: str = "tpu-v3", device: int = 0, xla=None):
        import ipywidgets as w

        self.xla = xla  # XLA's compiled figures beside ours (xla.cost.Side), if known
        self.out, self.message = w.HTML(), w.HTML()
        self.chip = w.Dropdown(options=sorted(CHIPS), value=chip, description="TPU")
        self.device = w.Text(value=str(device), description="device", continuous_update=False)
        self.figure = ""
        try:
            self.spmd, found = _as_spmd(program)
            self.xla = xla if xla is not None else found
        except (TypeError, KeyError, ValueError) as err:
            self.spmd = None
            self.message.value = error_html(err)
        self.chip.observe(self.redraw, "value")
        self.device.observe(self.redraw, "value")
        self.box = w.VBox([w.HBox([self.chip, self.device]), self.message, self.out])
        self.box.add_class("gv-ledger")
        self.redraw()

    @inline_errors
    def redraw(self, *_):
        if self.spmd is None:
            return
        device = device_id(self.device.value, self.spmd.mesh.size)
        self.figure = ledger_html(self.spmd, self.chip.value, device, self.xla)
        self.message.value = (
            f"<span class='gv-ok'>{html.escape(self.chip.value)}, device {device}</span>"
        )
        self.out.value = self.figure

    def fail(self, err: Exception) -> None:
        self.message.value = error_html(err)
        self.out.value = stale_html(self.figure)

    def static_figure(self) -> str:
        return self.figure

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)
