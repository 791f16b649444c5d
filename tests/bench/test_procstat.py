"""CPU accounting the benchmark divides by: per process tree and per thread name."""

from __future__ import annotations

import os
import threading
import time

from bench import procstat


def _spin(seconds: float) -> None:
    """Burn `seconds` of this thread's own CPU (not the process's)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_thread_cpu_is_split_by_thread_name_and_adds_up() -> None:
    spun, finish = threading.Event(), threading.Event()

    def worker() -> None:
        _spin(0.2)
        spun.set()
        finish.wait(30)  # stay alive: an ended thread leaves /proc/<pid>/task

    thread = threading.Thread(target=worker)
    before = procstat.thread_cpu_seconds(os.getpid())
    thread.start()
    try:
        _spin(0.2)
        assert spun.wait(30)
        after = procstat.thread_cpu_seconds(os.getpid())
    finally:
        finish.set()
        thread.join()
    assert after, "no threads read"
    # Both threads' 0.4 s show up (clock ticks are 10 ms; other threads only add).
    assert sum(after.values()) - sum(before.values()) >= 0.35
    assert sum(after.values()) <= procstat.cpu_seconds(os.getpid()) + 0.05
