"""The propagation animator: replay `prop.steps` on the program graph.

Play + slider walk the recorded steps (the step's equation highlighted, before -> after, the
rule that fired); "why?" shows `prop.explain`; dropdowns per annotated tensor dim edit the
example's annotations and re-propagate; a checkbox overlays XLA's result (computed once per
set of annotations, cached) with disagreements marked. It replays, it never recomputes a step.
"""

from __future__ import annotations

import html
import time

import ipywidgets as W

from gspmd_viz import examples
from gspmd_viz.core.program import trace
from gspmd_viz.core.propagate import propagate
from gspmd_viz.viz.graph import program_graph, svg

NONE = "-"


def frame_shardings(prop, k: int) -> dict:
    """Every value's sharding after the first k steps, replayed from the record's initial
    state (annotations, and values pinned by the annotation on their only use)."""
    state = {v: prop.initial_sharding(v) for v in prop.program.values}
    for step in prop.steps[:k]:
        state[step.value] = step.after
    return state


def step_text(prop, k: int) -> str:
    """What happened at frame k (frame 0: only the annotations)."""
    if k == 0:
        n, pinned = len(prop.annotations), len(prop.pinned)
        also = f" (and the {pinned} values they pin)" if pinned else ""
        return f"frame 0 of {len(prop.steps)}: only the {n} user annotations are known{also}"
    s = prop.steps[k - 1]
    return (
        f"step {k} of {len(prop.steps)}  [{s.pass_name}]  "
        f"eqn {s.eqn} {s.primitive}, {s.direction}\n"
        f"{s.value.name}: {s.value.type_text(s.before)}  ->  {s.value.type_text(s.after)}\n"
        f"rule that fired: {prop.rule(s.eqn)}   (factor {', '.join(s.factors) or '-'})"
    )


def disagreements(prop, comparison) -> dict[int, str]:
    return {r.eqn: f"XLA: {r.value.type_text(r.xla)}" for r in comparison.differ}


def frame_graph(prop, k: int, marked: dict | None = None):
    state = frame_shardings(prop, k)
    highlight = (prop.steps[k - 1].eqn,) if k else ()
    return program_graph(prop.program, state.__getitem__, highlight=highlight, marked=marked)


def _dim_options(mesh) -> list[str]:
    axes = list(mesh.axis_names)
    pairs = [f"{a},{b}" for a in axes for b in axes if a != b]
    return [NONE, *axes, *pairs]


def _entry(text: str):
    return None if text == NONE else tuple(text.split(",")) if "," in text else text


def _text(entry) -> str:
    return NONE if entry is None else entry if isinstance(entry, str) else ",".join(entry)


