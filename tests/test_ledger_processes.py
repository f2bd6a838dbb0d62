"""Which collectives cross a process boundary (viz.ledger_processes), against brute force."""

import itertools

import pytest

import gspmd_viz as gv
from gspmd_viz.viz.ledger import processes as lp
from gspmd_viz.zoo import examples


def _brute_force_crosses(mesh, axes, devices_per_process) -> bool:
    """Every group: the devices that agree on every coordinate outside `axes`."""
    groups = {}
    for d in range(mesh.size):
        outside = tuple(v for k, v in mesh.coords(d).items() if k not in axes)
        groups.setdefault(outside, set()).add(d // devices_per_process)
    return any(len(processes) > 1 for processes in groups.values())


@pytest.mark.parametrize("sizes", [{"x": 2, "y": 4}, {"x": 4, "y": 2}, {"a": 2, "b": 2, "c": 2}])
@pytest.mark.parametrize("per_process", [1, 2, 4, 8])
def test_crossing_matches_brute_force_for_every_axis_set(sizes, per_process):
    mesh = gv.Mesh(sizes)
    for n in range(1, len(sizes) + 1):
        for axes in itertools.combinations(mesh.axis_names, n):
            want = _brute_force_crosses(mesh, axes, per_process)
            assert lp.crosses_processes(mesh, axes, per_process) == want, (axes, per_process)


def test_the_2x4_transformer_crosses_processes_on_x_only():
    ex = examples.get("transformer_block")
    spmd = gv.partition(gv.propagate(gv.trace(ex.fn, *ex.args)))
    text = lp.crossing_text(spmd, 4)
    lines = text.splitlines()[:-1]
    assert len(lines) == len({(c.kind, c.axes) for c in spmd.collectives})
    for line in lines:
        over_x = "x" in line.split("(")[1].split(")")[0].split(",")
        assert line.endswith("<- crosses processes") == over_x, line
    across = sum(c.wire_bytes for c in spmd.collectives if "x" in c.axes)
    assert gv.units.format_bytes(across) in text.splitlines()[-1]


def test_devices_per_process_must_split_the_mesh():
    with pytest.raises(ValueError, match="not a whole number of processes of 3"):
        lp.process_of(gv.Mesh({"x": 2, "y": 4}), 3)
    assert lp.process_devices_text(gv.Mesh({"x": 2, "y": 2}), 2) == (
        "process 0: devices [0, 1] at (x=0,y=0), (x=0,y=1)\n"
        "process 1: devices [2, 3] at (x=1,y=0), (x=1,y=1)"
    )
