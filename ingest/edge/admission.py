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

`ReadGate` bounds how many request bodies are being received at once, in all and per
principal: a body's size is known only once it has arrived, so reading is where
memory is bounded by count, and a principal's share is what its slow bodies can hold.
`MinimumRate` says when a body arrives too slowly to keep its turn. Used from the
event loop only, so nothing here needs a lock.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NoReturn

from ingest.errors import Backpressure

Monotonic = Callable[[], float]

# Memory a request holds from arrival to answer: per byte of its decompressed body
# (the body, the parsed protobuf or JSON document, the strings it holds) plus per span
# (the validated models and the insert rows, about 8 KiB whatever the span's size).
# Fitted on realistic 1.5 KB spans and minimal 0.2 KB ones (`python -m bench.memory
# --expansion`): with bytes alone, a request of small spans costs four times what a
# request of the same size of realistic spans does.
PROTOBUF_EXPANSION = 6.0
JSON_EXPANSION = 6.0
SPAN_COST = 8 * 1024
# The drain rate follows the load of about the last few seconds.
RATE_HALF_LIFE_SECONDS = 5.0
# Busy time before the measured rate is trusted for queue-time refusals.
MIN_BUSY_SECONDS = 0.5
MAX_RETRY_AFTER_SECONDS = 30.0
# The busy time and the decay are brought up to date at most this often.
ADVANCE_SECONDS = 0.001


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

    def admit(self, size_bytes: int, expansion: float = PROTOBUF_EXPANSION) -> Held:
        """Hold the cost of a request of `size_bytes` for the body of the `with` (the
        returned `Held`); once it is parsed, `Held.spans` adds what its spans cost. A
        plain object, not a generator: it is entered once for every request."""
        cost = int(size_bytes * expansion)
        self._check(size_bytes, cost)
        self._advance(force=not self.inflight_wire_bytes)
        self.inflight_bytes += cost
        self.inflight_wire_bytes += size_bytes
        return Held(self, cost, size_bytes)

    def _release(self, held: Held) -> None:
        """`held`'s request was answered (or failed): its cost is free again."""
        self._advance(force=held.size_bytes >= self.inflight_wire_bytes)
        self.inflight_bytes -= held.cost
        self.inflight_wire_bytes -= held.size_bytes
        self._done_bytes += held.size_bytes
        if not self.inflight_bytes and self.on_idle is not None:
            self.on_idle()

    def _grow(self, held: Held, extra: int) -> None:
        """`held` costs `extra` more: refused past the budget unless it is alone."""
        if self.inflight_bytes > held.cost and self.inflight_bytes + extra > self.max_bytes:
            self.refused += 1
            raise Backpressure(
                f"requests in flight hold an estimated {self.inflight_bytes} bytes of memory"
                f" and this one's spans {extra} more (limit {self.max_bytes}); retry later",
                self._retry_after,
            )
        self.inflight_bytes += extra
        held.cost += extra

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

    def _advance(self, force: bool = False) -> None:
        """Count busy time since the last update and decay the measurements: at most
        once a millisecond (`ADVANCE_SECONDS`), not at each of the four calls a request
        makes, unless `force`d where requests in flight start or stop (an interval left
        over is then all busy or all idle, and counts as such at the next update)."""
        now = self._monotonic()
        elapsed = now - self._updated
        if elapsed < ADVANCE_SECONDS and not force:
            return
        self._updated = now
        if elapsed <= 0.0:
            return
        decay = 0.5 ** (elapsed / RATE_HALF_LIFE_SECONDS)
        busy = elapsed if self.inflight_wire_bytes else 0.0
        self._done_bytes *= decay
        self._busy_seconds = self._busy_seconds * decay + busy


class Held:
    """An admitted request's share of the budget, held until its `with` ends."""

    __slots__ = ("_admission", "cost", "size_bytes")

    def __init__(self, admission: Admission, cost: int, size_bytes: int = 0) -> None:
        self._admission = admission
        self.cost = cost
        self.size_bytes = size_bytes

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self._admission._release(self)

    def spans(self, count: int, span_cost: int = SPAN_COST) -> None:
        """Add the cost of `count` parsed spans (or raise `Backpressure`)."""
        self._admission._grow(self, count * span_cost)