class PropagationWidget:
    """`PropagationWidget("transformer_block")`; `.show()` returns the ipywidgets box."""

    def __init__(self, name: str = "mlp", mesh=None, xla: bool = False):
        self.example = examples.get(name, mesh)
        self.xla_cache: dict = {}
        self.frames: dict = {}
        self.generation = 0  # bumped on every re-propagation (keys the frame cache)
        self.prop = None
        self.repropagate_ms = 0.0
        self._build_controls(xla)
        self.repropagate(self.example.specs)

    # --- state ----------------------------------------------------------------------------
    def repropagate(self, specs: dict) -> None:
        """Re-trace the example with new annotations and propagate (errors shown inline)."""
        start = time.perf_counter()
        try:
            ex = examples.get(  # shapes are all propagation needs: no arrays to build
                self.example.name, self.example.mesh, specs, symbolic=True, ranks=self.example.ranks
            )
            prop = propagate(trace(ex.fn, *ex.args))
        except (ValueError, TypeError, KeyError) as err:
            self.message.value = (
                f"<span style='color:#b00'>cannot use these annotations: "
                f"{html.escape(str(err))}</span>"
            )
            return
        self.repropagate_ms = 1e3 * (time.perf_counter() - start)
        self.example, self.prop = ex, prop
        self.generation += 1
        self.message.value = (
            f"re-traced and propagated: {len(prop.steps)} steps, {len(prop.conflicts)} conflicts"
        )
        self.slider.max = len(prop.steps)
        self.slider.value = len(prop.steps)
        names = [v.name for e in prop.program.equations for v in e.outputs]
        keep = self.why.value if self.why.value in names else None
        outputs = [v.name for v in prop.program.outputs if getattr(v, "name", None) in names]
        self.why.options = names
        self.why.value = keep or (outputs[-1] if outputs else None)  # start on the result
        self.redraw()

    def comparison(self):
        key = tuple(sorted((k, str(v)) for k, v in self.example.specs.items()))
        if key not in self.xla_cache:
            from gspmd_viz import xla

            self.xla_cache[key] = xla.compare(self.prop)
        return self.xla_cache[key]

    # --- views ----------------------------------------------------------------------------
    def redraw(self, *_) -> None:
        k = self.slider.value
        marked = None
        if self.overlay.value:
            table = self.comparison()
            marked = disagreements(self.prop, table)
            self.xla_text.value = f"<pre>{html.escape(table.text(only_differences=True))}</pre>"
        else:
            self.xla_text.value = ""
        key = (self.generation, k, self.overlay.value)
        if key not in self.frames:  # graphviz takes a while on big programs: keep each frame
            self.frames = self.frames if len(self.frames) < 512 else {}
            self.frames[key] = svg(frame_graph(self.prop, k, marked))
        self.graph.value = self.frames[key]
        self.step.value = f"<pre>{html.escape(step_text(self.prop, k))}</pre>"
        self.explain()

    def explain(self, *_) -> None:
        if self.prop is not None and self.why.value:
            text = self.prop.explain(self.why.value)
            self.why_text.value = f"<pre>{html.escape(text)}</pre>"

    def _edit(self, *_) -> None:
        specs = {}
        for name, dims in self.editors.items():
            entries = [_entry(d.value) for d in dims]
            specs[name] = (
                None
                if all(e is None for e in entries) and name not in self._annotated
                else tuple(entries)
            )
        self.repropagate(specs)

    # --- widgets --------------------------------------------------------------------------
    def _build_controls(self, xla: bool) -> None:
        ex = self.example
        options = _dim_options(ex.mesh)
        self._annotated = {n for n, s in ex.specs.items() if s is not None}
        self.editors = {}
        rows = []
        for name, rank in ex.ranks.items():
            spec = tuple(ex.specs.get(name) or ()) + (None,) * rank
            dims = [
                W.Dropdown(options=options, value=_text(spec[d]), layout=W.Layout(width="70px"))
                for d in range(rank)
            ]
            for d in dims:
                d.observe(self._edit, names="value")
            self.editors[name] = dims
            rows.append(W.HBox([W.Label(name, layout=W.Layout(width="80px")), *dims]))
        self.play = W.Play(interval=400, min=0, step=1)
        self.slider = W.IntSlider(min=0, description="step")
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.slider.observe(self.redraw, names="value")
        self.overlay = W.Checkbox(value=xla, description="overlay XLA's result")
        self.overlay.observe(self.redraw, names="value")
        self.why = W.Dropdown(description="why?")
        self.why.observe(self.explain, names="value")
        self.graph = W.HTML(layout=W.Layout(max_height="640px", overflow="auto"))
        self.step, self.message = W.HTML(), W.HTML()
        self.why_text, self.xla_text = W.HTML(), W.HTML()
        self.box = W.VBox(
            [
                W.HBox([self.play, self.slider, self.overlay]),
                self.step,
                self.message,
                W.HBox([W.VBox(rows), W.VBox([self.why, self.why_text])]),
                self.xla_text,
                self.graph,
            ]
        )

    def show(self):
        return self.box

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)


def show_propagation(name: str = "mlp", mesh=None, xla: bool = False) -> PropagationWidget:
    return PropagationWidget(name, mesh, xla)
