"""The propagation animator replays recorded steps, edits annotations, overlays XLA."""

import html

import pytest

import gspmd_viz as gv
from gspmd_viz.viz.common import viewport
from gspmd_viz.viz.common.program_graph import LINKED, program_graph
from gspmd_viz.viz.propagation.widget import (
    FOCUS,
    PropagationWidget,
    _entry,
    chain_values,
    frame_graph,
    frame_shardings,
    neighbourhood,
    step_text,
)
from gspmd_viz.zoo import examples


def mlp_prop():
    ex = examples.get("mlp")
    return gv.propagate(gv.trace(ex.fn, *ex.args))


def test_frames_replay_the_steps():
    prop = mlp_prop()
    first, last = frame_shardings(prop, 0), frame_shardings(prop, len(prop.steps))
    assert sum(not s.is_replicated for s in first.values()) == len(prop.annotations)
    assert all(last[v] == prop.sharding(v) for v in prop.program.values)
    assert "only the 3 user annotations" in step_text(prop, 0)
    k = 1 + next(i for i, s in enumerate(prop.steps) if s.primitive == "dot_general")
    assert "rule that fired: ([i, j], [j, k]) -> ([i, k])   j: reduction" in step_text(prop, k)


@pytest.mark.parametrize("name", sorted(examples.ZOO | examples.EXTRA))
def test_last_frame_is_the_propagation_result(name):
    """Replaying every step from the record's initial state (annotations and the values they
    pin) ends where propagation ended, for every value of every zoo example."""
    ex = examples.get(name, symbolic=True)
    prop = gv.propagate(gv.trace(ex.fn, *ex.args))
    last = frame_shardings(prop, len(prop.steps))
    wrong = [v.name for v in prop.program.values if last[v] != prop.sharding(v)]
    assert not wrong, f"{name}: the last frame disagrees on {wrong}"
    first = frame_shardings(prop, 0)
    assert all(first[v] == s for v, s in (prop.pinned | prop.annotations).items())


def test_graph_colours_by_sharding_and_marks():
    prop = mlp_prop()
    src = program_graph(prop.program, prop.sharding, highlight=(3,), marked={4: "XLA: f32[16, 64]"})
    text = src.source
    assert "3: dot_general" in text and "g: f32[16@x, 64@y]" in text
    assert "XLA: f32[16, 64]" in text and "dashed" in text
    assert text.count("peripheries=2") == 3  # the three annotations


def test_widget_edits_repropagate_and_bad_input_is_inline():
    w = PropagationWidget("mlp", xla=True)
    assert "agree on 6 of 6" in w.xla_text.value
    assert w.why.value == "i" and "annotated by the user" in w.why_text.value  # the output
    w.editors["x"][0].value = "y"  # x: [16@y, 32]
    assert w.prop.outputs[0] == gv.Sharding(w.example.mesh, ())
    assert "<svg" in w.graph.value and "gv-stale" not in w.graph.value
    w.editors["w1"][0].value = "y"  # w1: [32@y, 64@y]: y twice
    assert "w1: mesh axis &#x27;y&#x27; is used twice" in w.message.value
    assert "gv-stale" in w.graph.value and "<svg" in w.graph.value  # greyed, still there
    w.why.value = "g"
    assert "annotated by the user" in w.why_text.value
    w.editors["w1"][0].value = "-"  # fixed: the widget keeps working
    assert "gv-ok" in w.message.value and "gv-stale" not in w.graph.value
    w.slider.value = 0
    assert "frame 0" in w.step.value


@pytest.fixture
def held_compile(monkeypatch):
    """XLA's comparison waits for `.set()` on the returned event (the edit must not)."""
    import threading

    from gspmd_viz.viz.propagation import widget as propagation

    gate, compare = threading.Event(), propagation._compare
    monkeypatch.setattr(propagation, "_compare", lambda prop: gate.wait(60) and compare(prop))
    return gate


def test_an_edit_shows_our_propagation_at_once_and_xlas_overlay_when_compiled(held_compile):
    """With the overlay on, an edit redraws our propagation without waiting for XLA's
    compile; XLA's marks arrive from the background, the same as computed in place."""
    held_compile.set()  # the widget being built waits for its first comparison
    w = PropagationWidget("mlp", xla=True)
    held_compile.clear()
    original = w.editors["x"][0].value
    w.editors["x"][0].value = "y"  # x: [16@y, 32]
    assert "gv-ok" in w.message.value and "gv-stale" not in w.graph.value
    assert "compiling in the background" in w.xla_text.value
    held_compile.set()
    assert w.background.wait()
    oracle = gv.xla.compare(gv.propagate(gv.trace(w.example.fn, *w.example.args)))
    assert w.xla_text.value == f"<pre>{html.escape(oracle.text(only_differences=True))}</pre>"
    assert (w.generation, w.slider.value, True, w.why.value) in w.frames  # redrawn, marked
    w.editors["x"][0].value = original  # annotations whose comparison is cached: no wait
    assert "agree on" in w.xla_text.value and not w.xla_pending


