"""The propagation animator: replay `prop.steps` on the program graph.

Play + slider walk the recorded steps (the step's equation highlighted, before -> after, the
rule that fired). The graph is drawn whole once per frame and shown twice: a focus window
cropped to the active equation and its neighbours (so the action is always on screen) and a
minimap of the whole program with that window outlined. "why?" shows `prop.explain` and
outlines in blue the nodes its chain names; dropdowns per annotated tensor dim edit the
example's annotations and re-propagate; a checkbox overlays XLA's result (computed once per
set of annotations, cached) with disagreements marked: a control change shows our propagation
at once and adds XLA's marks when its compile, run in the background, finishes (the widget
being built waits for them, so its first picture is whole). It replays, it never recomputes a
step.
An error in any handler becomes a one-line message, the stale figure is greyed out, and the
widget keeps working.
"""

from __future__ import annotations

import functools
import html
import time

import ipywidgets as W

from gspmd_viz import xla
from gspmd_viz.core.program.trace import trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.viz.common import viewport
from gspmd_viz.viz.common.background import Background
from gspmd_viz.viz.common.inline import error_html, error_line, inline_errors, stale_html
from gspmd_viz.viz.common.program_graph import (
    HIGHLIGHT,
    LINKED,
    legend_html,
    node_of,
    program_graph,
    svg,
)
from gspmd_viz.viz.propagation.parts import (
    annotation_shapes,
    chain_values,
    checked_specs,
    neighbourhood,
    why_options,
)
from gspmd_viz.zoo import examples

NONE = "-"
FOCUS = (760, 430)  # px: the window that follows the active equation
MINIMAP = (150, 430)  # px: the whole program
BORDERS = (
    (f"3px solid {HIGHLIGHT}", "this step's equation"),
    (f"3px solid {LINKED}", 'named by "why?"'),
    (f"2px dashed {HIGHLIGHT}", "XLA decides differently"),
)
PENDING = "<i class='gv-pending'>XLA's overlay: compiling in the background…</i>"


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


def _compare(prop):

    return xla.compare(prop)


