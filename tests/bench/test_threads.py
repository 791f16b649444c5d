"""`bench.threads`: CPU per span by thread, Python's threads named by their own names."""

from __future__ import annotations

import os

from bench.threads import cpu_by_thread, per_span


def test_cpu_is_charged_per_span_to_the_named_threads_pools_summed() -> None:
    before = {1: ("python", 1.0), 2: ("python", 0.5), 3: ("python", 0.0), 4: ("Unknown", 2.0)}
    after = {1: ("python", 1.5), 2: ("python", 0.75), 3: ("python", 0.25), 4: ("Unknown", 2.5)}
    after[5] = ("MergeMutate", 0.1)  # started during the load
    names = {1: "decode_0", 2: "commit_0", 3: "commit_1"}
    got = per_span(before, after, names, spans=1000)
    assert got == {"decode": 500.0, "commit": 500.0, "Unknown": 500.0, "MergeMutate": 100.0}


def test_this_process_threads_are_read() -> None:
    threads = cpu_by_thread(os.getpid())
    assert os.getpid() in threads and threads[os.getpid()][1] >= 0
