"""The small-request log of the embedded hand-off (decision 0010, "Fourth round").

A group commit's rows are appended to a local log and fsynced (one fsync per commit,
shared by its requests) before the requests are answered; a drain task writes the
log's rows into the store in large inserts and then records how far it got. Small
requests from many clients then cost a frame and a share of an fsync, not three
inserts and the merges of their parts each.

    commit (one thread hop, the log's thread): ownership decided in memory
      (`ingest.handoff.claims`) -> rows -> frame (a commit of hot-path batches: their
      requests' bytes, `Logged`; else the rows) -> fsync -> answer success
    drain (the commit thread): claims, then rows, in one insert per table for many
      commits -> position recorded (fsync) -> segments before it removed
    start: frames past the position replayed into the store (a torn tail cut off),
      then the claim index filled from the store

Replays are idempotent: the rows carry their receipt ids and versions, and every
table they go to collapses on its key. Bytes appended and not yet drained are bounded
(`max_bytes`): past it requests are answered with a retry delay. Readers of this
process (jobs, the admin endpoint, the HTTP API) call `wait_drained` first, so what
was acknowledged is what they read. A row the store refuses for good at the drain
(the door's domain checks foresee nearly all) goes to the quarantine with the store's
message, counted and logged: the one case where a success was answered for a span
not stored as an event. An I/O error of the log stops the log (answers become
`Unavailable`, readiness says why) until a restart replays what was durable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import json
import logging
import marshal
import pickle
import threading
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.errors import Backpressure, Unavailable
from ingest.export.contracts import ContractBook
from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import Principal
from ingest.export.request import validate_request
from ingest.handoff.claims import ClaimIndex, Pinned, claim_rows, decide
from ingest.handoff.segments import Position, SegmentLog
from ingest.store.errors import Isolation, describe, is_permanent, isolate, refusal
from ingest.store.owners import Batch, Submission
from ingest.store.rows import (
    DIMENSION_PLACE,
    EVENT_PLACE,
    SharedRows,
    TableRows,
    insert_many,
    placed,
    ticks_ms,
    ticks_ns,
    time_of_ticks_ns,
    write_rows,
)
from schemas.store import Store
from schemas.tables import (
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    EVENT_OWNERS,
    LESSON_OVERRIDES,
    QUARANTINE,
    STREAM_OWNERS,
)
from schemas.times import Clock, utc_now

log = logging.getLogger(__name__)

MIB = 1 << 20
# How long logged commits wait to be drained together (or `drain_rows` rows, or half of
# `max_bytes`): a drain costs ~40 ms of chDB's time whatever it carries (an insert and a
# part per table, then their merges), so at one-span requests from many clients a drain
# a second costs ~25 us a span and one every three ~8 (bench/RESULTS.md, "Eighth
# round"). Readers do not wait for it: they ask for a drain at once (`wait_drained`).
DRAIN_SECONDS = 3.0
_POSITION_FILE = "position"  # `ingest.handoff.segments`' record of the drained position
# What a frame carries, in this order (a new field is a new version).
# 2: with the events' placements (migration 0016); 3: shared rows, placements as a dict;
# 4: a commit of hot-path batches as their requests' bytes (`Logged`).
_VERSION = 3
_WIRE_VERSION = 4
_TABLES = ("events", "dimensions", "receipts", "quarantine", "overrides")


@dataclass
class Frame:
    """One commit's rows as logged, held in memory until drained."""

    number: int
    end: Position
    size: int
    rows: TableRows
    event_claims: list[list[Any]]
    stream_claims: list[list[Any]]
    pinned: Pinned = field(default_factory=Pinned)


@dataclass(frozen=True)
class Logged:
    """A hot-path batch of a commit as its frame holds it: the request's protobuf bytes
    as received, who sent it, and the commit's columns of its rows. Replayed, the bytes
    are decoded again (`ingest.export.fast.fast_batch`, else the reference path), which
    gives the rows the commit held: the decode is a function of the bytes and the
    sender (the differential tests of `tests/ingest/export` hold both paths to it)."""

    wire: bytes
    tenant_id: str
    agents: list[str] | None  # None: any agent
    findings: list[str]  # the batch's contract findings (`FastBatch.contract_findings`)
    receipt_id: str
    received_ns: int  # the commit's receipt time (`ticks_ns`)
    order: int  # the batch's place in its commit (`ingest_version`)

    @classmethod
    def of(cls, batch: FastBatch, receipt_id: str, received_at: dt.datetime, order: int) -> Logged:
        assert batch.wire is not None
        agents = None if batch.agents is None else sorted(batch.agents)
        findings = list(batch.contract_findings)
        received = ticks_ns(received_at)
        return cls(batch.wire, batch.tenant_id, agents, findings, receipt_id, received, order)

    def rows(self) -> TableRows:
        """The rows `add_shared` gave this batch in its commit."""
        request = parse_protobuf(self.wire)
        agents = None if self.agents is None else frozenset(self.agents)
        principal = Principal(tenant_id=self.tenant_id, agents=agents)
        contracts = ContractBook() if self.findings else None  # findings: "no-contract"
        received_at = time_of_ticks_ns(self.received_ns)
        rows = TableRows()
        batch = fast_batch(request, principal, contracts, wire=self.wire)
        if batch is not None:
            batch.add_shared(rows, self.receipt_id, received_at, self.order)
        else:  # this build's hot path declines the request (a build without `_wire`)
            models = validate_request(request, principal=principal, contracts=contracts)
            rows.add(models, self.receipt_id, received_at, self.order)
        return rows


