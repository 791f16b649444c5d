"""Giving memory back: once the receiver has stayed idle for a moment it trims, off
the event loop, at most once per interval; a receiver busy again does not."""

from __future__ import annotations

import asyncio
import threading

from ingest.edge.admission import Admission
from ingest.service.memory import Trimmer


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


async def _until(condition: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, what
        await asyncio.sleep(0.01)


async def test_trims_after_staying_idle_in_a_thread_once_per_interval() -> None:
    clock = FakeClock()
    threads: list[str] = []
    admission = Admission(max_bytes=1 << 30)
    trimmer = Trimmer(
        lambda: not admission.inflight_bytes,
        delay=0.05,
        min_interval=10.0,
        monotonic=clock,
        release=lambda: threads.append(threading.current_thread().name),
    )
    admission.on_idle = trimmer.soon
    with admission.admit(10), admission.admit(10):
        pass  # the inner one ends with the outer still in flight: not idle yet
    await _until(lambda: trimmer.trims == 1, "first trim")
    assert threads == ["malloc-trim"]

    # Idle again within the interval: no second trim.
    with admission.admit(10):
        pass
    await asyncio.sleep(0.2)
    assert trimmer.trims == 1

    # Idle, then busy again before the delay ran out: no trim either.
    clock.now += 20
    with admission.admit(10):
        pass
    with admission.admit(10):
        await asyncio.sleep(0.2)
    assert trimmer.trims == 1

    # Idle and staying idle past the interval: trimmed again.
    await _until(lambda: trimmer.trims == 2, "second trim")
    assert threads == ["malloc-trim", "malloc-trim"]
