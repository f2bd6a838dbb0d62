"""Run one script in P local processes joined by jax.distributed: several hosts, on one machine.

    python -m gspmd_viz.launch --processes 2 --devices-per-process 4 script.py [args ...]

Each process gets D simulated CPU devices and gloo collectives, then calls
`jax.distributed.initialize` (coordinator on 127.0.0.1 at a free port) BEFORE the script runs:
the script sees P * D global devices, exactly as it would on a cluster after the cluster's own
`jax.distributed.initialize()` (auto-detected there: TPU pod slices, SLURM, ...). On a real
cluster nothing else changes: the script runs once per host, with no launcher.

Output is forwarded line by line with a `[p0] ` prefix. A process that fails stops the others
(they would wait for it forever inside a collective); so do the timeout and Ctrl-C. Every
process runs in its own session and is killed as a group: none is left behind.
`launch(...)` does the same from Python and returns each process's output.
"""

import argparse
import contextlib
import dataclasses
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

# The worker's settings travel in the environment (the script's own argv stays untouched).
ENV_PREFIX = "GSPMD_VIZ_LAUNCH_"
KILL_GRACE_S = 1.0  # jax catches SIGTERM (preemption notice): SIGKILL follows


@dataclasses.dataclass(frozen=True)
class LaunchResult:
    """What `launch` saw: 0 when every process exited cleanly, else the first failure's code
    (124: timed out); `output[i]` holds process i's lines, unprefixed, in order."""

    returncode: int
    output: list
    message: str  # "" on success, else one line saying which process failed and how
    pids: tuple  # the processes' ids (all ended by the time launch returns)

    def text(self, process: int) -> str:
        return "\n".join(self.output[process])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now (the coordinator's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_counts(processes, devices_per_process, timeout) -> None:
    for name, value in (("processes", processes), ("devices_per_process", devices_per_process)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"launch needs a positive whole number of {name}, got {value!r}")
    if not timeout > 0:
        raise ValueError(f"launch needs a positive timeout in seconds, got {timeout!r}")


def _worker_env(process_id: int, processes: int, devices: int, port: int) -> dict:
    env = dict(os.environ)
    env.update(
        {
            ENV_PREFIX + "PROCESS_ID": str(process_id),
            ENV_PREFIX + "PROCESSES": str(processes),
            ENV_PREFIX + "DEVICES": str(devices),
            ENV_PREFIX + "COORDINATOR": f"127.0.0.1:{port}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _start(script: str, args, process_id: int, processes: int, devices: int, port: int):
    command = [sys.executable, "-m", "gspmd_viz.launch", "--worker", script, *args]
    return subprocess.Popen(
        command,
        env=_worker_env(process_id, processes, devices, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: killed whole, children included
    )


def _forward(proc, process_id: int, lines: list, echo) -> threading.Thread:
    def pump():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if echo is not None:
                echo.write(f"[p{process_id}] {line}")
                echo.flush()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _stop_all(procs) -> None:
    """SIGTERM every process group still running, then SIGKILL what is left after a grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + KILL_GRACE_S
        while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
    for p in procs:
        p.wait()


def _watch(procs, timeout: float) -> tuple[int, str]:
    """Wait until all exit cleanly, one fails, or the timeout passes: (code, message)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            i, code = failed[0]
            return code, f"process {i} exited with code {code}; the others were stopped"
        if all(c == 0 for c in codes):
            return 0, ""
        time.sleep(0.05)
    return 124, f"timed out after {timeout:g} s; every process was stopped"


def launch(
    script: str,
    processes: int = 2,
    devices_per_process: int = 4,
    args=(),
    timeout: float = 300.0,
    echo=None,
) -> LaunchResult:
    """Run `script` in `processes` local processes of `devices_per_process` CPU devices each.

    `echo`: a stream (e.g. sys.stdout) to forward prefixed lines to as they come."""
    _check_counts(processes, devices_per_process, timeout)
    if not os.path.isfile(script):
        raise FileNotFoundError(f"launch: no script at {script!r}")
    port = free_port()
    output = [[] for _ in range(processes)]
    procs, pumps = [], []
    try:
        for i in range(processes):
            procs.append(_start(script, args, i, processes, devices_per_process, port))
            pumps.append(_forward(procs[-1], i, output[i], echo))
        code, message = _watch(procs, timeout)
    finally:  # a failure, the timeout, Ctrl-C or a bug here: nothing is left running
        _stop_all(procs)
    for pump in pumps:
        pump.join(timeout=KILL_GRACE_S)
    return LaunchResult(code, output, message, tuple(p.pid for p in procs))


# --- inside each process ----------------------------------------------------------------------


def initialize() -> None:
    """One line for a script that runs both ways: `jax.distributed.initialize()` with the
    cluster's auto-detection on a real cluster; nothing under this launcher (already done)."""
    if ENV_PREFIX + "PROCESS_ID" not in os.environ:
        import jax

        jax.distributed.initialize()


def _join_from_env() -> None:
    """Set this process's devices and gloo, then join the others (before the script runs)."""
    import jax

    env = {k[len(ENV_PREFIX) :]: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    jax.config.update("jax_num_cpu_devices", int(env["DEVICES"]))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=env["COORDINATOR"],
        num_processes=int(env["PROCESSES"]),
        process_id=int(env["PROCESS_ID"]),
    )


def _exit_now(code: int) -> None:
    """Exit at once: jax.distributed's exit hook would wait for the other processes forever."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_worker(script: str, args) -> None:
    _join_from_env()
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code in (None, 0):
            raise
        if not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        _exit_now(stop.code if isinstance(stop.code, int) else 1)
    except BaseException:
        traceback.print_exc()
        _exit_now(1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gspmd_viz.launch",
        description="Run a script in P local processes joined by jax.distributed (CPU, gloo).",
    )
    parser.add_argument("--processes", type=int, default=2, help="processes to start (P)")
    parser.add_argument("--devices-per-process", type=int, default=4, help="CPU devices each (D)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before all stop")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("script", help="the Python script every process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return parser


def main(argv=None) -> int:
    ns = _parser().parse_args(argv)
    if ns.worker:
        _run_worker(ns.script, ns.args)
        return 0
    try:
        result = launch(
            ns.script, ns.processes, ns.devices_per_process, ns.args, ns.timeout, echo=sys.stdout
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"gspmd_viz.launch: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # launch() has already stopped every process
        print("gspmd_viz.launch: interrupted; every process was stopped", file=sys.stderr)
        return 130
    if result.returncode:
        print(f"gspmd_viz.launch: {result.message}", file=sys.stderr)
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


if __name__ == "__main__":
    sys.exit(main())
