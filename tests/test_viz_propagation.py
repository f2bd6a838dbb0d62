"""The propagation animator replays recorded steps, edits annotations, overlays XLA."""

import pytest

import gspmd_viz as gv
from gspmd_viz import examples
from gspmd_viz.viz.graph import program_graph
from gspmd_viz.viz.propagation import PropagationWidget, frame_shardings, step_text


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
    assert "<svg" in w.graph.value
    w.editors["w1"][0].value = "y"  # w1: [32@y, 64@y]: y twice
    assert "cannot use these annotations" in w.message.value
    w.why.value = "g"
    assert "annotated by the user" in w.why_text.value
    w.slider.value = 0
    assert "frame 0" in w.step.value
