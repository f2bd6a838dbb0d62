"""One process vs two: the same 8-device program, and what the launcher costs (prints only).

1. Lesson 07's 2-D + weight-update-sharded Adam step (the zoo transformer, mesh x=2, y=4),
   partitioned by us, trained for a few steps in a loop (each step's outputs feed the next):
   median step time on 2 processes x 4 devices (python -m gspmd_viz.launch, gloo over
   127.0.0.1) / on this one process with 8 devices; the losses of both runs compared.
   The launched runs use gloo for every collective, inside a process too, so 1 process x 8
   through the launcher separates what gloo costs from what the process boundary costs.
2. Launcher overhead: wall time of `launch` of a script that only asks jax for its devices,
   P processes x 4 devices, against the same script run plainly in one process.

This process is the driver: it measures the one-process side and launches the other, which
runs this same file (the launcher marks it). The two sides cannot alternate (they need
different processes), so each is a median of many steps on the same machine, one after the
other.

Run: PYTHONPATH=. .venv/bin/python benchmarks/distributed.py

Measured here (2 cores shared with other jobs, load average 9-11, so +-3x between runs):
- lesson 07 size: 1 process 9-28 ms per step; 2 processes x 4 270-410 ms (10-46x);
  1 process x 8 through gloo 110-120 ms, so the process boundary alone is 2.3-3.7x.
- wider: 1 process 61-116 ms; 2 processes x 4 0.55-3.0 s; 1 x 8 through gloo 270-380 ms.
- losses: never bit-equal (gloo sums in another order), largest relative difference
  1.9e-7 (lesson size) and 1.1e-7 (wider) over 18 steps.
- launcher: plain + 0.2-1.0 s for 1 process, plain + 0.7-1.8 s for 2 (each process
  imports jax and joins the coordinator; the two share 2 cores).
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from gspmd_viz import launch

IS_WORKER = launch.ENV_PREFIX + "PROCESS_ID" in os.environ
if not IS_WORKER:
    import gspmd_viz as gv

    gv.use_cpu_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import gspmd_viz as gv  # noqa: E402
from gspmd_viz.zoo import examples  # noqa: E402
from gspmd_viz.zoo import training as tz  # noqa: E402

SIZES = {  # name -> tz.init keyword arguments
    "lesson 07 size": {},
    "wider (model 256, hidden 1024, seq 64)": {"model": 256, "hidden": 1024, "seq": 64},
}
WARMUP, STEPS = 3, 15
PROBE = "import jax\njax.devices()\n"


def train(size: dict) -> tuple[float, np.ndarray]:
    """(median seconds per step, losses) of the partitioned 2-D + WUS step, outputs fed back."""
    mesh = gv.Mesh({"x": 2, "y": 4})
    params, opt_state, batches = tz.init(layers=2, **size)
    step = gv.weight_update_sharding(tz.make_step(mesh, examples.TRANSFORMER_SPECS), mesh, "x")
    spmd = gv.partition(gv.propagate(gv.trace(step, params, opt_state, batches(0))))
    times, losses = [], []
    for i in range(WARMUP + STEPS):
        start = time.perf_counter()
        params, opt_state, loss = spmd(params, opt_state, batches(i))
        losses.append(float(loss))  # waits for the step
        times.append(time.perf_counter() - start)
    return statistics.median(times[WARMUP:]), np.array(losses)


def worker() -> None:
    for name, size in SIZES.items():
        seconds, losses = train(size)
        if jax.process_index() == 0:
            print(f"RESULT {name}|{seconds!r}|{' '.join(map(repr, losses.tolist()))}", flush=True)


def launched_results(processes: int, devices: int) -> dict:
    """{size name: (seconds per step, losses)} of `worker`, run by the launcher."""
    run = launch.launch(__file__, processes, devices, timeout=900)
    if run.returncode:
        outputs = "\n".join(run.text(i) for i in range(processes))
        sys.exit(f"the launched run failed: {run.message}\n{outputs}")
    found = {}
    for line in run.output[0]:
        if line.startswith("RESULT "):
            name, seconds, losses = line[len("RESULT ") :].split("|")
            found[name] = float(seconds), np.array([float(v) for v in losses.split()])
    return found


def compare_steps() -> None:
    launched = {
        "2 processes x 4 (gloo)": launched_results(2, 4),
        "1 process x 8 (gloo)": launched_results(1, 8),
    }
    for name, size in SIZES.items():
        one_s, one_losses = train(size)
        print(f"{name}: 1 process x 8, in-memory collectives: {1e3 * one_s:.1f} ms per step")
        for how, found in launched.items():
            seconds, losses = found[name]
            rel = np.max(np.abs(losses - one_losses) / np.abs(one_losses))
            print(
                f"  {how}: {1e3 * seconds:.1f} ms = {seconds / one_s:.2f}x; losses bit-equal "
                f"{np.array_equal(losses, one_losses)}, largest relative difference {rel:.1e}"
            )
        two, gloo_one = (launched[k][name][0] for k in launched)
        print(f"  the process boundary alone (2 x 4 over 1 x 8, both gloo): {two / gloo_one:.2f}x")


def wall_seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def launcher_overhead() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.py")
        with open(probe, "w") as f:
            f.write(PROBE)
        plain = statistics.median(
            wall_seconds(lambda: subprocess.run([sys.executable, probe], check=True))
            for _ in range(3)
        )
        print(f"plain `python probe.py` (one process): {plain:.2f} s")
        for processes in (1, 2):
            wall = statistics.median(
                wall_seconds(lambda p=processes: launch.launch(probe, p, 4)) for _ in range(3)
            )
            print(
                f"launch, {processes} process(es) x 4 devices: {wall:.2f} s = plain + "
                f"{wall - plain:.2f} s ({wall / plain:.2f}x)"
            )


if __name__ == "__main__":
    if IS_WORKER:
        worker()
    else:
        compare_steps()
        launcher_overhead()
