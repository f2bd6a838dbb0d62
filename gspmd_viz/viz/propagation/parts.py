"""What the propagation animator reads off a record, apart from drawing: the nodes to keep in
view at a step, the values a "why?" chain names, the "why?" list's order, the shapes of the
annotated tensors, per-tensor checks of edited specs, and the handler guard that turns any
exception into the widget's inline message.
"""

from __future__ import annotations

import jax

from gspmd_viz.core.program.trace import Value
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.viz.common.program_graph import node_of
from gspmd_viz.zoo import examples


def neighbourhood(prop, eqn: int) -> list[str]:
    """Graph nodes of equation `eqn`, the producers of its operands and its consumers."""
    program = prop.program
    e = program.equations[eqn]
    nodes = [f"e{eqn}", *(node_of(program, v) for v in e.value_inputs)]
    for v in e.outputs:
        nodes += [f"e{c.index}" for c, _ in program.consumers.get(v, ())]
    return nodes


def chain_values(prop, value: Value) -> list[Value]:
    """Every value `prop.explain(value)` names: the value, the steps' sources, recursively."""
    seen, todo = [], [value]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.append(v)
        if v not in prop.annotations and v not in prop.pinned:
            todo += [src for s in prop.steps_for(v) for src in s.sources]
    return seen


def why_options(prop) -> list[tuple[str, str]]:
    """(label, value name) for "why?": outputs, then annotated values, then the rest."""
    program = prop.program
    names = [v.name for e in program.equations for v in e.outputs]
    annotated = {v.name for v in prop.annotations}
    outputs = [v.name for v in program.outputs if getattr(v, "name", None) in names]
    first = outputs + [n for n in names if n in annotated and n not in outputs]

    def label(n: str) -> str:
        kinds = ["output"] * (n in outputs) + ["annotated"] * (n in annotated)
        return f"{n}  ({', '.join(kinds)})"

    return [(label(n), n) for n in first] + [(n, n) for n in names if n not in first]


def annotation_shapes(example) -> dict[str, tuple[int, ...]]:
    """Annotation name -> shape of the tensor it annotates (one abstract trace)."""
    build, _ = (examples.ZOO | examples.EXTRA)[example.name]
    shapes = {}

    def record(x, name):
        shapes.setdefault(name, tuple(x.shape))
        return x

    fn, _ = build(record)
    jax.make_jaxpr(fn)(*example.args)
    return shapes


def checked_specs(mesh, specs: dict) -> dict:
    """The specs, each checked on its own so an error names the tensor it is about."""
    for name, spec in specs.items():
        if spec is None:
            continue
        try:
            Sharding(mesh, spec)
        except ValueError as err:
            raise ValueError(f"{name}: {str(err).split(' in Sharding(')[0]}") from None
    return specs
