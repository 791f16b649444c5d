"""The small-request log (`ingest.handoff.smalllog`): what it acknowledged reaches the
store, through a drain, a replay after a crash (mid-drain too) or a torn tail; a full
log is answered with a retry delay; ownership is decided before the answer against
claims the log holds and the store has not seen; and the rows it stores are the rows
the direct path stores on the same requests (the fuzz corpus of `test_fuzz`, the wire
fixture, ownership conflicts)."""

from __future__ import annotations

import asyncio
import datetime as dt
import marshal
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue as PB2AnyValue

from ingest.errors import Backpressure
from ingest.export.decode import parse_protobuf
from ingest.export.fast import fast_batch
from ingest.export.request import validate_request
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.handoff.protocol import AnyBatch
from ingest.handoff.segments import SPARES, SegmentLog, encode
from ingest.handoff.smalllog import SmallLog
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED
from schemas.events import ValidatedBatch
from tests.ingest.export.test_fuzz import KEYS, NAMES, SPANS, Mutation, _apply, _base
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.clickhouse]

MIB = 1 << 20
AT = dt.datetime(2026, 12, 2, 15, 0, 0, 250000, tzinfo=dt.UTC)
WIRE = Path(__file__).resolve().parents[2] / "testdata" / "wire"
TABLES = (
    "evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine",
    "event_owners", "stream_owners", "lesson_overrides",
)  # fmt: skip


def _request(stream: str, count: int = 2, **first: Any) -> PB2ExportTraceServiceRequest:
    items: list[Evaluation | Sentinel] = [Evaluation(stream, 0, **first)]
    items += [Evaluation(stream, seq) for seq in range(1, count)]
    return export_request(record_spans(items, seed=len(stream)))


def _batch(request: PB2ExportTraceServiceRequest) -> AnyBatch:
    """As the receiver hands it over: the hot path's batch (with its bytes, which the
    log keeps of it), else the models'."""
    wire = request.SerializeToString()
    parsed = parse_protobuf(wire)
    return fast_batch(parsed, wire=wire) or validate_request(parsed)


def _log(store: ClickHouseStore, directory: Path, **options: Any) -> SmallLog:
    return SmallLog(directory, store, clock=lambda: AT, **options)


def _handoff(store: ClickHouseStore, log: SmallLog | None) -> EmbeddedHandoff:
    return EmbeddedHandoff(
        store, max_inflight_bytes=64 * MIB, commit_wait_seconds=0, clock=lambda: AT, log=log
    )


async def _submit(handoff: EmbeddedHandoff, request: Any, receipt: str) -> AnyBatch:
    batch = request if isinstance(request, ValidatedBatch) else _batch(request)
    return await handoff.submit(handoff.prepare(batch), receipt, 1000)


def _events(store: ClickHouseStore) -> int:
    rows = store.query("SELECT count() FROM holonograph.evaluation_events FINAL").rows
    return int(rows[0][0])


_OWNERS = {
    "event_owners": "tenant_id, event_id, argMin((agent_id, first_received_at,"
    " first_ingest_version), _block_number)",
    "stream_owners": "tenant_id, emission_stream, argMin((any_agent, agents,"
    " first_received_at), _block_number)",
}


