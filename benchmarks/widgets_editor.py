"""Lesson 01's sharding editor: kernel-side time per control change and bytes sent per frame.

`PYTHONPATH=. python benchmarks/widgets_editor.py`. Each change is timed from setting the
control's value to the editor having rebuilt every view (what the kernel does before the comm
messages leave); bytes are the JSON of every widget state message that change sends. The
browser side (comm round trip plus plotly drawing) is timed by tests/test_browser.py.
Goals (the widget rule): < 300 ms per redraw end to end, < 500 kB per frame.
"""

import json
import statistics
import time

import gspmd_viz as gv

gv.use_cpu_devices(8)

from ipywidgets import Widget  # noqa: E402

from gspmd_viz.units import format_bytes  # noqa: E402
from gspmd_viz.viz.arrays.editor import ShardingEditor  # noqa: E402


class Wire:
    """Counts the bytes of every message the widgets would send to the browser."""

    def __init__(self) -> None:
        self.bytes = 0
        self._send = Widget._send

    def __enter__(self):
        wire = self

        def send(widget, msg, buffers=None):
            wire.bytes += len(json.dumps(msg, default=str)) + sum(len(b) for b in buffers or ())

        Widget._send = send
        return self

    def __exit__(self, *exc):
        Widget._send = self._send


CASES = [  # (what, editor kwargs, the change)
    ("dim dropdown, 2x4 mesh", dict(mesh="x=2, y=4", shape="8, 8"), ("dim1", "y")),
    ("dtype dropdown, 2x4 mesh", dict(mesh="x=2, y=4", shape="8, 8"), ("dtype", "bfloat16")),
    ("shape text, uneven", dict(mesh="x=2, y=4", shape="8, 8"), ("shape", "7, 6")),
    ("mesh text, 64 devices", dict(mesh="x=2, y=4", shape="16, 16"), ("mesh", "x=8, y=8")),
    ("dim dropdown, 64 devices", dict(mesh="x=8, y=8", shape="16, 16"), ("dim1", "y")),
    ("dim dropdown, 4096 devices", dict(mesh="x=64, y=64", shape="128, 128"), ("dim1", "y")),
    ("HloSharding text, 2x4", dict(mesh="x=2, y=4", shape="8, 8"), ("hlo", "{devices=[2,4]<=[8]}")),
    ("bad mesh text (message)", dict(mesh="x=2, y=4", shape="8, 8"), ("mesh", "x=2, x=4")),
]


CONTROLS = {"dtype": "dtype", "shape": "shape_text", "mesh": "mesh_text", "hlo": "hlo_text"}


def apply(e: ShardingEditor, change) -> None:
    what, value = change
    control = e.dims[1] if what == "dim1" else getattr(e, CONTROLS[what])
    control.value = value


def measure(kwargs, change, repeats: int = 5) -> tuple[float, int]:
    times, sent = [], 0
    for _ in range(repeats):
        e = ShardingEditor(spec=("x",), **kwargs)
        with Wire() as wire:
            start = time.perf_counter()
            apply(e, change)
            times.append(1e3 * (time.perf_counter() - start))
        sent = wire.bytes
    return statistics.median(times), sent


if __name__ == "__main__":
    print(f"{'change':32} {'kernel ms':>10} {'sent':>10}")
    for what, kwargs, change in CASES:
        ms, sent = measure(kwargs, change)
        print(f"{what:32} {ms:10.1f} {format_bytes(sent):>10}")