class ReadGate:
    """At most `max_reads` bodies being received at once, and at most `per_principal`
    of them for one principal (a token; a client address without tokens): one
    principal's slow bodies hold only its own share, never every turn. A turn that
    frees goes to the waiting principal holding the fewest turns (the longest waiting
    among equals). A reader waits for a turn at most `max_wait_seconds`, then is
    refused with a retry delay."""

    def __init__(
        self,
        max_reads: int,
        max_wait_seconds: float,
        per_principal: int | None = None,
        retry_after: float = 1.0,
    ) -> None:
        self.max_reads = max_reads
        self.per_principal = min(per_principal or max_reads, max_reads)
        self._max_wait = max_wait_seconds
        self._retry_after = retry_after
        self.reading = 0
        self._held: dict[Hashable, int] = {}
        self._waiting: dict[Hashable, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._arrivals = itertools.count()

    def held(self, principal: Hashable) -> int:
        return self._held.get(principal, 0)

    @asynccontextmanager
    async def reading_turn(self, principal: Hashable = None) -> AsyncIterator[None]:
        if not self.try_turn(principal):
            await self._wait(principal)
        try:
            yield
        finally:
            self._release(principal)

    def try_turn(self, principal: Hashable = None) -> bool:
        """Take a free turn at once (True), or say one must be waited for (`wait_turn`):
        the edge's way to a turn without a context manager's coroutine per request.
        A turn taken is given back with `end_turn`."""
        if self.reading < self.max_reads and self._held.get(principal, 0) < self.per_principal:
            self._take(principal)
            return True
        return False

    async def wait_turn(self, principal: Hashable = None) -> None:
        """Wait for a turn (`try_turn` found none free); refused after the wait limit."""
        await self._wait(principal)

    def end_turn(self, principal: Hashable = None) -> None:
        """Give back a turn taken by `try_turn` or `wait_turn`."""
        self._release(principal)

    async def _wait(self, principal: Hashable) -> None:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(principal, deque()).append((next(self._arrivals), turn))
        try:
            await asyncio.wait_for(turn, self._max_wait)
        except asyncio.CancelledError:  # the client went away: a turn it got is freed
            if turn.done() and not turn.cancelled():
                self._release(principal)
            raise
        except TimeoutError:
            mine = self.reading < self.max_reads  # its own share is what is taken
            raise Backpressure(
                f"{self.held(principal)} of this client's requests are being received"
                f" (at most {self.per_principal}); retry later"
                if mine
                else f"{self.max_reads} requests are being received; retry later",
                self._retry_after,
            ) from None
        finally:
            self._forget(principal, turn)

    def _take(self, principal: Hashable) -> None:
        self.reading += 1
        self._held[principal] = self.held(principal) + 1

    def _release(self, principal: Hashable) -> None:
        self.reading -= 1
        left = self.held(principal) - 1
        if left:
            self._held[principal] = left
        else:
            self._held.pop(principal, None)
        self._grant()

    def _grant(self) -> None:
        """Give free turns to waiting principals, fewest held first."""
        while self.reading < self.max_reads:
            eligible = [
                (self.held(who), queue[0][0], who)
                for who, queue in self._waiting.items()
                if queue and self.held(who) < self.per_principal
            ]
            if not eligible:
                return
            _, _, who = min(eligible, key=lambda item: item[:2])
            _, turn = self._waiting[who].popleft()
            if not self._waiting[who]:
                del self._waiting[who]
            if turn.done():  # timed out meanwhile
                continue
            self._take(who)
            turn.set_result(None)

    def _forget(self, principal: Hashable, turn: asyncio.Future[None]) -> None:
        queue = self._waiting.get(principal)
        if queue is None:
            return
        for entry in queue:
            if entry[1] is turn:
                queue.remove(entry)
                break
        if not queue:
            del self._waiting[principal]


@dataclass(frozen=True)
class MinimumRate:
    """A body must arrive at `bytes_per_second` on average, counted from the start of
    its reading, once `grace_seconds` have passed (Kestrel's MinRequestBodyDataRate:
    240 bytes/s after 5 s there); 0 bytes/s: no minimum."""

    bytes_per_second: float
    grace_seconds: float

    def deadline(self, started: float, received: int) -> float | None:
        """The latest time by which more of the body must have arrived."""
        if self.bytes_per_second <= 0:
            return None
        return started + max(self.grace_seconds, received / self.bytes_per_second)

    def describe(self) -> str:
        return f"{self.bytes_per_second:g} bytes/s (after {self.grace_seconds:g}s)"


NO_MINIMUM_RATE = MinimumRate(0, 0)