def _dump(store: ClickHouseStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every table as it is read: FINAL, and a key's owner as its first claim."""
    out = {}
    for table in TABLES:
        if table in _OWNERS:
            keys = ", ".join(_OWNERS[table].split(", ")[:2])
            sql = f"SELECT {_OWNERS[table]} FROM holonograph.{table} GROUP BY {keys}"
        else:
            sql = f"SELECT * FROM holonograph.{table} FINAL"
        out[table] = sorted(store.query(sql).rows, key=repr)
    return out


def _truncate(store: ClickHouseStore) -> None:
    for table in TABLES:
        store.command(f"TRUNCATE TABLE holonograph.{table}")


# --- the files ------------------------------------------------------------------------


def test_a_torn_tail_is_cut_off_and_appending_goes_on(tmp_path: Path) -> None:
    segments = SegmentLog(tmp_path / "log")
    list(segments.recover())
    segments.append(b"first")
    end = segments.append(b"second")
    segments.sync()
    segments.close()
    path = next((tmp_path / "log").glob("*.seg"))
    with open(path, "ab") as torn:  # a crash in the middle of a third frame
        torn.write(encode(b"third, never acknowledged")[:9])
    again = SegmentLog(tmp_path / "log")
    assert [payload for payload, _ in again.recover()] == [b"first", b"second"]
    assert path.stat().st_size == end.offset
    again.append(b"fourth")
    again.sync()
    again.close()
    assert [p for p, _ in SegmentLog(tmp_path / "log").recover()] == [
        b"first",
        b"second",
        b"fourth",
    ]
    assert (tmp_path / "log").stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_bad_frame_before_the_last_segment_stops_the_start(tmp_path: Path) -> None:
    from ingest.handoff.segments import LogDamaged

    directory = tmp_path / "log"
    segments = SegmentLog(directory, segment_bytes=10)
    list(segments.recover())
    for payload in (b"a" * 20, b"b" * 20, b"c" * 20):
        segments.append(payload)
    segments.sync()
    segments.close()
    first = sorted(directory.glob("*.seg"))[0]
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(LogDamaged, match="before the last segment"):
        list(SegmentLog(directory).recover())


def test_the_drained_position_drops_old_segments(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    segments = SegmentLog(directory, segment_bytes=10)
    list(segments.recover())
    ends = [segments.append(bytes([n]) * 20) for n in range(3)]
    segments.sync()
    segments.drained(ends[1])
    assert len(list(directory.glob("*.seg"))) == 2
    segments.close()
    assert [p for p, _ in SegmentLog(directory).recover()] == [bytes([2]) * 20]


def test_drained_segments_are_written_over_and_their_old_frames_never_read(
    tmp_path: Path,
) -> None:
    """A drained segment this writer wrote becomes a spare that the next segment is
    written over in place: after a kill, only the frames past the position are read,
    none of those the file held before (they fail the new segment's seeded crc)."""
    directory = tmp_path / "log"
    segments = SegmentLog(directory, segment_bytes=100)
    list(segments.recover())
    ends = [segments.append(bytes([n]) * 110) for n in range(6)]  # a segment each
    segments.sync()
    segments.drained(ends[4])  # segments 0-3 below it: 1-3 are this writer's
    assert len(list(directory.glob("*.spare"))) == SPARES
    spare = max(directory.glob("*.spare"))
    inode = spare.stat().st_ino
    later = segments.append(b"x" * 10)  # segment 6: the spare, written over
    segments.sync()
    assert later.segment == 6 and len(list(directory.glob("*.spare"))) == SPARES - 1
    recycled = directory / f"{6:016d}.seg"
    assert recycled.stat().st_ino == inode and recycled.stat().st_size > later.offset
    # killed here (not closed): the rest of the old frames is still in the file
    again = SegmentLog(directory, segment_bytes=100)
    assert [p for p, _ in again.recover()] == [bytes([5]) * 110, b"x" * 10]
    assert recycled.stat().st_size == later.offset  # cut off as a torn tail
    again.append(b"y")
    again.sync()
    again.close()
    assert [p for p, _ in SegmentLog(directory).recover()][-2:] == [b"x" * 10, b"y"]


def test_a_closed_segment_ends_at_its_last_frame(tmp_path: Path) -> None:
    """A segment written over a longer spare is cut to its frames when it is closed or
    the next one opens, so only the last segment can end in bytes that are not a frame
    (anywhere else that is damage)."""
    directory = tmp_path / "log"
    segments = SegmentLog(directory, segment_bytes=100)
    list(segments.recover())
    ends = [segments.append(bytes([n]) * 150) for n in range(4)]
    segments.sync()
    segments.drained(ends[3])
    for n in range(3):  # over the spares: shorter than what they held
        segments.append(bytes([10 + n]) * 120)
    segments.sync()
    segments.close()
    for path in directory.glob("*.seg"):
        assert path.stat().st_size in (ends[3].offset, 8 + 120)
    assert [p for p, _ in SegmentLog(directory).recover()] == [
        bytes([10 + n]) * 120 for n in range(3)
    ]


def test_a_spare_removed_by_someone_else_is_replaced_by_a_new_file(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    segments = SegmentLog(directory, segment_bytes=100)
    list(segments.recover())
    ends = [segments.append(bytes([n]) * 110) for n in range(3)]
    segments.sync()
    segments.drained(ends[2])
    for spare in directory.glob("*.spare"):
        spare.unlink()
    segments.append(b"after")  # rolls: no spare left on disk
    segments.sync()
    segments.close()
    assert [p for p, _ in SegmentLog(directory).recover()] == [b"after"]


def test_frames_of_builds_before_seeded_crcs_are_read(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    (directory / f"{0:016d}.seg").write_bytes(encode(b"old one") + encode(b"old two"))
    segments = SegmentLog(directory)
    assert [p for p, _ in segments.recover()] == [b"old one", b"old two"]
    segments.append(b"new")  # seeded, after them in the same segment
    segments.sync()
    segments.close()
    assert [p for p, _ in SegmentLog(directory).recover()] == [b"old one", b"old two", b"new"]
    with (directory / f"{0:016d}.seg").open("ab") as other:  # a frame of segment 1 here
        other.write(encode(b"elsewhere", 1))
    assert [p for p, _ in SegmentLog(directory).recover()][-1] == b"new"


# --- acknowledged means stored --------------------------------------------------------


async def test_acknowledged_commits_are_replayed_after_a_crash(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """Killed before any drain (the drain never runs: its cadence is an hour)."""
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    for n in range(5):
        await _submit(handoff, _request(f"crash-{n}"), f"r{n}")
    assert _events(store) == 0  # acknowledged, in the log only
    # As SIGKILL leaves it: nothing closed, nothing drained.
    restarted = _log(store, tmp_path / "log")
    again = _handoff(store, restarted)
    await again.open()
    assert _events(store) == 10
    await again.close()


async def test_a_kill_mid_drain_replays_and_collapses(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """The drain's inserts happened, its position was not recorded: the replay writes
    the same rows again, and every table collapses them."""
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    for n in range(3):
        await _submit(handoff, _request(f"mid-{n}", count=3), f"r{n}")
    small._insert(list(small.frames))  # the inserts of a drain, then the kill
    assert _events(store) == 9
    restarted = _log(store, tmp_path / "log")
    again = _handoff(store, restarted)
    assert await restarted.open(again._committer) == 3
    receipts = store.query(
        "SELECT count() FROM holonograph.emission_receipts FINAL WHERE receipt_id LIKE 'r%'"
    ).rows
    assert _events(store) == 9 and receipts[0][0] == 9
    await again.close()


async def test_close_drains_and_records_the_position(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("closing"), "r1")
    await handoff.close()
    assert _events(store) == 2
    assert list(SegmentLog(tmp_path / "log").recover()) == []


async def test_readers_wait_for_the_drain(store: ClickHouseStore, tmp_path: Path) -> None:
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("read-your-writes"), "r1")
    assert _events(store) == 0
    await asyncio.to_thread(small.wait_drained)  # a reader's session opens after this
    assert _events(store) == 2
    await handoff.close()


# --- bounds ---------------------------------------------------------------------------


async def test_the_log_drains_before_its_cadence_at_half_its_bytes_bound(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """The cadence is an hour and the row count out of reach: the bytes logged drain the
    log once they pass half its bound, before a request would be refused for them."""
    small = _log(store, tmp_path / "log", max_bytes=64 * 1024, drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("small"), "r0")
    assert small.undrained_bytes < 32 * 1024
    await asyncio.sleep(0.3)
    assert _events(store) == 0  # below half the bound: waits for the cadence
    n = 1
    while small.undrained_bytes < 32 * 1024:
        await _submit(handoff, _request(f"fill-{n}", count=8), f"r{n}")
        n += 1
    for _ in range(200):  # the drain runs on its own: no read asked for it
        if small.drained == small.acked:
            break
        await asyncio.sleep(0.05)
    assert small.drained == small.acked
    assert _events(store) == 2 + 8 * (n - 1)
    await handoff.close()


async def test_a_full_log_is_answered_with_a_retry_delay(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    small = _log(store, tmp_path / "log", max_bytes=1, drain_seconds=3600, drain_rows=10**9)
    small._retry_after = 2.0
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("fills"), "r1")  # one frame: the log is past its bound
    with pytest.raises(Backpressure) as refused:
        await _submit(handoff, _request("refused"), "r2")
    assert refused.value.retry_after == 2.0
    assert "not yet in the store" in str(refused.value)
    await small.drain_now()  # drained: the log takes requests again
    await _submit(handoff, _request("taken"), "r3")
    await handoff.close()
    assert _events(store) == 4


async def test_a_failing_log_answers_unavailable_and_says_so(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    from ingest.errors import Unavailable

    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()

    def failing(payload: bytes) -> Any:
        raise OSError(28, "No space left on device")

    small.segments.append = failing  # type: ignore[method-assign]
    with pytest.raises(Unavailable, match="No space left"):
        await _submit(handoff, _request("disk-full"), "r1")
    assert "No space left" in (await handoff.readiness() or "")
    with pytest.raises(Unavailable, match="stopped"):
        await _submit(handoff, _request("after"), "r2")
    await handoff.close()
    assert _events(store) == 0


# --- ownership before the answer -------------------------------------------------------


async def test_ownership_is_decided_against_claims_only_the_log_holds(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    first = _request("owned", event_id="evt-shared")
    await _submit(handoff, first, "r1")
    assert _events(store) == 0  # the claim is in the log only
    other = Evaluation("thief", 0, event_id="evt-shared", extra={"holonograph.agent.id": "b"})
    stored = await _submit(handoff, export_request(record_spans([other])), "r2")
    assert isinstance(stored, ValidatedBatch)
    assert not stored.events
    assert [q.reason.split(":")[0] for q in stored.quarantined] == [EVENT_OWNED.split(":")[0]]
    assert small.index.store_lookups == 0  # decided in memory
    await handoff.close()
    agents = store.query(
        "SELECT agent_id FROM holonograph.evaluation_events FINAL WHERE event_id = 'evt-shared'"
    ).rows
    assert len(agents) == 1 and agents[0][0] != "b"


async def test_claims_of_the_store_are_loaded_at_start(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """Written before this log existed (the direct path): the filter sends the key to
    the store, which says who owns it."""
    direct = _handoff(store, None)
    await _submit(direct, _request("old", event_id="evt-old"), "r0")
    await direct.close()
    small = _log(store, tmp_path / "log")
    handoff = _handoff(store, small)
    await handoff.open()
    other = Evaluation("new", 0, event_id="evt-old", extra={"holonograph.agent.id": "b"})
    stored = await _submit(handoff, export_request(record_spans([other])), "r1")
    assert isinstance(stored, ValidatedBatch) and not stored.events
    assert small.index.store_lookups == 1
    await handoff.close()


async def test_a_foreign_writers_claims_are_read_before_the_next_decision(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """An override through the API claims an id on another connection."""
    small = _log(store, tmp_path / "log")
    handoff = _handoff(store, small)
    await handoff.open()
    store.insert(
        "holonograph.event_owners",
        [["default", "evt-foreign", "someone", AT, 1]],
        ("tenant_id", "event_id", "agent_id", "first_received_at", "first_ingest_version"),
    )
    small.index.foreign_write()
    stored = await _submit(handoff, _request("foreign", event_id="evt-foreign"), "r1")
    assert isinstance(stored, ValidatedBatch)
    assert [e.event_id for e in stored.events] == ["evt_foreign_1"]
    assert [q.reason.split(":")[0] for q in stored.quarantined] == [EVENT_OWNED.split(":")[0]]
    await handoff.close()


async def test_a_stream_opened_in_the_log_is_refused_to_another_token(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    opener = validate_request(_request("strm-owned"))
    await _submit(handoff, opener.model_copy(update={"agents": frozenset({"a"})}), "r1")
    later = validate_request(_request("strm-owned"))
    stored = await _submit(handoff, later.model_copy(update={"agents": frozenset({"z"})}), "r2")
    assert isinstance(stored, ValidatedBatch) and not stored.events
    assert all(q.reason.startswith(STREAM_OWNED) for q in stored.quarantined)
    await handoff.close()


# --- the same rows as the direct path --------------------------------------------------


def _corpus() -> list[Any]:
    """Mutated fuzz requests (seeded), the wire fixture, and ownership conflicts across
    requests (an event id re-sent by another agent, a re-send by the same one)."""
    rng = random.Random(24)
    requests: list[Any] = []
    values = [
        PB2AnyValue(string_value=""), PB2AnyValue(string_value="x"), PB2AnyValue(int_value=7),
        PB2AnyValue(int_value=-1), PB2AnyValue(int_value=2**40), PB2AnyValue(double_value=1.5),
        PB2AnyValue(double_value=float("nan")), PB2AnyValue(bool_value=True), PB2AnyValue(),
        PB2AnyValue(string_value="2026-12-01T10:00:00Z"),
    ]  # fmt: skip
    for example in range(60):
        request = _base(example)
        spans = request.resource_spans[0].scope_spans[0].spans
        for _ in range(rng.randrange(4)):
            kind = rng.choice(["set", "delete", "name", "ids"])
            mutation = Mutation(
                rng.randrange(SPANS),
                kind,
                rng.choice(KEYS) if kind in ("set", "delete") else "",
                rng.choice(NAMES) if kind == "name" else rng.randrange(4) if kind == "ids"
                else rng.choice(values),
            )  # fmt: skip
            _apply(example, spans[mutation.span], mutation, request)
        requests.append(request)
    wire = PB2ExportTraceServiceRequest()
    json_format.Parse((WIRE / "evaluation-and-sentinel.otlp.json").read_text(), wire)
    requests.append(wire)
    requests.append(_request("diff-owner", event_id="evt-diff"))
    requests.append(_request("diff-owner", event_id="evt-diff"))  # a re-send
    thief = Evaluation("diff-thief", 0, event_id="evt-diff", extra={"holonograph.agent.id": "b"})
    requests.append(export_request(record_spans([thief])))
    return requests


async def test_the_log_stores_the_rows_of_the_direct_path(
    store: ClickHouseStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drained from memory, or replayed from the frames after a kill (a hot-path batch's
    frame holds its request's bytes: decoded again by the hot path, or by the reference
    where this build's hot path declines them), the log stores the direct path's rows."""
    from ingest.handoff import smalllog

    corpus = _corpus()
    answers: dict[str, list[Any]] = {}
    dumps = {}
    for name in ("direct", "log", "replayed", "replayed by the reference"):
        logged = name != "direct"
        killed = name.startswith("replayed")
        options = {"drain_seconds": 3600, "drain_rows": 10**9} if killed else {}
        small = _log(store, tmp_path / name, **options) if logged else None
        handoff = _handoff(store, small)
        await handoff.open()
        answers[name] = []
        for n, request in enumerate(corpus):
            stored = await _submit(handoff, request, f"receipt-{n:04d}")
            answers[name].append(
                (stored.rows, len(stored.receipts))
                if not isinstance(stored, ValidatedBatch)
                else (len(stored.events), len(stored.quarantined), len(stored.emissions))
            )
        if killed:  # as SIGKILL leaves it: nothing drained or closed, the next start replays
            assert _events(store) == 0
            frames = SegmentLog(tmp_path / name)
            versions = {marshal.loads(payload[1:])[0] for payload, _ in frames.recover()}
            frames.close()
            assert versions == {3, 4}  # the hot path's batches as their bytes, the rest rows
            if name.endswith("reference"):
                monkeypatch.setattr(smalllog, "fast_batch", lambda *args, **kwargs: None)
            restarted = _log(store, tmp_path / name)
            assert await asyncio.to_thread(restarted.replay) == len(corpus)
            restarted.segments.close()
            monkeypatch.undo()
        else:
            await handoff.close()
        dumps[name] = _dump(store)
        _truncate(store)
    assert answers["log"] == answers["direct"] == answers["replayed"]
    assert dumps["direct"]["evaluation_events"], "the corpus stored nothing"
    assert dumps["direct"]["quarantine"], "the corpus quarantined nothing"
    for name in ("log", "replayed", "replayed by the reference"):
        for table in TABLES:
            log_rows, direct_rows = dumps[name][table], dumps["direct"][table]
            assert len(log_rows) == len(direct_rows), (name, table)
            for a, b in zip(log_rows, direct_rows, strict=True):
                assert a == b, (
                    name,
                    table,
                    [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y],
                )


def test_wait_drained_on_the_loop_thread_never_blocks(tmp_path: Path) -> None:
    """A reader called on the event loop's own thread would deadlock the drain."""
    small = SmallLog(tmp_path / "log", store=None)  # type: ignore[arg-type]
    small.acked = 5
    small._loop_thread = threading.get_ident()
    small.wait_drained()  # returns at once


async def test_an_offline_opener_replays_what_a_killed_serve_logged(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    from ingest.handoff.smalllog import replay_pending

    assert replay_pending(store, tmp_path / "none") == 0
    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("offline-a"), "r1")
    await _submit(handoff, _request("offline-b"), "r2")
    assert _events(store) == 0
    assert await asyncio.to_thread(replay_pending, store, tmp_path / "log") == 2
    assert _events(store) == 4
    assert await asyncio.to_thread(replay_pending, store, tmp_path / "log") == 0


class _Refusing:
    """The store, refusing for good every insert of events that holds one event's row
    (as chDB refuses a value its column cannot hold: permanent), counting inserts."""

    def __init__(self, store: ClickHouseStore, event_id: str) -> None:
        self._store = store
        self._event_id = event_id
        self.inserts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def insert(self, table: str, rows: Any, column_names: Any, settings: Any = None) -> None:
        self.inserts += 1
        if table.endswith(".evaluation_events") and any(r[1] == self._event_id for r in rows):
            raise ValueError(f"{self._event_id}: value out of range for its column")
        self._store.insert(table, rows, column_names, settings)


def _refused_as_logged(store: ClickHouseStore) -> None:
    """Every span of both requests stored but the one refused event, which is in the
    quarantine with the store's message, from the log."""
    events = store.query("SELECT event_id FROM holonograph.evaluation_events FINAL").rows
    assert sorted(e for (e,) in events) == [
        "evt_refused-a_0", "evt_refused-a_1", "evt_refused-a_2",
        "evt_refused-b_0", "evt_refused-b_2",
    ]  # fmt: skip
    receipts = store.query("SELECT count() FROM holonograph.emission_receipts FINAL").rows
    assert receipts[0][0] == 6
    quarantined = store.query("SELECT reason, source FROM holonograph.quarantine FINAL").rows
    assert quarantined == [
        (
            "store refused: evt_refused-b_1: value out of range for its column"
            " (after the span was acknowledged: logged row of events)",
            "log",
        )
    ]


async def test_a_row_the_store_refuses_at_the_drain_is_quarantined_the_rest_stored(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    refusing = _Refusing(store, "evt_refused-b_1")
    small = _log(refusing, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)  # type: ignore[arg-type]
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("refused-a", count=3), "r1")
    await _submit(handoff, _request("refused-b", count=3), "r2")
    before = refusing.inserts
    await asyncio.to_thread(small.wait_drained)
    assert small.refused_rows == 1
    _refused_as_logged(store)
    # The drain (5 tables), then each table again, events bisected: 6 rows, 2·log2(6)+.
    assert refusing.inserts - before <= 5 + 5 + 2 * 3 + 1
    await handoff.close()
    assert list(SegmentLog(tmp_path / "log").recover()) == []  # drained past it


async def test_a_row_the_store_refuses_at_an_offline_replay_is_quarantined(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """`replay_pending` (an offline opener after a kill) is the start's replay: the
    same isolation, the same quarantine row, the position recorded past it."""
    from ingest.handoff.smalllog import replay_pending

    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, _request("refused-a", count=3), "r1")
    await _submit(handoff, _request("refused-b", count=3), "r2")
    assert _events(store) == 0  # killed: nothing drained
    refusing = _Refusing(store, "evt_refused-b_1")
    assert await asyncio.to_thread(replay_pending, refusing, tmp_path / "log") == 2
    _refused_as_logged(store)
    assert await asyncio.to_thread(replay_pending, store, tmp_path / "log") == 0


def test_frames_round_trip_by_marshal_or_pickle() -> None:
    from ingest.handoff.smalllog import decode_frame, encode_frame
    from ingest.store.rows import TableRows

    plain = TableRows(events=[["default", "e1", 1.5, None, True, {"k": ["v"]}, [1, 2]]])
    dated = TableRows(overrides=[["default", "o1", AT]])
    for rows, kind in ((plain, b"M"), (dated, b"P")):
        payload = encode_frame(rows, [["default", "e1", "a", 1, 2]], [])
        assert payload[:1] == kind
        decoded, event_claims, stream_claims = decode_frame(payload)
        assert decoded == rows and event_claims == [["default", "e1", "a", 1, 2]]
        assert stream_claims == []
    with pytest.raises(ValueError, match="unknown encoding"):
        decode_frame(b"X")


def test_a_frame_of_the_previous_build_is_read_and_shared_rows_round_trip() -> None:
    """A log written before shared rows (frame version 2) replays; shared rows
    (`FastBatch.add_shared`) come back as logged."""
    import marshal

    from ingest.handoff.smalllog import decode_frame, encode_frame
    from ingest.store.rows import SharedRows, TableRows

    tables = [[["default", "e1", 1]], [], [["default", "s", 0]], [], []]
    old = b"M" + marshal.dumps((2, tables, [], [["default", "s"]], [["default", "e1", "x", 3600]]))
    rows, event_claims, stream_claims = decode_frame(old)
    assert rows.events == [["default", "e1", 1]] and rows.receipts == [["default", "s", 0]]
    assert rows.placements == {("default", "e1"): ("x", 3600)} and rows.shared == []
    assert (event_claims, stream_claims) == ([], [["default", "s"]])
    part = SharedRows([["default", "e2"]], [5, 6, "", []], [["default", "e2", "d"]], [5, 6])
    placements = {("default", "e2"): ("x", 7200)}
    logged = TableRows(receipts=[["default", "s", 1]], placements=placements, shared=[part])
    decoded, _, _ = decode_frame(encode_frame(logged, [], []))
    assert decoded == logged
    assert decoded.expanded().events == [["default", "e2", 5, 6, "", []]]


async def test_a_resent_event_keeps_its_first_placement_whoever_decides_it(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """Migration 0016's sorting key is the event's first placement (surface and hour):
    a re-send an hour later is decided from the log's memory (pending, then drained and
    recent) or, after a restart, by the store, and every time collapses onto one row."""
    hour_ns = 3600 * 10**9
    first_ns = int(AT.timestamp()) * 10**9 - 30 * hour_ns

    def version(n: int) -> Any:
        sent = Evaluation("moving", 0, event_id="evt-moving", end_ns=first_ns + n * hour_ns)
        return export_request(record_spans([sent]))

    small = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    handoff = _handoff(store, small)
    await handoff.open()
    await _submit(handoff, version(0), "r0")
    await _submit(handoff, version(1), "r1")  # the first is in the log only
    await small.drain_now()
    await _submit(handoff, version(2), "r2")  # decided from the recent keys
    await handoff.close()
    restarted = _log(store, tmp_path / "log", drain_seconds=3600, drain_rows=10**9)
    again = _handoff(store, restarted)
    await again.open()
    await _submit(again, version(3), "r3")  # the store's lookup decides
    await again.close()
    rows = store.query(
        "SELECT toUInt32(placed_hour), toUnixTimestamp64Nano(timestamp)"
        " FROM holonograph.evaluation_events FINAL WHERE event_id = 'evt-moving'"
    ).rows
    hour = first_ns // hour_ns * 3600
    assert [(int(h), int(t)) for h, t in rows] == [(hour, first_ns + 3 * hour_ns)]
    dimensions = store.query(
        "SELECT DISTINCT toUInt32(placed_hour) FROM holonograph.evaluation_dimensions"
        " WHERE event_id = 'evt-moving'"
    ).rows
    assert [int(h) for (h,) in dimensions] == [hour]
