"""The program as a graphviz graph: one node per input and equation, edges along values.

Nodes are coloured by the sharding of the value they produce (one colour per distinct spec,
white for replicated), annotated values get a double border, and callers can highlight
equations, mark some with a red dashed border (e.g. disagreements with XLA), add notes under a
node and labels on edges (the partitioner's collective ledger puts collectives there).
"""

from __future__ import annotations

from collections.abc import Callable

import graphviz

from gspmd_viz.core.program.trace import Program, Value
from gspmd_viz.core.sharding.sharding import axes_text

PALETTE = [
    "#8dd3c7",
    "#ffffb3",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
    "#a6cee3",
    "#b2df8a",
    "#fdbf6f",
    "#cab2d6",
]
REPLICATED = "#ffffff"
HIGHLIGHT = "#d62728"
LINKED = "#1f77b4"  # nodes a "why?" chain names


def spec_text(sharding) -> str:
    """`[x, -, (x,y)]`: a colour key for a sharding, independent of shape."""
    return "[" + ", ".join(axes_text(a) for a in sharding.spec) + "]"


def colours(shardings) -> dict[str, str]:
    """spec text -> fill colour; replicated is white, the rest in sorted order (deterministic)."""
    keys = sorted({spec_text(s) for s in shardings if not s.is_replicated})
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def _label(title: str, v: Value, sharding, note: str | None) -> str:
    text = v.type_text(sharding) if sharding is not None else v.type_text()
    lines = [title, f"{v.name}: {text}"] + ([note] if note else [])
    return "\n".join(lines)


def program_graph(
    program: Program,
    sharding: Callable[[Value], object] | None = None,
    highlight: tuple[int, ...] = (),
    marked: dict[int, str] | None = None,
    notes: dict[int, str] | None = None,
    edge_labels: dict[tuple[int, int], str] | None = None,
    rankdir: str = "TB",
    linked: frozenset[str] = frozenset(),
) -> graphviz.Digraph:
    """Equations are nodes `e{i}`, inputs `in{k}`; `marked` {eqn: why} draws red dashed;
    `linked` node names get a thick blue border."""
    marked, notes, edge_labels = marked or {}, notes or {}, edge_labels or {}
    shardings = {v: sharding(v) for v in program.values} if sharding else {}
    fill = colours(shardings.values())

    def colour(v: Value) -> str:
        s = shardings.get(v)
        return REPLICATED if s is None or s.is_replicated else fill[spec_text(s)]

    g = _digraph(rankdir)
    for k, v in enumerate(program.inputs):
        extra = {"color": LINKED, "penwidth": "3"} if f"in{k}" in linked else {}
        g.node(f"in{k}", _label(f"input {k}", v, shardings.get(v), None), **extra,
               shape="ellipse", fillcolor=colour(v))  # fmt: skip
    source = _sources(program)
    clusters = _clusters(program)
    for e in program.equations:
        out = e.outputs[0]
        attrs = _equation_attrs(e, program, colour(out), highlight, marked, linked)
        note = " / ".join(x for x in (notes.get(e.index), marked.get(e.index)) if x) or None
        label = _label(f"{e.index}: {e.primitive}", out, shardings.get(out), note)
        _owner(clusters, e.index, g).node(f"e{e.index}", label, **attrs)
        for v in dict.fromkeys(e.value_inputs):
            src = source[v]
            key = (int(src[1:]) if src.startswith("e") else -1 - int(src[2:]), e.index)
            g.edge(src, f"e{e.index}", label=edge_labels.get(key, ""))
    _attach(clusters, g)
    return g


def _sources(program: Program) -> dict:
    """Value -> the node that makes it (a loop's carry edge reads a body result made later)."""
    source = {v: f"in{k}" for k, v in enumerate(program.inputs)}
    return source | {v: f"e{e.index}" for e in program.equations for v in e.outputs}


def _digraph(rankdir: str) -> graphviz.Digraph:
    return graphviz.Digraph(
        graph_attr={"rankdir": rankdir, "nodesep": "0.15", "ranksep": "0.25", "bgcolor": "white"},
        node_attr={
            "shape": "box",
            "style": "rounded,filled",
            "fontname": "Helvetica",
            "fontsize": "10",
            "margin": "0.06,0.03",
        },
        edge_attr={"arrowsize": "0.5", "color": "#777777", "fontsize": "9"},
    )


