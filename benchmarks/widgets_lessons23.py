"""Lessons 02 and 03 widgets: kernel-side time per control change and bytes sent per frame.

`PYTHONPATH=. python benchmarks/widgets_lessons23.py`. Each change is timed from setting the
control's value to the widget having rebuilt its views (what the kernel does before the comm
messages leave); bytes are the JSON of every widget state message that change sends (counted
by widgets_editor.Wire). A fresh frame (graphviz layout) and a cached one are both shown for the
animator. The browser side is timed by tests/test_browser_lessons23.py.
Goals (the widget rule): < 300 ms per redraw end to end, < 500 kB per frame.
"""

import functools
import statistics
import time

from widgets_editor import Wire

from gspmd_viz.units import format_bytes
from gspmd_viz.viz.ledger.widget import LedgerWidget
from gspmd_viz.viz.propagation.widget import PropagationWidget


def timed(change, repeats: int = 5, settle=None) -> tuple[float, int]:
    """change(i) makes the i-th change; median ms and the bytes of the last one. settle(),
    if given, runs before each change, untimed (background work of the change before)."""
    times, sent = [], 0
    for i in range(repeats):
        if settle:
            settle()
        with Wire() as wire:
            start = time.perf_counter()
            change(i)
            times.append(1e3 * (time.perf_counter() - start))
        sent = wire.bytes
    return statistics.median(times), sent


def cases():
    anim = PropagationWidget("transformer_block")
    fresh = iter(range(1, anim.slider.max))  # every frame drawn for the first time
    yield "animator: step, new frame", lambda i: setattr(anim.slider, "value", next(fresh))
    yield "animator: step, cached frame", lambda i: setattr(anim.slider, "value", 1 + i % 2)
    yield "animator: why? value", lambda i: setattr(anim.why, "value", ("an", "ad")[i % 2])
    dim = anim.editors["wq"][1]  # wq's N dim: y (the default) and not split, in turn
    yield "animator: annotation dropdown", lambda i: setattr(dim, "value", ("-", "y")[i % 2])
    bad = anim.editors["wq"][2]  # wq's D dim on x or y: used twice either way
    yield "animator: bad annotation (message)", lambda i: setattr(bad, "value", ("x", "y")[i % 2])
    over = PropagationWidget("transformer_block", xla=True)  # lesson 02's: overlay on
    odim = over.editors["wq"][1]

    def overlay_edit(i, wait=False):
        odim.value = ("-", "y")[i % 2]
        if wait:
            over.background.wait()

    def settle():  # the change before has finished; XLA's compile for the next not cached
        over.background.wait()
        over.xla_cache.clear()

    yield "animator + XLA overlay: dropdown", overlay_edit, settle
    yield "  ... until XLA's marks are drawn", functools.partial(overlay_edit, wait=True), settle
    ledger = LedgerWidget("mlp_train_step")
    chips = list(ledger.chip.options)
    yield "ledger: TPU dropdown", lambda i: setattr(ledger.chip, "value", chips[(i + 1) % 3])
    yield "ledger: device box", lambda i: setattr(ledger.device, "value", str(1 + i))
    yield "ledger: bad device (message)", lambda i: setattr(ledger.device, "value", str(99 + i))


if __name__ == "__main__":
    print(f"{'change':38} {'kernel ms':>10} {'sent':>10}")
    for what, change, *settle in cases():
        ms, sent = timed(change, settle=settle[0] if settle else None)
        print(f"{what:38} {ms:10.1f} {format_bytes(sent):>10}")
