"""CPU time and memory of process trees, read from /proc (Linux only).

CPU of a path is the sum over its processes of utime+stime of each live process
in the tree plus cutime+cstime (children already reaped), so helper processes a
service forks are counted too. Peak RSS is VmHWM, the kernel's high-water mark.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def _stat_fields(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces and parentheses: split after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _parents() -> dict[int, int]:
    """pid -> ppid of every process (this kernel has no /proc/<pid>/task/*/children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat_fields(int(entry.name))[1])
            except (OSError, ValueError):
                continue
    return parents


def tree(pid: int) -> list[int]:
    """`pid` and all its live descendants."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        queue.extend(children.get(current, ()))
    return pids


def cpu_seconds(pid: int) -> float:
    """user+system CPU of `pid`, its threads, and its reaped children."""
    fields = _stat_fields(pid)
    # fields[0] is state (field 3); utime..cstime are fields 14..17.
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """user+system CPU of `pid`'s live threads, summed by thread name: chDB names its
    threads (`MergeMutate` for background merges, `ThreadPool` for insert work),
    Python threads are all `python`."""
    by_name: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            raw = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended between listing and reading
        fields = raw[raw.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        by_name[name] = by_name.get(name, 0.0) + seconds
    return by_name


def tree_cpu_seconds(roots: Iterable[int]) -> float:
    total = 0.0
    for root in roots:
        for pid in tree(root):
            try:
                total += cpu_seconds(pid)
            except (OSError, ValueError):
                continue  # exited between listing and reading
    return total


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def tree_kib(roots: Iterable[int], key: str) -> int:
    total = 0
    for root in roots:
        for pid in tree(root):
            try:
                total += _status_kib(pid, key)
            except (OSError, ValueError):
                continue
    return total


def peak_rss_mib(roots: Iterable[int]) -> float:
    """Sum of VmHWM over the trees (an upper bound when peaks did not coincide)."""
    return tree_kib(roots, "VmHWM") / 1024


def rss_mib(roots: Iterable[int]) -> float:
    return tree_kib(roots, "VmRSS") / 1024


@dataclass
class RssSampler:
    """Samples the trees' current RSS in a thread: a time series for overload runs."""

    roots: list[int]
    every_seconds: float = 0.5

    def __post_init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(rss_mib(self.roots))
            self._stop.wait(self.every_seconds)

    @property
    def max_mib(self) -> float:
        return max(self.samples, default=0.0)
