"""In-process hand-off for the embedded path: group commit into the store.

Requests wait in a queue; one writer task takes everything queued (up to
`max_batch_rows`), writes it with one insert per table, then acknowledges all
those requests together. While a write runs, new requests pile up for the next
one, so load makes inserts bigger rather than more numerous. Before writing, the
writer also waits (up to `commit_wait_seconds`) for requests that have already
arrived and are still being decoded (`arriving`): every insert writes a part that
ClickHouse must later merge, so under load a few large inserts cost far less CPU
than many small ones, while a lone request at light load is written at once. Small
requests arriving together (many clients, few spans each) are what makes commits
small: once a commit has carried more than one request, the next one, while below
`linger_rows`, lingers up to `linger_seconds` for more to join (a lone client's
commits carry one request each and never linger).
Bytes waiting are bounded by `max_inflight_bytes`: past it, requests are refused
with `Backpressure` before anything is queued.

With a small-request log (`ingest.handoff.smalllog`, the embedded store held by this
process), a commit is decided in memory and logged with one fsync instead of
inserted: requests are answered once their frame is durable, and the log's drain
writes many commits' rows in large inserts. What follows on splitting refused commits
is the path without it (`log=None`: stores other writers share, tests' faulty stores).

A commit that fails with a permanent store error (`ingest.store.errors`) is not one
client's failure shared by all: it is split, by bisection, down to the request(s)
that cause it, and those down to their spans. Every other request is written and
answered success; the refused spans become quarantine rows with the store's message
and are counted in their request's partial success (a request none of whose spans
the store takes is answered 400). A retryable error fails the commit's requests with
`Unavailable` as before, for their clients to retry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ingest.errors import Backpressure, IngestError, Unavailable
from ingest.export.fast import FastBatch
from ingest.handoff.protocol import AnyBatch, Prepared
from ingest.handoff.refused import refused_unit, span_units, stored_batch
from ingest.handoff.smalllog import Logged, SmallLog
from ingest.store import owners
from ingest.store.errors import StoreRejected, describe, is_permanent, isolate, refusal
from ingest.store.owners import Submission, Writer
from ingest.store.rows import Placements, TableRows, write_rows
from schemas.events import ValidatedBatch
from schemas.store import Store
from schemas.times import Clock, utc_now

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    batch: AnyBatch
    receipt_id: str
    size_bytes: int
    done: asyncio.Future[AnyBatch]
    # Place in its commit (arrival order): of two versions of one event id in one
    # commit, the later request's wins (see `ingest.store.rows.ingest_version`).
    order: int = 0

    @property
    def rows(self) -> int:
        """What a commit's row budget (`max_batch_rows`) counts for this request."""
        if isinstance(self.batch, FastBatch):
            return self.batch.rows
        return len(self.batch.events) + len(self.batch.emissions)

    def models(self) -> ValidatedBatch:
        """The request's batch as models (to split it span by span)."""
        batch = self.batch
        return batch.materialize() if isinstance(batch, FastBatch) else batch

    def add_to(self, rows: TableRows, received_at: dt.datetime) -> None:
        batch = self.batch
        if isinstance(batch, FastBatch):
            batch.add_to(rows, self.receipt_id, received_at, self.order)
        else:
            rows.add(batch, self.receipt_id, received_at, self.order)


class _Arrival:
    """`EmbeddedHandoff.arriving`'s context: a counter, entered once per request (a
    plain object, not a generator's)."""

    __slots__ = ("_handoff",)

    def __init__(self, handoff: EmbeddedHandoff) -> None:
        self._handoff = handoff

    def __enter__(self) -> None:
        self._handoff._arriving += 1

    def __exit__(self, *exc: object) -> None:
        self._handoff._arrived()


class WriteObserver(Protocol):
    """Told of every commit (`ingest.metrics.PipelineMetrics`)."""

    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None: ...


class _Unobserved:
    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None:
        return None


