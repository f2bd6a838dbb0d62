"""Several processes: the launcher, and partitioned programs on 2 processes x 4 CPU devices
(jax.distributed over gloo on 127.0.0.1) against the same programs in this one process."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import distributed_programs
import numpy as np
import pytest

from gspmd_viz.launch import launch

HERE = Path(__file__).parent


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _tolerance(want) -> dict:
    # float32 sums in another order (gloo's reductions across processes): a few ulps of the
    # largest value; Adam's m/sqrt(v) magnifies them in the updated weights
    return {"rtol": 1e-5, "atol": 1e-5 * max(1.0, float(np.max(np.abs(want))))}


def test_two_processes_compute_what_one_process_computes(tmp_path):
    run = launch(str(HERE / "distributed_programs.py"), 2, 4, args=[str(tmp_path)], timeout=300)
    assert run.returncode == 0, run.message + "\n" + run.text(0) + "\n" + run.text(1)
    assert "process 0 of 2: devices [0, 1, 2, 3]" in run.output[0]
    want = distributed_programs.flat(distributed_programs.results())  # this process, 8 devices
    for process in (0, 1):
        got = np.load(tmp_path / f"p{process}.npz")
        assert sorted(got.files) == sorted(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, err_msg=name, **_tolerance(value))


def test_a_failing_process_fails_the_launch_with_its_message_and_stops_the_others(tmp_path):
    script = _script(
        tmp_path,
        """
        import time, jax
        if jax.process_index() == 1:
            raise SystemExit("process 1 gives up")
        time.sleep(600)  # process 0 would wait for process 1 forever
        """,
    )
    start = time.monotonic()
    run = launch(script, 2, 1, timeout=120)
    assert time.monotonic() - start < 60
    assert run.returncode == 1
    assert run.message == "process 1 exited with code 1; the others were stopped"
    assert "process 1 gives up" in run.output[1]
    assert all(_gone(pid) for pid in run.pids)


def test_a_mesh_that_leaves_a_process_out_is_a_clear_error(tmp_path):
    script = _script(
        tmp_path,
        """
        import jax.numpy as jnp
        import gspmd_viz as gv
        mesh = gv.Mesh({"x": 1})  # process 0's one device only
        x = jnp.ones((2, 2))
        gv.partition(gv.propagate(gv.trace(lambda a: a * 2, x), mesh=mesh))(x)
        """,
    )
    run = launch(script, 2, 1, timeout=120)
    assert run.returncode == 1
    want = "ValueError: the mesh uses 1 of the 2 devices and process 1 owns none of them"
    assert any(line.startswith(want) for line in run.output[1]), run.text(1)


def test_a_hung_run_times_out_and_leaves_nothing_behind(tmp_path):
    script = _script(tmp_path, "import time\ntime.sleep(600)\n")
    run = launch(script, 2, 1, timeout=2)
    assert (run.returncode, run.message) == (124, "timed out after 2 s; every process was stopped")
    assert all(_gone(pid) for pid in run.pids)


def _pids_printed(stream, count: int) -> list:
    pids = []
    while len(pids) < count:
        line = stream.readline()
        assert line, "the launcher ended before its processes started"
        if " pid " in line:
            pids.append(int(line.split()[-1]))
    return pids


def test_ctrl_c_stops_every_process(tmp_path):
    body = "import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(600)\n"
    cli = [sys.executable, "-m", "gspmd_viz.launch", "--processes", "2"]
    launcher = subprocess.Popen(
        [*cli, "--devices-per-process", "1", _script(tmp_path, body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = _pids_printed(launcher.stdout, 2)
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 130
    assert "interrupted; every process was stopped" in err
    assert all(_gone(pid) for pid in pids)


def test_bad_launch_requests_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="positive whole number of processes, got 0"):
        launch(_script(tmp_path, ""), processes=0)
    with pytest.raises(FileNotFoundError, match="no script at"):
        launch(str(tmp_path / "missing.py"))