def _equation_attrs(e, program: Program, fill: str, highlight, marked, linked) -> dict:
    """An equation node's look: its result's colour, a double border where annotated, red
    dashed where marked, blue where linked, red and thick where highlighted."""
    attrs = {"fillcolor": fill}
    if e.outputs[0] in program.annotations:
        attrs["peripheries"] = "2"
    if e.index in marked:
        attrs |= {"color": HIGHLIGHT, "style": "rounded,filled,dashed", "penwidth": "2"}
    if f"e{e.index}" in linked:
        attrs |= {"color": LINKED, "penwidth": "3"}
    if e.index in highlight:
        attrs |= {"color": HIGHLIGHT, "penwidth": "3"}
    return attrs


# --- loops and branches as clusters ------------------------------------------------------------


def _titles(program: Program) -> list[tuple[range, str]]:
    """(equations, title) of every loop body, while condition and cond branch."""
    out = []
    for loop in program.loops:
        carried = ", ".join(c.param.name for c in loop.carries)
        trips = "data-dependent trips" if loop.counted else f"× {loop.trips} trips"
        out.append((loop.body, f"{loop.primitive} body, {trips}; carries {carried or '-'}"))
        if loop.pred is not None:
            out.append((loop.cond, "while condition (replicated predicate)"))
    for c in program.conds:
        out += [(b, f"cond branch {k} of {len(c.branches)}") for k, b in enumerate(c.branches)]
    return [(span, title) for span, title in out if span]


def _clusters(program: Program) -> list[tuple[range, graphviz.Digraph]]:
    """One dashed cluster per body, condition or branch, innermost (shortest) first."""
    found = []
    for k, (span, title) in enumerate(sorted(_titles(program), key=lambda t: len(t[0]))):
        sub = graphviz.Digraph(name=f"cluster_{k}")
        sub.attr(label=title, style="rounded,dashed", color="#555555", fontsize="10")
        found.append((span, sub))
    return found


def _owner(clusters, index: int, g: graphviz.Digraph) -> graphviz.Digraph:
    """The innermost cluster holding equation `index` (the graph itself when none does)."""
    return next((sub for span, sub in clusters if index in span), g)


def _attach(clusters, g: graphviz.Digraph) -> None:
    """Nest each cluster in the next bigger one holding it, innermost first."""
    for k, (span, sub) in enumerate(clusters):
        parent = next((p for s, p in clusters[k + 1 :] if span.start in s), g)
        parent.subgraph(sub)


def node_of(program: Program, v: Value) -> str:
    """The graph node that draws value `v`: its equation `e{i}` or input `in{k}`."""
    producer = program.producer.get(v)
    return f"e{producer.index}" if producer is not None else f"in{program.inputs.index(v)}"


def legend_html(shardings, extra: tuple[tuple[str, str], ...] = ()) -> str:
    """What the fills and borders mean: one swatch per spec in the figure, then the borders
    (`extra`: (CSS border, meaning) pairs a view adds)."""
    swatch = (
        "<span style='display:inline-block;margin:0 10px 2px 0'><span style='display:inline-block;"
        "width:12px;height:12px;vertical-align:middle;border:{};background:{}'></span> {}</span>"
    )
    items = [swatch.format("1px solid #999", REPLICATED, "replicated")]
    items += [swatch.format("1px solid #999", c, k) for k, c in colours(shardings).items()]
    borders = (("3px double #000", "annotated by the user"), *extra)
    items += [swatch.format(border, "#fff", text) for border, text in borders]
    return "<div class='gv-legend' style='font:11px Helvetica'>" + "".join(items) + "</div>"


def svg(graph: graphviz.Digraph) -> str:
    return graph.pipe(format="svg").decode()


def png(graph: graphviz.Digraph, path: str) -> str:
    """Render straight to a PNG file (no browser needed)."""
    with open(path, "wb") as fh:
        fh.write(graph.pipe(format="png"))
    return path