def test_the_overlay_arrives_on_the_event_loop_that_handled_the_edit():
    """In a kernel the edit runs on its event loop: XLA's table is applied there (the widget's
    state changes on the kernel's thread), once the loop is free, not on the worker."""
    import asyncio
    import threading

    w = PropagationWidget("mlp", xla=True)
    applied_on, arrived = [], w.xla_arrived

    def xla_arrived(key, table):
        applied_on.append(threading.current_thread())
        arrived(key, table)

    w.xla_arrived = xla_arrived

    async def edit_then_wait():
        w.editors["x"][0].value = "y"  # the handler starts XLA's compile in the background
        while not applied_on:
            await asyncio.sleep(0.05)

    asyncio.run(asyncio.wait_for(edit_then_wait(), timeout=120))
    assert applied_on == [threading.main_thread()] and w.background.wait()
    assert "agree on" in w.xla_text.value  # and it redrew with XLA's table


def _drawn_nodes(w):
    """Node boxes of the whole frame, and the focus window the widget shows."""
    whole = w.frame_svg(w.slider.value, None)
    return viewport.node_boxes(whole), w.focus_box


def test_focus_window_follows_the_active_equation_at_every_step():
    """At every frame the step's equation is inside the focus window, whose size stays that
    of the window or at most twice it (readable), and the minimap outlines the same box."""
    w = PropagationWidget("transformer_block")
    prop = w.prop
    for k in range(1, len(prop.steps) + 1):
        w.slider.value = k
        boxes, box = _drawn_nodes(w)
        active = boxes[f"e{prop.steps[k - 1].eqn}"]
        assert box.contains(active), (k, box, active)
        assert (
            box.right - box.left <= 2 * FOCUS[0] + 24 and box.bottom - box.top <= 2 * FOCUS[1] + 24
        )
    assert f'viewBox="{box.left:.1f} {box.top:.1f}' in w.graph.value
    assert w.graph.value.count("<svg") == 2 and "#1f77b4" in w.graph.value  # minimap frame


def test_neighbours_are_kept_in_view_when_they_fit():
    w = PropagationWidget("mlp")
    for k in range(1, len(w.prop.steps) + 1):
        w.slider.value = k
        boxes, box = _drawn_nodes(w)
        for name in neighbourhood(w.prop, w.prop.steps[k - 1].eqn):
            assert box.contains(boxes[name]), (k, name)


def test_why_chain_is_outlined_and_listed_annotated_and_outputs_first():
    w = PropagationWidget("transformer_block")
    labels = [label for label, _ in w.why.options]
    n_first = len({*w.prop.annotations, *w.prop.program.outputs})
    assert labels[0] == f"{w.prop.program.outputs[0].name}  (output, annotated)"
    assert all(x.endswith("annotated)") for x in labels[:n_first])
    assert not any("(" in x for x in labels[n_first:])
    w.why.value = "an"  # the softmax probabilities
    chain = chain_values(w.prop, w.prop.program.value("an"))
    named = {v.name for v in chain}
    for line in w.prop.explain("an").splitlines():  # every value explain names is outlined
        assert line.split(":")[0].split()[-1] in named or "eqn" in line
    src = frame_graph(w.prop, w.slider.value, linked=w.linked()).source
    assert src.count(f'color="{LINKED}"') == len(chain)


def test_annotation_rows_name_each_dim_and_its_size():
    w = PropagationWidget("transformer_block")
    assert [d.description for d in w.editors["wq"]] == ["M=32", "N=4", "D=8"]
    assert [d.description for d in w.editors["qkv"]] == ["B=8", "L=16", "N=4", "D=8"]


def test_every_control_through_every_option(held_compile):
    """Kernel side: every dim dropdown through every option, both slider ends, play, the
    overlay both ways, every "why?" value. Never a Python exception escapes; a bad choice
    leaves an inline message that names the tensor; a good one redraws."""
    w = PropagationWidget("mlp")
    for name, dims in w.editors.items():
        for dim in dims:
            original = dim.value
            for option in dim.options:
                dim.value = option
                spec = [_entry(x.value) for x in dims]
                axes = [a for e in spec if e for a in ((e,) if isinstance(e, str) else e)]
                if len(axes) != len(set(axes)):
                    assert f"{name}: mesh axis" in w.message.value and "gv-stale" in w.graph.value
                else:
                    assert "gv-ok" in w.message.value and "gv-stale" not in w.graph.value
            dim.value = original
    for k in (w.slider.max, 0, w.slider.max):
        w.play.value = k  # jslinked in the browser; the slider is what redraws
        w.slider.value = k
        assert f"of {len(w.prop.steps)}" in w.step.value
    for value in (True, False):
        held_compile.clear()
        w.overlay.value = value
        assert ("compiling in the background" in w.xla_text.value) is value  # at once
        held_compile.set()
        w.background.wait()
        assert ("agree on" in w.xla_text.value) is value
    for _, name in w.why.options:
        w.why.value = name
        assert w.why_text.value.startswith("<pre") and name in w.why_text.value
    assert "gv-ok" in w.message.value


def test_an_exception_in_a_handler_is_shown_inline(monkeypatch):
    w = PropagationWidget("mlp")
    monkeypatch.setattr(w, "render", lambda *a: 1 / 0)
    w.slider.value = 1
    assert "ZeroDivisionError" in w.message.value and "gv-stale" in w.graph.value
    monkeypatch.undo()
    w.slider.value = 2
    assert "gv-stale" not in w.graph.value and "step 2 of" in w.step.value


def test_static_figure_is_one_svg_of_the_focus_window():
    w = PropagationWidget("mlp")
    w.slider.value = 3
    fig = w.static_figure()
    assert fig.count("<svg") == 1 and fig.rstrip().endswith("</svg>")
    assert fig in w.graph.value and "3: dot_general" in fig
