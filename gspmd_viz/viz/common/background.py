"""Slow work off the kernel's thread: a widget answers a control at once and adds what a
slow job computes (XLA's compile, say) when it finishes.

`Background().run(work, apply)`: `work()` runs on a worker thread; `apply(result)` runs on
the kernel's event loop when one is running (widget updates stay on the kernel's thread),
else on the worker as soon as `work` returns. `wait()` blocks until every job has been
applied (tests, and scripts that want the finished picture).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: a script or a test
        return None


class Background:
    """One worker thread; jobs run in the order they were started."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gv-widget")
        self._open = 0  # jobs started and not yet applied
        self._idle = threading.Condition()

    def run(self, work, apply) -> None:
        """work() on the worker, then apply(its result or its exception) on the loop."""
        loop = _running_loop()
        with self._idle:
            self._open += 1

        def deliver(future: Future) -> None:
            try:
                apply(future.exception() or future.result())
            finally:
                with self._idle:
                    self._open -= 1
                    self._idle.notify_all()

        def finished(future: Future) -> None:
            if loop is not None and loop.is_running():
                loop.call_soon_threadsafe(deliver, future)
            else:
                deliver(future)

        self._pool.submit(work).add_done_callback(finished)

    def wait(self, timeout: float | None = 120.0) -> bool:
        """Block until every job started has been applied (False: timed out)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._open == 0, timeout)
