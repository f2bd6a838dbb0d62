"""The collective ledger: where the partitioned program communicates, and what it costs.

The program graph (viz/graph.py) with every collective written on the edge that needs it, a
table of collectives (kind, mesh axes, per-device shape, wire bytes, time on a chosen TPU
generation via gspmd_viz.sim), and a device picker that shows what one device holds.
Everything is replayed from `spmd` (the partitioner's record); nothing is recomputed.
`ledger_text` is the same content as text (what tests assert).
"""

from __future__ import annotations

import html
import re

from gspmd_viz.core.execute import SPMDProgram
from gspmd_viz.core.program import Value
from gspmd_viz.core.spmd import Combine, Reshard, instruction_collectives
from gspmd_viz.sim import CHIPS, collective_time
from gspmd_viz.units import format_bytes, format_time
from gspmd_viz.viz.graph import program_graph, svg

COLLECTIVE = "#b00020"  # edge labels: the communication stands out


def payload_bytes(c) -> float:
    """The S that gv.sim.collective_time expects: all-gather's result, others' operand."""
    return c.operand_bytes * (c.group_size if c.kind == "all-gather" else 1)


def seconds(c, chip: str) -> float:
    """Time on `chip` over every trip of the loops around the collective."""
    return c.trips * collective_time(c.kind, payload_bytes(c), c.group_size, chip)


# --- rows: one per collective, with the graph edge it belongs to -------------------------------


def _node(program, v: Value) -> int:
    """Graph node index of a value's producer: eqn index, or -1-k for input k."""
    producer = program.producer.get(v)
    return producer.index if producer is not None else -1 - program.inputs.index(v)


def rows(spmd: SPMDProgram, chip: str = "tpu-v3") -> list[dict]:
    out = []
    for ins, collectives in instruction_collectives(spmd.instructions):  # loops opened up
        if not isinstance(ins, (Reshard, Combine)) or ins.value.id < 0:
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
                    "time": seconds(c, chip),
                }
            )
    return out


def ledger_text(spmd: SPMDProgram, chip: str = "tpu-v3") -> str:
    """The ledger as a table: one line per collective, then the totals."""
    table = rows(spmd, chip)
    lines = [f"{'collective':<34} {'per-device operand':<20} {'wire':>10} {chip:>12}  where"]
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
    return "\n".join(lines)


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
        text = f"{c.kind}({','.join(c.axes)}) {format_bytes(c.wire_bytes)}"
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
    g.edge_attr.update(fontcolor=COLLECTIVE, fontname="Helvetica-Bold", fontsize="10")
    return g


def _scalable(svg_text: str) -> str:
    """Let the SVG shrink to its box (graphviz writes fixed pt sizes)."""
    fixed = r'<svg width="[\d.]+pt" height="[\d.]+pt"'
    return re.sub(fixed, '<svg width="100%"', svg_text, count=1)


def ledger_html(spmd: SPMDProgram, chip: str = "tpu-v3", device: int = 0) -> str:
    """Graph, collective table and one device's view as one HTML block."""
    pre = "<pre style='font-size:11px;margin:4px 0 12px 0'>{}</pre>"
    graph = _scalable(svg(ledger_graph(spmd, chip)))
    table = pre.format(html.escape(ledger_text(spmd, chip)))
    local = pre.format(html.escape(device_text(spmd, device)))
    return (
        "<div style='display:flex;gap:16px;align-items:flex-start'>"
        f"<div style='flex:0 0 42%;max-height:720px;overflow:auto'>{graph}</div>"
        f"<div><b>Collectives, time on {html.escape(chip)}</b>{table}"
        f"<b>What one device holds</b>{local}</div></div>"
    )


def error_html(message: str) -> str:
    return f"<div style='color:#b00020;font-family:monospace'>{html.escape(message)}</div>"


# --- the widget --------------------------------------------------------------------------------


def _as_spmd(program) -> SPMDProgram:
    if isinstance(program, SPMDProgram):
        return program
    if isinstance(program, str):
        import gspmd_viz as gv
        from gspmd_viz import examples

        ex = examples.get(program)
        return gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))
    raise TypeError(
        "the ledger shows a partitioned program: pass gv.partition(...) or a zoo name "
        f"such as 'mlp', not {type(program).__name__}"
    )


class LedgerWidget:
    """Chip and device pickers over the ledger; bad input shows an inline message."""

    def __init__(self, program="mlp", chip: str = "tpu-v3", device: int = 0):
        import ipywidgets as w

        self.out = w.HTML()
        self.chip = w.Dropdown(options=sorted(CHIPS), value=chip, description="TPU")
        self.device = w.BoundedIntText(value=0, min=0, max=0, description="device")
        try:
            self.spmd = _as_spmd(program)
            self.device.max = self.spmd.mesh.size - 1
            self.device.value = device
        except (TypeError, KeyError, ValueError) as err:
            self.spmd = None
            self.out.value = error_html(str(err))
        self.chip.observe(self.redraw, "value")
        self.device.observe(self.redraw, "value")
        self.box = w.VBox([w.HBox([self.chip, self.device]), self.out])
        self.redraw()

    def redraw(self, *_):
        if self.spmd is None:
            return
        try:
            self.out.value = ledger_html(self.spmd, self.chip.value, int(self.device.value))
        except (ValueError, KeyError) as err:
            self.out.value = error_html(str(err))

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)


def show_ledger(program="mlp", chip: str = "tpu-v3", device: int = 0) -> LedgerWidget:
    return LedgerWidget(program, chip, device)
