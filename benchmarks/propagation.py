"""Propagation timings, measured side by side in one run (medians of several runs).

.venv/bin/python benchmarks/propagation.py
"""

import statistics

import gspmd_viz as gv

gv.use_cpu_devices(8)

import control_flow  # noqa: E402  (benchmarks/ is the script's directory)
import jax  # noqa: E402
from timing import median_ms  # noqa: E402

from gspmd_viz.zoo import examples  # noqa: E402


def paired_ms(a, b, repeat: int = 15) -> tuple[float, float]:
    """Medians of a and b, run alternately so machine noise hits both alike."""
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(median_ms(a, 1))
        tb.append(median_ms(b, 1))
    return statistics.median(ta), statistics.median(tb)


def traced(name: str, mesh=None, symbolic: bool = True):
    ex = examples.get(name, mesh, symbolic=symbolic)
    return ex, gv.trace(ex.fn, *ex.args)


def main() -> None:
    _, block = traced("transformer_block")
    _, stack = traced("transformer_stack")
    _, block_big = traced("transformer_block", {"x": 64, "y": 64})
    _, stack_big = traced("transformer_stack", {"x": 64, "y": 64})
    t_block, t_block_big = paired_ms(lambda: gv.propagate(block), lambda: gv.propagate(block_big))
    t_stack, t_stack_big = paired_ms(
        lambda: gv.propagate(stack), lambda: gv.propagate(stack_big), repeat=5
    )
    print(f"propagate transformer block ({len(block.equations)} eqns):   {t_block:8.1f} ms")
    print(f"propagate 24-layer stack ({len(stack.equations)} eqns):    {t_stack:8.1f} ms")
    print(f"64x64 / 2x4 mesh, block:  {t_block_big / t_block:5.2f}  (goal <= 1.2)")
    print(f"64x64 / 2x4 mesh, stack:  {t_stack_big / t_stack:5.2f}  (goal <= 1.2)")

    ex = examples.get("transformer_block")
    ours = median_ms(lambda: gv.propagate(gv.trace(ex.fn, *ex.args)))
    # a fresh function each time, so jax's caches cannot skip the lowering or the compile
    xla = median_ms(lambda: jax.jit(lambda *a: ex.fn(*a)).lower(*ex.args).compile(), repeat=3)
    print(
        f"ours trace+propagate {ours:7.1f} ms  vs XLA lower+compile {xla:7.1f} ms  "
        f"(ratio {ours / xla:.2f}, informational)"
    )

    from gspmd_viz.viz.propagation.widget import PropagationWidget

    widget = PropagationWidget("transformer_block")
    edits = []
    for value in ("y", "x") * 4:
        widget.repropagate({**widget.example.specs, "x": (value, None, None)})
        edits.append(widget.repropagate_ms)
    print(f"widget re-propagate after an edit: {statistics.median(edits):7.1f} ms  (goal < 150)")
    print("control flow: a scanned stack is propagated and partitioned once, whatever its trips")
    control_flow.main()


if __name__ == "__main__":
    main()
