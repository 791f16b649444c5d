"""The sink's consume loop: decode -> batch by rows and time -> write -> commit last.

    getmany ─► decode (poison: brake, then dead-letter) ─► Batch
        └─ full (rows) or old (seconds) ─► dead letters acked ─► ownership (one lookup)
           ─► write_rows ─► commit
                                  permanent store error ─► bisect ─┘ (refused: brake,
                                                                      dead-letter)

Before the rows are built, the batch's event ids and streams are checked against
their owners (`ingest.store.owners`): what a record may not write becomes quarantine
rows with the reason, as at the embedded writer, never a dead letter (it decoded; the
brake does not count it). The claims are read back where other writers may claim at
once (`owners.verify_claims`: a ClickHouse server, sinks side by side), and on a chDB
directory more than one sink of this process writes (`_WRITING`).

Offsets (offset+1 per partition) are committed only after the store accepted the
batch; a crash anywhere before that redelivers the records, and the store's keys
(ReplacingMergeTree on event id, (stream, seq, receipt_id)) make the rewrite
collapse. A store that is unavailable pauses the partitions and retries with
exponential backoff, keeping the batch: nothing is skipped. A store that refuses the
batch for good (`ingest.store.errors`) is never retried in a loop: the batch is
bisected down to the record(s) it refuses, which go to the dead-letter topic with
the store's message (under the poison brake), and the rest is written and
committed. At a rebalance the revoked partitions' records are written once more if
the store takes them, else abandoned uncommitted for their next owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from ingest.metrics import SinkMetrics
from ingest.sink.batch import Batch, Consumed, items_rows, items_token, with_token
from ingest.sink.dlq import DeadLetterSink, PoisonBrake, SinkHalted
from ingest.sink.fast import FastRecord, fast_record
from ingest.sink.liveness import Liveness
from ingest.store import owners
from ingest.store.errors import is_permanent, isolate, refusal
from ingest.store.rows import Placements, write_rows
from schemas.events import QuarantineRecord, ValidatedBatch
from schemas.records import PoisonLetter, Record, RecordError, decode, encode
from schemas.store import Store
from schemas.times import Clock, utc_now
from schemas.topics import Topics

log = logging.getLogger(__name__)

Monotonic = Callable[[], float]
STOP_LATENCY_SECONDS = 0.25

# Stores (by URL) each `Sink` of this process writes, counted from its construction to
# its `close` (or its collection). One sink alone on a chDB directory is its only writer: it skips
# the claims' read-back. A second one (a consumer group in one process, as tests run it)
# counts before it subscribes, so before any record is assigned to it; the first sink's
# flush in flight then ends before that group's rebalance does (the revocation waits for
# it), and every later flush of either reads its claims back.
_WRITING: Counter[str] = Counter()


def _not_writing(url: str) -> None:
    _WRITING[url] -= 1
    if _WRITING[url] <= 0:
        del _WRITING[url]


class Sink:
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        store: Store,
        dead_letters: DeadLetterSink,
        topics: Topics,
        metrics: SinkMetrics,
        *,
        batch_rows: int = 50_000,
        batch_seconds: float = 1.0,
        max_poll_records: int = 5_000,
        retry_min_seconds: float = 0.5,
        retry_max_seconds: float = 30.0,
        brake: PoisonBrake | None = None,
        monotonic: Monotonic = time.monotonic,
        clock: Clock = utc_now,
        on_idle: Callable[[], None] | None = None,
        on_rejected: Callable[[Sequence[QuarantineRecord]], None] | None = None,
        stall_seconds: float = 15.0,
        commit_timeout_seconds: float = 5.0,
    ) -> None:
        self._consumer = consumer
        self._store = store
        self._dead_letters = dead_letters
        self._topics = topics
        self._metrics = metrics
        self._batch_rows = batch_rows
        self._batch_seconds = batch_seconds
        self._max_poll = max_poll_records
        self._retry_min = retry_min_seconds
        self._retry_max = retry_max_seconds
        self._brake = brake or PoisonBrake()
        self._monotonic = monotonic
        self._clock = clock
        # Called when a poll found nothing and nothing is held (e.g. to return memory).
        self._on_idle = on_idle
        # Told of the spans the ownership check rejected (the service's rejection log).
        self._on_rejected = on_rejected
        self._batch = Batch(monotonic())
        # The placements of the batch being written (`_own`), for its isolation's parts.
        self._placements: Placements = {}
        self._lock = asyncio.Lock()
        _WRITING[store.url] += 1
        self._writing = weakref.finalize(self, _not_writing, store.url)
        self.liveness = Liveness(metrics, stall_seconds, monotonic)
        self.flushes = 0
        self.last_error: str | None = None
        # aiokafka retries a commit while the broker answers with a retriable error or
        # not at all (its request timeout is 40 s): bounded here, so a stop or the loop
        # goes on with the rows stored and the offsets left for the next commit.
        self._commit_timeout = commit_timeout_seconds
        # Whether the last offset commit was answered: False, the records written since
        # the last good commit are read again by the next owner (and collapse).
        self.committed = True

    def assigned(self) -> int:
        """Partitions this member owns now."""
        return len(self._consumer.assignment())

    def held(self) -> int:
        """Records consumed and not yet written (and committed)."""
        return len(self._batch.items)

    def listener(self) -> ConsumerRebalanceListener:
        return _Rebalance(self)

    def stalled(self) -> str | None:
        """Why this member makes no progress (`ingest.sink.liveness`), or None."""
        return self.liveness.stalled()

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set (flushing what is held) or the brake trips."""
        try:
            while not stop.is_set():
                if self._batch and self._due():
                    await self._flush_until_done(stop)
                    continue
                fetched = await self._consumer.getmany(
                    timeout_ms=self._wait_ms(), max_records=self._max_poll
                )
                for messages in fetched.values():
                    for message in messages:
                        await self._take(message)
                        if self._batch.rows >= self._batch_rows:  # bound memory mid-fetch
                            await self._flush_until_done(stop)
                if not fetched and not self._batch and self._on_idle is not None:
                    self._on_idle()
                await self._observe_lag()
        except SinkHalted:
            try:
                await self._flush_once()  # keep the good records taken before the trip
            except Exception as err:  # they stay uncommitted: reread after the fix
                log.warning("flush at halt failed: %s", err)
            raise
        if self._batch:
            try:
                await self._flush_once()
            except Exception as err:  # left uncommitted: redelivered after restart
                log.warning(
                    "final flush failed, %d records stay uncommitted: %s",
                    len(self._batch.items),
                    err,
                )

    def close(self) -> None:
        """No longer a writer of its store (after its consumer stopped: a revocation
        at the stop still writes)."""
        self._writing()

    def _verify_claims(self) -> bool:
        """Read the claims back: other writers may claim at once (`_WRITING`)."""
        return owners.verify_claims(self._store) or _WRITING[self._store.url] > 1

    def _due(self) -> bool:
        age = self._monotonic() - self._batch.opened_at
        return self._batch.rows >= self._batch_rows or age >= self._batch_seconds

    def _wait_ms(self) -> int:
        """Until the batch is due, but never long: a stop request is seen within it."""
        left = self._batch_seconds
        if self._batch:
            left -= self._monotonic() - self._batch.opened_at
        return max(1, int(min(left, STOP_LATENCY_SECONDS) * 1000))

    async def _take(self, message: ConsumerRecord[Any, Any]) -> None:
        """Decode one message into the batch. Only the records topic feeds the brake:
        the dead-letter topic holds our own letters, and a bad one is logged and
        skipped rather than dead-lettered again (no loops)."""
        tp = TopicPartition(message.topic, message.partition)
        value: bytes = message.value or b""
        digest = hashlib.sha256(value).digest()
        self._metrics.consumed.labels(topic=message.topic).inc()
        if not self._batch:
            self._batch = Batch(self._monotonic())
        data = message.topic != self._topics.dead_letter
        try:
            record: FastRecord | Record = fast_record(value) or decode(value)
        except RecordError as err:
            if not data:
                log.error("undecodable dead letter at %s:%d: %s", tp, message.offset, err)
                self._batch.add(Consumed(tp, message.offset, digest))
                return
            self._brake.failed(str(err))
            self._metrics.poison(str(err))
            poison = PoisonLetter(
                reason=str(err),
                dead_lettered_at=self._clock(),
                source_topic=message.topic,
                source_partition=message.partition,
                source_offset=message.offset,
                key=message.key,
                value=value,
            )
            self._batch.add(Consumed(tp, message.offset, digest, poison=poison))
            return
        if data:
            self._brake.passed()
        stored = record if not isinstance(record, PoisonLetter) else None
        self._batch.add(Consumed(tp, message.offset, digest, record=stored, key=message.key))

    async def _flush_until_done(self, stop: asyncio.Event) -> None:
        """Retry with backoff while the store (or broker) fails, partitions paused."""
        delay = self._retry_min
        while True:
            try:
                await self._flush_once()
                self._resume()
                return
            except SinkHalted:
                raise
            except Exception as err:  # store or broker: keep the batch, back off, retry
                self.last_error = str(err) or type(err).__name__
                log.warning("sink write failed (retrying in %.1fs): %s", delay, self.last_error)
                if stop.is_set():
                    return
                self._pause()
                await self._poll_paused(delay, stop)
                if stop.is_set():
                    return
                delay = min(delay * 2, self._retry_max)
                if not self._batch:  # a rebalance abandoned it meanwhile
                    self._resume()
                    return

    async def _poll_paused(self, seconds: float, stop: asyncio.Event) -> None:
        """Poll for `seconds` in short slices (a stop request is seen within one):
        polling while paused keeps group membership alive; partitions assigned meanwhile
        are not paused, so what they yield joins the batch."""
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while not stop.is_set() and (left := until - loop.time()) > 0:
            fetched = await self._consumer.getmany(
                timeout_ms=max(1, int(min(left, STOP_LATENCY_SECONDS) * 1000))
            )
            for messages in fetched.values():
                for message in messages:
                    await self._take(message)
            await self._observe_lag()

    async def _flush_once(self) -> None:
        async with self._lock:
            await self._write_and_commit()

    async def _write_and_commit(self) -> None:
        batch = self._batch
        if not batch:
            return
        poison = batch.poison()
        if poison:
            await self._dead_letters.send(poison)
        try:
            placements = await self._own(batch)
        except Exception:  # nothing is written unchecked: the batch is retried whole
            self._metrics.batches.labels(result="error").inc()
            raise
        rows = batch.table_rows()
        rows.placements = placements
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await asyncio.to_thread(write_rows, with_token(self._store, batch.token()), rows)
        except Exception as err:
            self._metrics.batches.labels(result="error").inc()
            if not is_permanent(err):
                raise
            await self._isolate(batch, err)
        else:
            self._metrics.insert_seconds.observe(loop.time() - started)
            self._metrics.batches.labels(result="ok").inc()
            self._metrics.rows.inc(rows.row_count)
        self._batch = Batch(self._monotonic())
        self.flushes += 1
        self.last_error = None
        await self._commit(batch.offsets())

    async def _own(self, batch: Batch) -> Placements:
        """Ownership of the batch's event ids and streams, one lookup (and one read-back
        of its claims) for the whole batch; always from the records as decoded, so a
        retried batch is checked afresh. Returns the events' placements, which the
        batch's rows are written under (kept for its isolation too)."""
        found = [(i, item.submission()) for i, item in enumerate(batch.items)]
        checking = [(i, s) for i, s in found if s is not None]
        results = await asyncio.to_thread(
            owners.check, self._store, [s for _, s in checking], verify=self._verify_claims()
        )
        rejected: list[QuarantineRecord] = []
        for (index, submission), result in zip(checking, results, strict=True):
            checked: ValidatedBatch | None = None
            if result is not submission.batch:  # something rejected: the record's models
                assert isinstance(result, ValidatedBatch)
                checked = result
                rejected += result.quarantined[len(submission.batch.quarantined) :]
            batch.items[index] = dataclasses.replace(batch.items[index], checked=checked)
        if rejected:
            self._metrics.owner_rejected.inc(len(rejected))
            if self._on_rejected is not None:
                self._on_rejected(rejected)
        self._placements = results.placements
        return results.placements

    async def _write_part(self, items: Sequence[Consumed]) -> None:
        rows = items_rows(items)
        rows.placements = self._placements
        await asyncio.to_thread(write_rows, with_token(self._store, items_token(items)), rows)
        self._metrics.rows.inc(rows.row_count)

    async def _isolate(self, batch: Batch, error: BaseException) -> None:
        """Write every record of `batch` the store takes; dead-letter the ones it
        refuses alone, each counted by the brake as it is found. A retryable error
        meanwhile is raised (the whole batch is retried: rewrites collapse); a tripped
        brake abandons the batch uncommitted, for a fixed sink to read again."""
        log.warning("store refused a batch of %d records, bisecting: %s", len(batch.items), error)
        try:
            found = await isolate(batch.stored(), self._write_part, error, self._refused)
        except SinkHalted:
            self._batch = Batch(self._monotonic())
            raise
        if found.unavailable is not None:
            raise found.unavailable
        letters = [
            self._refusal_letter(item, err)
            for item, err in found.refused
            if item.tp.topic != self._topics.dead_letter
        ]
        if letters:
            await self._dead_letters.send(letters)

    def _refused(self, item: Consumed, error: BaseException) -> None:
        reason = refusal(error)
        if item.tp.topic == self._topics.dead_letter:
            # One of our own letters: logged and skipped, never dead-lettered again.
            log.error("dead letter at %s:%d refused by the store: %s", item.tp, item.offset, reason)
            return
        log.error("record at %s:%d refused by the store: %s", item.tp, item.offset, reason)
        self._metrics.poison(reason)
        self._brake.rejected(reason)

    def _refusal_letter(self, item: Consumed, error: BaseException) -> PoisonLetter:
        assert item.record is not None
        return PoisonLetter(
            reason=refusal(error),
            dead_lettered_at=self._clock(),
            source_topic=item.tp.topic,
            source_partition=item.tp.partition,
            source_offset=item.offset,
            key=item.key,
            # The record as decoded, re-encoded.
            value=encode(
                item.record.model() if isinstance(item.record, FastRecord) else item.record
            ),
        )

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        owned = self._consumer.assignment()
        mine = {tp: offset for tp, offset in offsets.items() if tp in owned}
        if not mine:
            return
        try:
            await asyncio.wait_for(self._consumer.commit(mine), self._commit_timeout)
            self._metrics.commits.labels(result="ok").inc()
            self.committed = True
        except (CommitFailedError, IllegalStateError, KafkaError, TimeoutError) as err:
            # Rows are stored; the next owner rereads and the store collapses the repeat.
            self._metrics.commits.labels(result="error").inc()
            self.committed = False
            reason = str(err) or f"not answered within {self._commit_timeout:g}s"
            log.warning("offset commit failed (records will be redelivered): %s", reason)

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        """Finish the revoked partitions' records if the store takes them now; else
        abandon them uncommitted."""
        async with self._lock:
            if not any(item.tp in partitions for item in self._batch.items):
                return
            try:
                await self._write_and_commit()
            except Exception as err:
                dropped = self._batch.drop(partitions)
                self._metrics.abandoned.inc(dropped)
                log.warning("rebalance: abandoned %d uncommitted records: %s", dropped, err)

    def _pause(self) -> None:
        self._consumer.pause(*self._consumer.assignment())

    def _resume(self) -> None:
        self._consumer.resume(*self._consumer.paused())

    async def _observe_lag(self) -> None:
        lag: dict[str, int] = {topic: 0 for topic in self._topics.all()}
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            if high is None:
                continue
            with contextlib.suppress(IllegalStateError, TimeoutError):
                # A position still being reset waits for the broker: not here.
                position = await asyncio.wait_for(self._consumer.position(tp), STOP_LATENCY_SECONDS)
                lag[tp.topic] = lag.get(tp.topic, 0) + max(0, high - position)
                self.liveness.observe(tp, self._batch.first.get(tp, position), high)
        for topic, value in lag.items():
            self._metrics.lag.labels(topic=topic).set(value)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._sink.liveness.revoked(revoked)
        await self._sink.revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("assigned %s", sorted(f"{tp.topic}:{tp.partition}" for tp in assigned))
        self._sink.liveness.assigned(assigned)