def encode_frame(
    rows: TableRows,
    event_claims: list[list[Any]],
    stream_claims: list[list[Any]],
    logged: Sequence[Logged] | None = None,
) -> bytes:
    """Our own rows, by `marshal` (plain values: twice as fast as pickle on a commit's
    rows; format 4 is read by every Python 3 since 3.4), by pickle when a row holds
    another type (a datetime). Safe to read back because the log is owner-only and
    written by this process alone, as the store's own files are. `logged`: `rows` are
    those of these hot-path batches (`add_shared`, in this order), and the frame holds
    their requests' bytes instead: the rows are not encoded at all (marshal of a
    commit's rows, read back from memory, cost ~4-5 us a span; bench/RESULTS.md,
    "Ninth round")."""
    if logged is not None:
        parts = [
            (b.wire, b.tenant_id, b.agents, b.findings, b.receipt_id, b.received_ns, b.order)
            for b in logged
        ]
        body = (_WIRE_VERSION, event_claims, stream_claims, rows.placements, parts)
        with contextlib.suppress(ValueError):  # else the rows, below
            return b"M" + marshal.dumps(body, 4)
    tables = [getattr(rows, name) for name in _TABLES]
    shared = [
        (part.events, part.event_tail, part.dimensions, part.dimension_tail) for part in rows.shared
    ]
    frame = (_VERSION, tables, event_claims, stream_claims, rows.placements, shared)
    try:
        return b"M" + marshal.dumps(frame, 4)
    except ValueError:  # an object marshal does not know
        return b"P" + pickle.dumps(frame, protocol=5)


def decode_frame(payload: bytes) -> tuple[TableRows, list[list[Any]], list[list[Any]]]:
    kind, body = payload[:1], payload[1:]
    if kind == b"M":
        frame = marshal.loads(body)
    elif kind == b"P":
        frame = pickle.loads(body)  # our own frames: see encode_frame
    else:
        raise ValueError(f"log frame of unknown encoding {kind!r}")
    version = frame[0]
    if version == _WIRE_VERSION:
        _, event_claims, stream_claims, placements, parts = frame
        rows = TableRows(placements=placements)
        for part in parts:
            rows.extend(Logged(*part).rows())
        return rows, event_claims, stream_claims
    if version not in (2, _VERSION):  # 2, 3: logs of previous builds, replayed
        raise ValueError(f"log frame version {version} (this build reads 2-{_WIRE_VERSION})")
    _, tables, event_claims, stream_claims, placements, *shared = frame
    rows = TableRows(**dict(zip(_TABLES, tables, strict=True)))
    if version == 2:  # placements as [tenant, event id, surface, hour] rows
        rows.placements = {(t, e): (surface, hour) for t, e, surface, hour in placements}
    else:  # the dict itself, (tenant, event id) -> (surface, hour)
        rows.placements = placements
        rows.shared = [SharedRows(*part) for part in shared[0]]
    return rows, event_claims, stream_claims


@dataclass
class Drained:
    """What one drain wrote, and what the store refused for good (quarantined)."""

    rows: int = 0
    refused: int = 0
    refused_events: list[tuple[str, str, str]] = field(default_factory=list)


