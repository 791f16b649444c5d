"""Admission on arrival: the memory and the queue time of requests in flight are bounded.

A request is counted from the moment its body has been read until it is answered,
at what it costs in memory while it is decoded and held: its (decompressed) bytes
times the expansion of its encoding (the parsed protobuf, the decoded models and
the rows built from them are many times the wire size; `bench/memory.py` measures
it). Past `max_bytes` it is refused at once with a retryable `Backpressure`. A
request larger than the whole budget is still admitted when nothing else is in
flight, so any request up to `--max-request-bytes` can pass.

It is also refused when the requests already in flight would keep it waiting longer
than `max_queue_seconds`: the drain rate is measured (bytes answered per second of
busy time, decayed so it follows the recent load), and the expected wait is what is
in flight divided by it. Overload then turns into 429 / RESOURCE_EXHAUSTED with a
retry delay long before a client's export timeout, never into a growing queue.

`ReadGate` bounds how many request bodies are being received at once: a body's size
is known only once it has arrived, so reading is where memory is bounded by count.
Used from the event loop only, so nothing here needs a lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import NoReturn

from ingest.errors import Backpressure

Monotonic = Callable[[], float]

# Memory a request holds per byte of its decompressed body, from arrival to answer:
# the body, the parsed protobuf (upb), the validated models and the insert rows.
# OTLP/JSON holds its parsed document instead of a larger protobuf per byte.
PROTOBUF_EXPANSION = 14.0
JSON_EXPANSION = 12.0
# The drain rate follows the load of about the last few seconds.
RATE_HALF_LIFE_SECONDS = 5.0
# Busy time before the measured rate is trusted for queue-time refusals.
MIN_BUSY_SECONDS = 0.5
MAX_RETRY_AFTER_SECONDS = 30.0


class Admission:
    def __init__(
        self,
        max_bytes: int,
        retry_after_seconds: float = 1.0,
        max_queue_seconds: float = 3.0,
        monotonic: Monotonic = time.monotonic,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_queue_seconds = max_queue_seconds
        self.inflight_bytes = 0  # memory cost of the requests admitted
        self.inflight_wire_bytes = 0
        self.refused = 0
        self.refused_for_queue = 0
        self._retry_after = retry_after_seconds
        self._monotonic = monotonic
        self.on_idle = on_idle
        self._done_bytes = 0.0
        self._busy_seconds = 0.0
        self._updated = monotonic()

    def drain_rate(self) -> float | None:
        """Bytes answered per busy second lately; None until enough was measured."""
        self._advance()
        if self._busy_seconds < MIN_BUSY_SECONDS or self._done_bytes <= 0:
            return None
        return self._done_bytes / self._busy_seconds

    def expected_wait(self, size_bytes: int) -> float | None:
        """Seconds until a request of `size_bytes` admitted now would be answered."""
        rate = self.drain_rate()
        if rate is None:
            return None
        return (self.inflight_wire_bytes + size_bytes) / rate

    def check_room(self) -> None:
        """Before a body is read: refuse at once when no request could be admitted now
        (the budget is spent, or what is in flight alone would wait too long), so a
        request that would be refused does not cost its read."""
        if not self.inflight_bytes:
            return
        if self.inflight_bytes >= self.max_bytes:
            self.refused += 1
            raise Backpressure(
                f"requests in flight hold an estimated {self.inflight_bytes} bytes of memory"
                f" (limit {self.max_bytes}); retry later",
                self._retry_after,
            )
        wait = self.expected_wait(0)
        if wait is not None and wait > self.max_queue_seconds:
            self._refuse_for_queue(wait)

    @contextmanager
    def admit(self, size_bytes: int, expansion: float = PROTOBUF_EXPANSION) -> Iterator[None]:
        """Hold the cost of a request of `size_bytes` for the body of the `with`."""
        cost = int(size_bytes * expansion)
        self._check(size_bytes, cost)
        self._advance()
        self.inflight_bytes += cost
        self.inflight_wire_bytes += size_bytes
        try:
            yield
        finally:
            self._advance()
            self.inflight_bytes -= cost
            self.inflight_wire_bytes -= size_bytes
            self._done_bytes += size_bytes
            if not self.inflight_bytes and self.on_idle is not None:
                self.on_idle()

    def _check(self, size_bytes: int, cost: int) -> None:
        if not self.inflight_bytes:
            return
        if self.inflight_bytes + cost > self.max_bytes:
            self.refused += 1
            raise Backpressure(
                f"requests in flight hold an estimated {self.inflight_bytes} bytes of memory"
                f" (limit {self.max_bytes}); retry later",
                self._retry_after,
            )
        wait = self.expected_wait(size_bytes)
        if wait is not None and wait > self.max_queue_seconds:
            self._refuse_for_queue(wait)

    def _refuse_for_queue(self, wait: float) -> NoReturn:
        self.refused += 1
        self.refused_for_queue += 1
        retry = min(max(self._retry_after, wait - self.max_queue_seconds), MAX_RETRY_AFTER_SECONDS)
        raise Backpressure(
            f"requests in flight would keep this one waiting about {wait:.1f}s"
            f" (limit {self.max_queue_seconds:g}s); retry later",
            retry,
        )

    def _advance(self) -> None:
        """Count busy time since the last update and decay the measurements."""
        now = self._monotonic()
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        if elapsed == 0.0:
            return
        decay = 0.5 ** (elapsed / RATE_HALF_LIFE_SECONDS)
        busy = elapsed if self.inflight_wire_bytes else 0.0
        self._done_bytes *= decay
        self._busy_seconds = self._busy_seconds * decay + busy


class ReadGate:
    """At most `max_reads` bodies being received at once; a reader waits for a turn at
    most `max_wait_seconds`, then is refused with a retry delay."""

    def __init__(self, max_reads: int, max_wait_seconds: float, retry_after: float = 1.0) -> None:
        self.max_reads = max_reads
        self._slots = asyncio.Semaphore(max_reads)
        self._max_wait = max_wait_seconds
        self._retry_after = retry_after
        self.reading = 0

    @asynccontextmanager
    async def reading_turn(self) -> AsyncIterator[None]:
        try:
            await asyncio.wait_for(self._slots.acquire(), self._max_wait)
        except TimeoutError:
            raise Backpressure(
                f"{self.max_reads} requests are being received; retry later", self._retry_after
            ) from None
        self.reading += 1
        try:
            yield
        finally:
            self.reading -= 1
            self._slots.release()
