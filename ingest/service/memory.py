"""Giving memory back after load (glibc only; elsewhere every call here is a no-op).

Freed memory stays in glibc's heaps unless it is trimmed: after a burst of large
requests RSS would stay at its peak. So: a few arenas instead of one per thread
that ever allocated (decode, insert and gRPC threads each got their own, each
holding its own free memory), large blocks from mmap at a fixed threshold (they
go back to the system as soon as they are freed), and `malloc_trim` when the
receiver has had nothing in flight for a moment (after a garbage collection), off
the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
ARENAS = 4
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.malloc_trim  # noqa: B018  (glibc has it; musl and others do not)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def tune_allocator() -> None:
    """Before the service starts its threads (arena count applies to new arenas)."""
    if _LIBC is None:
        return
    _LIBC.mallopt(_M_ARENA_MAX, ARENAS)
    _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    _LIBC.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


def trim() -> None:
    """Collect cyclic garbage, then give free heap pages back to the system. Collections
    are triggered by allocations: once the load stops, cycles holding request bodies
    (a refused request's traceback keeps its frame) would otherwise live on."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Trimmer:
    """`soon()` from the event loop when the receiver went idle: if it is still idle
    `delay` seconds later, trim in a thread (at most once per `min_interval`). Under
    steady load the receiver is rarely idle that long, so trimming costs nothing then."""

    def __init__(
        self,
        is_idle: Callable[[], bool],
        delay: float = 2.0,
        min_interval: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        release: Callable[[], None] = trim,
    ) -> None:
        self._is_idle = is_idle
        self._delay = delay
        self._min_interval = min_interval
        self._monotonic = monotonic
        self._release = release
        self._last = -min_interval
        self._timer: asyncio.TimerHandle | None = None
        self._running = threading.Lock()
        self.trims = 0

    def soon(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._monotonic()
        if not self._is_idle() or now - self._last < self._min_interval:
            return
        if self._running.locked():
            return
        self._last = now
        threading.Thread(target=self._run, name="malloc-trim", daemon=True).start()

    def _run(self) -> None:
        with self._running:
            self._release()
            self.trims += 1