def frame_graph(prop, k: int, marked: dict | None = None, linked=frozenset()):
    state = frame_shardings(prop, k)
    highlight = (prop.steps[k - 1].eqn,) if k else ()
    return program_graph(
        prop.program, state.__getitem__, highlight=highlight, marked=marked, linked=linked
    )


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
        self.shapes = annotation_shapes(self.example)
        self.xla_cache: dict = {}
        self.xla_pending: set = set()  # keys whose comparison is being computed
        self.background, self.building = Background(), True
        self.frames: dict = {}
        self.generation = 0  # bumped on every re-propagation (keys the frame cache)
        self.prop = None
        self.figure = ""  # the last good frame (focus window and minimap)
        self.focus = ""  # its focus window, one SVG
        self.repropagate_ms = 0.0
        self._build_controls(xla)
        self.repropagate(self.example.specs)
        self.building = False  # from now on XLA's overlay arrives in the background

    # --- state ----------------------------------------------------------------------------
    @inline_errors
    def repropagate(self, specs: dict) -> None:
        """Re-trace the example with new annotations and propagate (errors shown inline)."""
        start = time.perf_counter()
        checked_specs(self.example.mesh, specs)
        ex = examples.get(  # shapes are all propagation needs: no arrays to build
            self.example.name, self.example.mesh, specs, symbolic=True, ranks=self.example.ranks
        )
        prop = propagate(trace(ex.fn, *ex.args))
        self.repropagate_ms = 1e3 * (time.perf_counter() - start)
        self.example, self.prop = ex, prop
        self.generation += 1
        self.message.value = (
            f"<span class='gv-ok'>re-traced and propagated: {len(prop.steps)} steps, "
            f"{len(prop.conflicts)} conflicts</span>"
        )
        keep = self.why.value
        self.why.options = why_options(prop)
        names = [n for _, n in self.why.options]
        outputs = [v.name for v in prop.program.outputs if getattr(v, "name", None) in names]
        self.why.value = keep if keep in names else (outputs[-1] if outputs else names[0])
        with self.slider.hold_trait_notifications():
            self.slider.max = len(prop.steps)
            self.slider.value = len(prop.steps)
        self.redraw()

    def xla_key(self) -> tuple:
        return tuple(sorted((k, str(v)) for k, v in self.example.specs.items()))

    def comparison(self):
        """XLA's comparison for the current annotations: cached; computed now while the widget
        is built; afterwards started in the background (None until it arrives and redraws)."""
        key, prop = self.xla_key(), self.prop
        if key in self.xla_cache or self.building:
            if key not in self.xla_cache:
                self.xla_cache[key] = _compare(prop)
            return self.xla_cache[key]
        if key not in self.xla_pending:  # a job for annotations changed since is skipped
            self.xla_pending.add(key)
            work = lambda: _compare(prop) if key == self.xla_key() else None  # noqa: E731
            self.background.run(work, functools.partial(self.xla_arrived, key))
        return None

    def xla_arrived(self, key: tuple, table) -> None:
        """A background comparison finished: cache it; redraw if it is still the one shown."""
        self.xla_pending.discard(key)
        if isinstance(table, Exception):
            self.xla_text.value = error_html(f"XLA's overlay: {error_line(table)}")
            return
        if table is not None:
            self.xla_cache[key] = table
        if table is not None and self.overlay.value and key == self.xla_key():
            self.redraw()

    def fail(self, err) -> None:
        """One-line message; the figure stays, greyed out, until a good change redraws it."""
        self.message.value = error_html(err)
        self.graph.value = stale_html(self.figure)

    # --- views ----------------------------------------------------------------------------
    def linked(self) -> frozenset[str]:
        if self.prop is None or not self.why.value:
            return frozenset()
        values = chain_values(self.prop, self.prop.program.value(self.why.value))
        return frozenset(node_of(self.prop.program, v) for v in values)

    def follow(self, k: int) -> list[str]:
        """The nodes to keep in view: the step's neighbourhood, or the "why?" chain at 0."""
        if k:
            return neighbourhood(self.prop, self.prop.steps[k - 1].eqn)
        return sorted(self.linked())

    def frame_svg(self, k: int, marked) -> str:
        key = (self.generation, k, marked is not None, self.why.value)
        if key not in self.frames:  # graphviz takes a while on big programs: keep each frame
            self.frames = self.frames if len(self.frames) < 256 else {}
            self.frames[key] = svg(frame_graph(self.prop, k, marked, self.linked()))
        return self.frames[key]

    def render(self, k: int, marked) -> str:
        whole = self.frame_svg(k, marked)
        box = viewport.window(whole, self.follow(k), *FOCUS)
        self.focus_box = box
        legend = legend_html(frame_shardings(self.prop, k).values(), BORDERS)
        self.focus = viewport.focus_svg(whole, box, *FOCUS)
        return (
            f"{legend}<div style='display:flex;gap:8px;align-items:flex-start'>"
            f"<div class='gv-minimap' style='border:1px solid #ccc'>"
            f"{viewport.minimap_svg(whole, box, *MINIMAP)}</div>"
            f"<div class='gv-focus' style='border:1px solid #ccc'>"
            f"{self.focus}</div></div>"
        )

    @inline_errors
    def redraw(self, *_) -> None:
        k = self.slider.value
        marked = None
        table = self.comparison() if self.overlay.value else None
        if table is not None:
            marked = disagreements(self.prop, table)
            self.xla_text.value = f"<pre>{html.escape(table.text(only_differences=True))}</pre>"
        else:
            self.xla_text.value = PENDING if self.overlay.value else ""
        self.figure = self.render(k, marked)
        self.graph.value = f"<div class='gv-figure'>{self.figure}</div>"
        self.step.value = f"<pre class='gv-step'>{html.escape(step_text(self.prop, k))}</pre>"
        self.explain_text()

    def explain_text(self) -> None:
        if self.prop is not None and self.why.value:
            text = self.prop.explain(self.why.value)
            self.why_text.value = f"<pre style='font-size:11px'>{html.escape(text)}</pre>"

    @inline_errors
    def explain(self, *_) -> None:
        self.redraw()  # the chain's nodes are outlined in the figure

    @inline_errors
    def _edit(self, *_) -> None:
        specs = {}
        for name, dims in self.editors.items():
            entries = [_entry(d.value) for d in dims]
            unset = all(e is None for e in entries) and name not in self._annotated
            specs[name] = None if unset else tuple(entries)
        self.repropagate(specs)

    # --- widgets --------------------------------------------------------------------------
    def _annotation_row(self, name: str, options: list[str]) -> W.HBox:
        ex, shape = self.example, self.shapes.get(name, ())
        letters = examples.DIM_NAMES.get(ex.name, {}).get(name, "")
        spec = tuple(ex.specs.get(name) or ()) + (None,) * len(shape)
        dims = []
        for d, size in enumerate(shape):
            dim = letters[d] if d < len(letters) else f"d{d}"
            dims.append(
                W.Dropdown(
                    options=options,
                    value=_text(spec[d]),
                    description=f"{dim}={size}",
                    style={"description_width": "initial"},
                    layout=W.Layout(width="110px"),
                )
            )
            dims[-1].observe(self._edit, names="value")
        self.editors[name] = dims
        return W.HBox([W.Label(name, layout=W.Layout(width="60px")), *dims])

    def _build_controls(self, xla: bool) -> None:
        options = _dim_options(self.example.mesh)
        self._annotated = {n for n, s in self.example.specs.items() if s is not None}
        self.editors = {}
        rows = [self._annotation_row(name, options) for name in self.example.ranks]
        self.play = W.Play(interval=600, min=0, step=1)
        self.slider = W.IntSlider(min=0, description="step")
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.slider.observe(self.redraw, names="value")
        self.overlay = W.Checkbox(value=xla, description="overlay XLA's result")
        self.overlay.observe(self.redraw, names="value")
        self.why = W.Dropdown(description="why?")
        self.why.observe(self.explain, names="value")
        self.graph = W.HTML()
        self.step, self.message = W.HTML(), W.HTML()
        self.why_text, self.xla_text = W.HTML(), W.HTML()
        self.box = W.VBox(
            [
                W.HBox([self.play, self.slider, self.overlay]),
                self.step,
                self.message,
                self.graph,
                W.HBox([W.VBox(rows), W.VBox([self.why, self.why_text])]),
                self.xla_text,
            ]
        )
        self.box.add_class("gv-propagation")

    def static_figure(self) -> str:
        """The focus window alone: one SVG (the minimap and legend are HTML around it)."""
        return self.focus

    def show(self):
        return self.box

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)
