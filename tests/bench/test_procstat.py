"""CPU accounting the benchmark divides by: per process tree and per thread name."""

from __future__ import annotations

import os
import threading
import time

from bench import procstat


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_thread_cpu_is_split_by_thread_name_and_adds_up() -> None:
    worker = threading.Thread(target=_spin, args=(0.3,))
    worker.start()
    before = procstat.thread_cpu_seconds(os.getpid())
    _spin(0.2)
    after = procstat.thread_cpu_seconds(os.getpid())
    worker.join()
    assert after, "no threads read"
    assert sum(after.values()) >= sum(before.values()) + 0.1
    assert sum(after.values()) <= procstat.cpu_seconds(os.getpid()) + 0.05