class SmallLog:
    """The log, its claim index and its drain; used by `EmbeddedHandoff`."""

    def __init__(
        self,
        directory: Path,
        store: Store,
        max_bytes: int = 24 * MIB,  # as `ingest.service.config`'s default
        drain_rows: int = 20_000,
        drain_seconds: float = DRAIN_SECONDS,
        wait_seconds: float = 30.0,
        retry_after_seconds: float = 1.0,
        clock: Clock = utc_now,
    ) -> None:
        self.segments = SegmentLog(directory)
        self.store = store
        self.index = ClaimIndex()
        self.max_bytes = max_bytes
        self._drain_rows = drain_rows
        # Bytes logged at which the drain runs before its cadence: half the bound, so
        # the cadence alone never makes a burst of large rows meet the bound.
        self._drain_bytes = max_bytes // 2
        self._drain_seconds = drain_seconds
        self._wait_seconds = wait_seconds
        self._retry_after = retry_after_seconds
        self._clock = clock
        self.frames: list[Frame] = []
        self.undrained_bytes = 0
        self._undrained_rows = 0
        self._next = 1
        self.acked = 0  # the last frame made durable
        self.drained = 0  # the last frame the store holds
        self.broken: str | None = None
        self.refused_rows = 0
        self._changed = threading.Condition()
        self._kick = asyncio.Event()
        self._closing = False
        self._urgent = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        # Frames and the index are touched on this thread only (one at a time).
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "small-log")

    # --- start and stop ---------------------------------------------------------------

    async def open(self, committer: concurrent.futures.Executor) -> int:
        """Replay what the log holds past its position, fill the index, start the
        drain; returns the frames replayed."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._committer = committer
        # Nothing else touches the log yet: the replay runs where the store's writes do.
        replayed = await self._loop.run_in_executor(self._committer, self.replay)
        claims = await self._loop.run_in_executor(self._committer, self.index.load, self.store)
        log.debug("claim index: %d key(s) from the store", claims)
        self._task = asyncio.create_task(self._drain_loop(), name="small-log-drain")
        return replayed

    def replay(self) -> int:
        """Write into the store what the log holds past its recorded position (commits
        acknowledged and not drained), record the position, and return the commits
        written. Blocking, and only while nothing else uses the log: `open` runs it
        before the listeners open, and a process that opens the data directory without
        serving (`replay_pending`) before it reads."""
        frames = self._recover()
        for chunk in _chunks(frames, self._drain_rows):
            outcome = self._insert(chunk)
            self._count_refused(outcome)
            self._recorded(chunk, outcome)
        if frames:
            log.info("replayed %d logged commit(s) into the store", len(frames))
        return len(frames)

    def _recover(self) -> list[Frame]:
        frames = []
        for payload, end in self.segments.recover():
            rows, event_claims, stream_claims = decode_frame(payload)
            frames.append(Frame(0, end, len(payload), rows, event_claims, stream_claims))
        return frames

    async def close(self) -> None:
        """Drain everything (the writer has stopped appending), record it, stop."""
        self._closing = True
        self._kick.set()
        if self._task is not None:
            await self._task
            self._task = None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self.segments.close)
        self._thread.shutdown(wait=False)

    # --- the commit -------------------------------------------------------------------

    def refuse_when_full(self, size_bytes: int) -> None:
        if self.broken:
            raise Unavailable(f"the ingest log is stopped: {self.broken}", self._retry_after)
        if self.undrained_bytes and self.undrained_bytes + size_bytes > self.max_bytes:
            raise Backpressure(
                f"{self.undrained_bytes} bytes are logged and not yet in the store"
                f" (limit {self.max_bytes}); retry later",
                self._retry_after,
            )

    async def commit(self, submissions: Sequence[Submission], add_rows: Any) -> list[Batch]:
        """Decide ownership, log the commit's rows durably; returns the batches as
        stored. `add_rows(checked, rows)` builds the rows of the checked batches and
        returns them as `Logged` when they are all hot-path batches with their bytes
        (else None: the frame holds the rows). Raises (nothing acknowledged) when
        deciding or logging fails."""
        if self.broken:
            raise Unavailable(f"the ingest log is stopped: {self.broken}", self._retry_after)
        if any(getattr(s.batch, "overrides", ()) for s in submissions):
            # An override is decided against the stored overrides: the store first.
            await self.drain_now()
        number = self._next
        self._next += 1
        loop = asyncio.get_running_loop()
        frame = await loop.run_in_executor(
            self._thread, self._commit, list(submissions), add_rows, number
        )
        self.frames.append(frame[0])
        self.undrained_bytes += frame[0].size
        self._undrained_rows += frame[0].rows.row_count
        self.acked = number
        if len(self.frames) == 1 or self._due():
            self._kick.set()  # the cadence starts, or the drain is due
        return frame[1]

    def _commit(
        self, submissions: list[Submission], add_rows: Any, number: int
    ) -> tuple[Frame, list[Batch]]:
        checked, decided, pinned = decide(self.index, self.store, submissions, number)
        try:
            rows = TableRows(placements=decided.placements)  # the rows' sorting keys
            logged = add_rows(checked, rows)
            event_claims, stream_claims = claim_rows(decided)
            payload = encode_frame(rows, event_claims, stream_claims, logged)
        except Exception:
            self.index.unpin(pinned, stored=False)
            raise
        try:
            end = self.segments.append(payload)
            self.segments.sync()
        except OSError as err:
            self.index.unpin(pinned, stored=False)
            self._stop(f"writing {self.segments.directory}: {err}")
            raise Unavailable(f"the ingest log failed: {err}", self._retry_after) from err
        frame = Frame(number, end, len(payload), rows, event_claims, stream_claims, pinned)
        return frame, checked

    def _stop(self, reason: str) -> None:
        log.error("the ingest log stopped: %s (restart replays what it made durable)", reason)
        self.broken = reason
        with self._changed:
            self._changed.notify_all()

    # --- read-your-writes -------------------------------------------------------------

    def wait_drained(self) -> None:
        """Block (not on the event loop) until the store holds every commit acknowledged
        before the call; raises `Unavailable` after `wait_seconds`."""
        target = self.acked
        if self.drained >= target or threading.get_ident() == self._loop_thread:
            return
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._hurry)
        with self._changed:
            done = self._changed.wait_for(
                lambda: self.drained >= target or self.broken is not None, self._wait_seconds
            )
        if not done or self.drained < target:
            raise Unavailable(
                "acknowledged spans are not in the store yet"
                f"{f' ({self.broken})' if self.broken else ''}; retry later",
                self._retry_after,
            )

    async def drain_now(self) -> None:
        """Until the store holds every frame logged so far (on the event loop)."""
        target = self.acked
        while self.drained < target and not self.broken:
            self._hurry()
            await asyncio.sleep(0.005)

    # --- the drain --------------------------------------------------------------------

    def _due(self) -> bool:
        """Enough is logged to drain before the cadence ends (rows, or bytes)."""
        return self._undrained_rows >= self._drain_rows or bool(
            self._drain_bytes and self.undrained_bytes >= self._drain_bytes
        )

    def _hurry(self) -> None:
        """Drain now, without waiting for the cadence (on the event loop)."""
        self._urgent = True
        self._kick.set()

    async def _drain_loop(self) -> None:
        delay = 0.1
        while True:
            if not self.frames:
                if self._closing:
                    return
                self._kick.clear()
                await self._kick.wait()
                continue
            if not (self._closing or self._urgent or self._due()):
                self._kick.clear()  # set again only by a reason to drain before the cadence
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(), self._drain_seconds)
            self._urgent = False
            taken = list(self.frames)
            try:
                await self._write(taken)
            except Exception as err:
                log.warning(
                    "draining the ingest log failed (retrying in %.1fs): %s", delay, describe(err)
                )
                if self._closing and delay > 5:
                    log.error(
                        "stopping with %d commit(s) logged and not drained:"
                        " the next start replays them",
                        len(taken),
                    )
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            del self.frames[: len(taken)]
            self.undrained_bytes -= sum(f.size for f in taken)
            self._undrained_rows -= sum(f.rows.row_count for f in taken)

    async def _write(self, frames: list[Frame]) -> None:
        """Frames into the store, their position recorded, their claims unpinned."""
        if not frames:
            return
        assert self._loop is not None
        outcome = await self._loop.run_in_executor(self._committer, self._insert, frames)
        self._count_refused(outcome)
        await self._loop.run_in_executor(self._thread, self._recorded, frames, outcome)
        self.drained = max(self.drained, frames[-1].number)
        with self._changed:
            self._changed.notify_all()

    def _count_refused(self, outcome: Drained) -> None:
        if outcome.refused:
            self.refused_rows += outcome.refused
            log.warning(
                "the store refused %d logged row(s) for good: quarantined (list them with"
                " `holonograph quarantine`)",
                outcome.refused,
            )

    def _recorded(self, frames: list[Frame], outcome: Drained) -> None:
        self.segments.drained(frames[-1].end)
        for frame in frames:
            self.index.unpin(frame.pinned, stored=True)
        self.index.forget(outcome.refused_events)

    def _insert(self, frames: list[Frame]) -> Drained:
        rows = TableRows()
        event_claims: list[list[Any]] = []
        stream_claims: list[list[Any]] = []
        for frame in frames:
            rows.extend(frame.rows)
            event_claims.extend(frame.event_claims)
            stream_claims.extend(frame.stream_claims)
        outcome = Drained(rows.row_count)
        plan: list[tuple[str, Any, list[list[Any]]]] = [
            ("event_owners", EVENT_OWNERS, event_claims),
            ("stream_owners", STREAM_OWNERS, stream_claims),
        ]
        try:
            for _, table, table_rows in plan:  # a drain's claims are many: as columns
                insert_many(self.store, table, table_rows)
            write_rows(self.store, rows)
            return outcome
        except Exception as err:
            if not is_permanent(err):
                raise
            log.warning(
                "a drain of %d row(s) was refused, isolating: %s", rows.row_count, describe(err)
            )
        # Written again table by table (replays collapse); refused rows isolated.
        refused: list[tuple[str, list[Any], BaseException]] = []
        for name, table, table_rows in [*plan, *_row_plan(rows)]:
            refused += [(name, row, e) for row, e in self._isolated(table, table_rows)]
        quarantine = [self._quarantine_row(name, row, e) for name, row, e in refused]
        if quarantine:
            try:
                self.store.insert(QUARANTINE.qualified, quarantine, QUARANTINE.columns)
            except Exception as err:
                if not is_permanent(err):
                    raise
                log.error(
                    "the store refused the quarantine rows of refused logged rows: %s",
                    describe(err),
                )
        outcome.refused = len(refused)
        outcome.refused_events = [
            ("e", str(row[0]), str(row[1]))
            for name, row, _ in refused
            if name in ("events", "event_owners")
        ]
        return outcome

    def _isolated(self, table: Any, rows: list[list[Any]]) -> list[tuple[list[Any], BaseException]]:
        """Insert `rows` into `table`; the rows the store refuses for good, found by
        `isolate`'s bisection (every other row written). A retryable error is raised:
        the drain retries, and what was written collapses."""
        if not rows:
            return []
        try:
            self.store.insert(table.qualified, rows, table.columns)
            return []
        except Exception as err:
            if not is_permanent(err):
                raise
            error = err

        async def write(part: Sequence[list[Any]]) -> None:
            self.store.insert(table.qualified, list(part), table.columns)

        found = _completed(isolate(rows, write, error))
        if found.unavailable is not None:
            raise found.unavailable
        return found.refused

    def _quarantine_row(self, table: str, row: list[Any], error: BaseException) -> list[Any]:
        text = json.dumps({"table": table, "row": row}, default=str, sort_keys=True)
        return [
            str(row[0]), str(uuid.uuid5(uuid.NAMESPACE_URL, f"holonograph-log:{text}")),
            ticks_ms(self._clock()),
            f"{refusal(error)} (after the span was acknowledged: logged row of {table})",
            "", "", "", None, None, text, "{}", "", "log",
        ]  # fmt: skip


def _completed(search: Coroutine[Any, Any, Isolation[list[Any]]]) -> Isolation[list[Any]]:
    """The result of an `isolate` whose writes are blocking calls (the drain runs on the
    commit thread, the replay on its caller's): it never suspends, so one step ends it."""
    try:
        search.send(None)
    except StopIteration as done:
        result: Isolation[list[Any]] = done.value
        return result
    search.close()
    raise RuntimeError("the isolation of refused log rows suspended")


def _row_plan(rows: TableRows) -> list[tuple[str, Any, list[list[Any]]]]:
    """The tables `write_rows` writes, in its order (receipts last), event and
    dimension rows under their placements as `write_rows` writes them."""
    rows = rows.expanded()
    return [
        ("events", EVALUATION_EVENTS, placed(rows.events, EVENT_PLACE, rows.placements)),
        (
            "dimensions",
            EVALUATION_DIMENSIONS,
            placed(rows.dimensions, DIMENSION_PLACE, rows.placements),
        ),
        ("quarantine", QUARANTINE, rows.quarantine),
        ("overrides", LESSON_OVERRIDES, rows.overrides),
        ("receipts", EMISSION_RECEIPTS, rows.receipts),
    ]


def _chunks(frames: list[Frame], rows: int) -> list[list[Frame]]:
    out: list[list[Frame]] = []
    current: list[Frame] = []
    count = 0
    for frame in frames:
        current.append(frame)
        count += frame.rows.row_count
        if count >= rows:
            out.append(current)
            current, count = [], 0
    if current:
        out.append(current)
    return out


def replay_pending(store: Store, directory: Path) -> int:
    """`SmallLog.replay` for a process that opens the data directory without serving (an
    offline command after a `serve` was killed), which must read what was acknowledged;
    returns the commits written. Nothing to do without a log."""
    if not (directory / _POSITION_FILE).exists() and not any(directory.glob("*.seg")):
        return 0
    small = SmallLog(directory, store)
    try:
        return small.replay()
    finally:
        small.segments.close()
        small._thread.shutdown(wait=False)
