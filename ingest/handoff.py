"""In-process hand-off for the embedded path: group commit into the store.

Requests wait in a queue; one writer task takes everything queued (up to
`max_batch_rows`), writes it with one insert per table, then acknowledges all
those requests together. While a write runs, new requests pile up for the next
one, so load makes inserts bigger rather than more numerous. Before writing, the
writer also waits (up to `commit_wait_seconds`) for requests that have already
arrived and are still being decoded (`arriving`): every insert writes a part that
ClickHouse must later merge, so under load a few large inserts cost far less CPU
than many small ones, while a lone request at light load is written at once.
Bytes waiting are bounded by `max_inflight_bytes`: past it, requests are refused
with `Backpressure` before anything is queued.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ingest.errors import Backpressure, Unavailable
from ingest.rows import TableRows, write_rows
from schemas.events import DecodedBatch
from schemas.store import Store

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class _Pending:
    batch: DecodedBatch
    receipt_id: str
    size_bytes: int
    done: asyncio.Future[None]

    @property
    def rows(self) -> int:
        """What a commit's row budget (`max_batch_rows`) counts for this request."""
        return len(self.batch.events) + len(self.batch.emissions)


class WriteObserver:
    """Hooks for metrics; the default does nothing."""

    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None:
        return None


class EmbeddedHandoff:
    def __init__(
        self,
        store: Store,
        max_inflight_bytes: int,
        max_batch_rows: int = 50_000,
        linger_seconds: float = 0.0,
        commit_wait_seconds: float = 0.1,
        retry_after_seconds: float = 1.0,
        clock: Clock = utc_now,
        observer: WriteObserver | None = None,
    ) -> None:
        self._store = store
        self._max_inflight = max_inflight_bytes
        self._max_rows = max_batch_rows
        self._linger = linger_seconds
        self._commit_wait = commit_wait_seconds
        self._arriving = 0
        self._retry_after = retry_after_seconds
        self._clock = clock
        self._observer = observer or WriteObserver()
        self._queue: list[_Pending] = []
        self._inflight_bytes = 0
        self._wakeup = asyncio.Event()
        self._closing = False
        self._writer: asyncio.Task[None] | None = None

    @property
    def inflight_bytes(self) -> int:
        return self._inflight_bytes

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """Mark a request as on its way (received, being decoded): a commit that is
        about to be written may wait for it to join. Exit before `submit`."""
        self._arriving += 1
        try:
            yield
        finally:
            self._arriving -= 1
            self._wakeup.set()

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="embedded-writer")

    async def submit(self, batch: DecodedBatch, receipt_id: str, size_bytes: int) -> None:
        if self._closing:
            raise Unavailable("receiver is shutting down", self._retry_after)
        if self._inflight_bytes and self._inflight_bytes + size_bytes > self._max_inflight:
            raise Backpressure(
                f"{self._inflight_bytes} bytes are waiting to be written"
                f" (limit {self._max_inflight}); retry later",
                self._retry_after,
            )
        self.start()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(batch, receipt_id, size_bytes, done))
        self._inflight_bytes += size_bytes
        self._wakeup.set()
        await asyncio.shield(done)

    async def close(self) -> None:
        """Write everything still queued, then stop the writer."""
        self._closing = True
        self._wakeup.set()
        if self._writer is not None:
            await self._writer
            self._writer = None

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._linger and not self._closing:
                await asyncio.sleep(self._linger)
            await self._gather()
            await self._write(self._take())

    async def _gather(self) -> None:
        """Wait, up to the commit wait, while requests already received are still
        being decoded and the queue is below a full batch."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._commit_wait
        while self._arriving and not self._closing and self._queued_rows() < self._max_rows:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                return

    def _queued_rows(self) -> int:
        return sum(p.rows for p in self._queue)

    def _take(self) -> list[_Pending]:
        taken: list[_Pending] = []
        rows = 0
        while self._queue and (not taken or rows < self._max_rows):
            pending = self._queue.pop(0)
            taken.append(pending)
            rows += pending.rows
        return taken

    async def _write(self, taken: list[_Pending]) -> None:
        rows = TableRows()
        received_at = self._clock()
        # Queue order is arrival order: of two versions of one event id in this commit,
        # the later request's wins (see `ingest.rows.ingest_version`).
        for order, pending in enumerate(taken):
            rows.add(pending.batch, pending.receipt_id, received_at, order)
        loop = asyncio.get_running_loop()
        started = loop.time()
        error: Exception | None = None
        try:
            await asyncio.to_thread(write_rows, self._store, rows)
        except Exception as err:
            error = err
        self._observer.observe_write(
            rows.row_count, len(taken), loop.time() - started, error is None
        )
        for pending in taken:
            self._inflight_bytes -= pending.size_bytes
            if pending.done.done():
                continue
            if error is None:
                pending.done.set_result(None)
            else:
                pending.done.set_exception(
                    Unavailable(f"store write failed: {_short(error)}", self._retry_after)
                )


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]