class EmbeddedHandoff:
    def __init__(
        self,
        store: Store,
        max_inflight_bytes: int,
        max_batch_rows: int = 50_000,
        linger_seconds: float = 0.0,
        linger_rows: int = 512,
        commit_wait_seconds: float = 0.1,
        retry_after_seconds: float = 1.0,
        clock: Clock = utc_now,
        observer: WriteObserver | None = None,
        verify_claims: bool | None = None,
        log: SmallLog | None = None,
    ) -> None:
        self._store = store
        self.log = log
        # Ownership claims are read back where other writers may claim at once.
        self._verify_claims = (
            owners.verify_claims(store) if verify_claims is None else verify_claims
        )
        self._max_inflight = max_inflight_bytes
        self._max_rows = max_batch_rows
        self._linger = linger_seconds
        self._linger_rows = linger_rows
        self._last_requests = 0  # requests the last commit carried
        self._queued = 0  # rows of the requests queued (`_Pending.rows`)
        self._commit_wait = commit_wait_seconds
        self._arriving = 0
        self._arrival = _Arrival(self)
        # Queued rows at which a submit wakes the writer: 0 while it waits for any
        # request, the row threshold it waits for while it lingers (`_wait_while`).
        self._wake_rows = 0
        self._retry_after = retry_after_seconds
        self._clock = clock
        self._observer: WriteObserver = observer or _Unobserved()
        self._queue: list[_Pending] = []
        self._inflight_bytes = 0
        self._wakeup = asyncio.Event()
        self._closing = False
        self._writer: asyncio.Task[None] | None = None
        # The commit path's own thread (one writer task: one commit at a time), which no
        # read, job or admin request shares: slow queries never delay a commit.
        self._committer = concurrent.futures.ThreadPoolExecutor(1, "commit")

    @property
    def inflight_bytes(self) -> int:
        return self._inflight_bytes

    def arriving(self) -> _Arrival:
        """Mark a request as on its way (received, being validated): a commit that is
        about to be written may wait for it to join. Exit before `submit`."""
        return self._arrival

    def _arrived(self) -> None:
        """A request is no longer on its way: the writer waits for that only when none
        is left (`_wait_while`), so only then is it woken."""
        self._arriving -= 1
        if not self._arriving:
            self._wakeup.set()

    async def open(self) -> None:
        """Replay the log into the store and fill its claim index (with a log)."""
        if self.log is not None:
            await self.log.open(self._committer)

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="embedded-writer")

    # A `FastBatch` arrives with its rows built; only the commit's columns are left.
    takes_fast_batches = True

    def prepare(self, batch: AnyBatch) -> Prepared:
        """Nothing to do off the event loop: rows are completed when their commit is."""
        return Prepared(batch)

    async def submit(self, prepared: Prepared, receipt_id: str, size_bytes: int) -> AnyBatch:
        batch = prepared.batch
        if self._closing:
            raise Unavailable("receiver is shutting down", self._retry_after)
        if self._inflight_bytes and self._inflight_bytes + size_bytes > self._max_inflight:
            raise Backpressure(
                f"{self._inflight_bytes} bytes are waiting to be written"
                f" (limit {self._max_inflight}); retry later",
                self._retry_after,
            )
        if self.log is not None:
            self.log.refuse_when_full(size_bytes)
        self.start()
        done: asyncio.Future[AnyBatch] = asyncio.get_running_loop().create_future()
        pending = _Pending(batch, receipt_id, size_bytes, done)
        self._queue.append(pending)
        self._queued += pending.rows
        self._inflight_bytes += size_bytes
        if self._queued >= self._wake_rows:
            self._wakeup.set()
        # Not shielded: a caller that goes away cancels only its own answer (`_answer`
        # skips it); its rows stay in the commit they joined.
        return await done

    async def readiness(self) -> str | None:
        """None while the store answers a query (and the log writes)."""
        if self.log is not None and self.log.broken:
            return f"ingest log: {self.log.broken}"
        try:
            await asyncio.to_thread(self._store.query, "SELECT 1")
        except Exception as err:
            return f"store: {err}"
        return None

    async def close(self) -> None:
        """Write everything still queued, then stop the writer."""
        self._closing = True
        self._wakeup.set()
        if self._writer is not None:
            await self._writer
            self._writer = None
        if self.log is not None:
            await self.log.close()
        self._committer.shutdown(wait=False)

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._linger and self._last_requests > 1:
                await self._wait_while(self._linger, self._linger_rows, arriving_only=False)
            await self._wait_while(self._commit_wait, self._max_rows, arriving_only=True)
            await self._write(self._take())

    async def _wait_while(self, seconds: float, rows: int, arriving_only: bool) -> None:
        """Wait up to `seconds` while the queue is below `rows` (and, `arriving_only`,
        only while requests already received are still being decoded)."""
        self._wake_rows = rows
        try:
            async with asyncio.timeout(seconds):
                while (
                    not self._closing
                    and self._queued < rows
                    and (self._arriving or not arriving_only)
                ):
                    self._wakeup.clear()
                    await self._wakeup.wait()
        except TimeoutError:
            return
        finally:
            self._wake_rows = 0

    def _take(self) -> list[_Pending]:
        taken: list[_Pending] = []
        rows = 0
        while self._queue and (not taken or rows < self._max_rows):
            pending = self._queue.pop(0)
            self._queued -= pending.rows
            pending.order = len(taken)
            taken.append(pending)
            rows += pending.rows
        self._last_requests = len(taken)
        return taken

    async def _write(self, taken: list[_Pending]) -> None:
        if self.log is not None:
            await self._log_commit(self.log, taken)
            return
        received_at = self._clock()
        loop = asyncio.get_running_loop()
        started = loop.time()
        results: dict[int, AnyBatch | IngestError]
        try:
            placements = await self._own(taken, received_at)
        except Exception as err:  # nothing is written unchecked: retry the commit
            log.warning("ownership check of a commit failed: %s", describe(err))
            self._observer.observe_write(0, len(taken), loop.time() - started, False)
            self._answer(taken, {id(p): self._unavailable(err) for p in taken})
            return
        rows = _rows(taken, received_at, placements)
        error: Exception | None = None
        try:
            await self._insert(rows)
        except Exception as err:
            error = err
        self._observer.observe_write(
            rows.row_count, len(taken), loop.time() - started, error is None
        )
        if error is None:
            results = {id(p): p.batch for p in taken}
        elif is_permanent(error):
            results = await self._split(taken, received_at, error, placements)
        else:
            results = {id(p): self._unavailable(error) for p in taken}
        self._answer(taken, results)

    async def _log_commit(self, small: SmallLog, taken: list[_Pending]) -> None:
        """Ownership in memory, the rows logged and fsynced; then everyone is answered."""
        received_at = self._clock()
        loop = asyncio.get_running_loop()
        started = loop.time()
        submissions = [
            Submission(p.batch, Writer(p.batch.agents), received_at, p.order) for p in taken
        ]

        def add_rows(checked: Sequence[AnyBatch], rows: TableRows) -> list[Logged] | None:
            # A commit of hot-path batches hands their rows over as they are (`add_shared`),
            # and is logged as their requests' bytes when every one has them (`Logged`);
            # with one batch of models, every batch's rows are built whole (one order).
            shared = all(isinstance(batch, FastBatch) for batch in checked)
            logged: list[Logged] | None = [] if shared else None
            for pending, batch in zip(taken, checked, strict=True):
                pending.batch = batch
                if not shared:
                    pending.add_to(rows, received_at)
                    continue
                assert isinstance(batch, FastBatch)
                batch.add_shared(rows, pending.receipt_id, received_at, pending.order)
                if logged is not None and batch.wire is not None:
                    logged.append(Logged.of(batch, pending.receipt_id, received_at, pending.order))
                else:
                    logged = None
            return logged

        try:
            await small.commit(submissions, add_rows)
        except Exception as err:  # nothing was acknowledged: the clients retry
            log.warning("logging a commit failed: %s", describe(err))
            self._observer.observe_write(0, len(taken), loop.time() - started, False)
            failure = err if isinstance(err, Unavailable) else self._unavailable(err)
            self._answer(taken, {id(p): failure for p in taken})
            return
        rows = sum(p.rows for p in taken)
        self._observer.observe_write(rows, len(taken), loop.time() - started, True)
        self._answer(taken, {id(p): p.batch for p in taken})

    async def _own(self, taken: list[_Pending], received_at: dt.datetime) -> Placements:
        """Ownership of event ids and streams (`ingest.store.owners`), one lookup for the
        whole commit: what a request may not write moves to its quarantine (a hot-path
        batch is checked on its rows, and becomes its models only then). Returns the
        events' placements, which the commit's rows are written under."""
        submissions = [
            Submission(p.batch, Writer(p.batch.agents), received_at, p.order) for p in taken
        ]
        check = functools.partial(
            owners.check, self._store, submissions, verify=self._verify_claims
        )
        checked = await asyncio.get_running_loop().run_in_executor(self._committer, check)
        for pending, batch in zip(taken, checked, strict=True):
            pending.batch = batch
        return checked.placements

    def _answer(self, taken: list[_Pending], results: dict[int, AnyBatch | IngestError]) -> None:
        for pending in taken:
            self._inflight_bytes -= pending.size_bytes
            if pending.done.done():
                continue
            result = results[id(pending)]
            if isinstance(result, IngestError):
                pending.done.set_exception(result)
            else:
                pending.done.set_result(result)

    def _unavailable(self, error: BaseException) -> Unavailable:
        return Unavailable(f"store write failed: {_short(error)}", self._retry_after)

    async def _insert(self, rows: TableRows) -> None:
        """Every write of the commit path, on its own thread (`_committer`)."""
        await asyncio.get_running_loop().run_in_executor(
            self._committer, write_rows, self._store, rows
        )

    async def _split(
        self,
        taken: list[_Pending],
        received_at: dt.datetime,
        error: Exception,
        placements: Placements,
    ) -> dict[int, AnyBatch | IngestError]:
        """Find the requests that make the commit fail for good; write the rest."""
        log.warning("commit of %d request(s) refused, isolating: %s", len(taken), describe(error))

        async def write(part: Sequence[_Pending]) -> None:
            await self._insert(_rows(part, received_at, placements))

        found = await isolate(taken, write, error)
        results: dict[int, AnyBatch | IngestError] = {id(p): p.batch for p in found.written}
        if found.unavailable is not None:  # what was written stands; the rest is retried
            unavailable = self._unavailable(found.unavailable)
            return {id(p): results.get(id(p), unavailable) for p in taken}
        for pending, refused in found.refused:
            results[id(pending)] = await self._refuse_spans(
                pending, received_at, refused, placements
            )
        return results

    async def _refuse_spans(
        self,
        pending: _Pending,
        received_at: dt.datetime,
        error: BaseException,
        placements: Placements,
    ) -> ValidatedBatch | IngestError:
        """Split one refused request into its spans: store those the store takes,
        quarantine the others with its message."""

        async def write(units: Sequence[ValidatedBatch]) -> None:
            rows = TableRows(placements=placements)
            for unit in units:
                rows.add(unit, pending.receipt_id, received_at, pending.order)
            await self._insert(rows)

        batch = pending.models()
        units = span_units(batch)
        found = await isolate(units, write, error)
        if found.unavailable is not None:
            return self._unavailable(found.unavailable)
        refused = [refused_unit(unit, refusal(err), received_at) for unit, err in found.refused]
        if found.refused:
            log.warning(
                "store refused %d of %d span(s) of a request: %s",
                len(refused),
                len(units),
                describe(found.refused[0][1]),
            )
        try:
            await write(refused)
        except Exception as err:
            if not is_permanent(err):
                return self._unavailable(err)
            return StoreRejected(f"the store refused the request: {describe(error)}")
        if not found.written:
            return StoreRejected(f"the store refused every span of the request: {describe(error)}")
        return stored_batch(batch, found.written, refused)


def _rows(
    pending: Sequence[_Pending], received_at: dt.datetime, placements: Placements
) -> TableRows:
    rows = TableRows(placements=placements)
    for item in pending:
        item.add_to(rows, received_at)
    return rows


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]
