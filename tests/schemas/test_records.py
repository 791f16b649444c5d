"""Unit tests (no broker): the record format round-trips exactly and rejects what it
must; packing respects the message limit; the brake trips on runs and ratios; the
insert deduplication token depends on content, not offsets."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import OutRecord, pack, payload_limit, screen
from ingest.sink.batch import Batch, Consumed
from ingest.sink.dlq import PoisonBrake, SinkHalted
from schemas import records
from schemas.events import ValidatedBatch
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

AT = dt.datetime(2026, 11, 30, 14, 0, 0, 123456, tzinfo=dt.UTC)


def _batch(streams: int = 2, per_stream: int = 5, text: str = "") -> ValidatedBatch:
    items: list[Evaluation | Sentinel] = []
    for s in range(streams):
        for seq in range(per_stream):
            extra = {"holonograph.marker.response_text": text} if text else {}
            items.append(Evaluation(f"s{s}", seq, extra=extra, dims=[Dim("tone", score=0.5)]))
        items.append(Sentinel(f"s{s}", per_stream, counters={"offered": per_stream}))
    items.append(Evaluation("bad", 0, run_mode="staging"))
    return validate_request(export_request(record_spans(items, seed=1)))


def _packed(batch: ValidatedBatch, receipt_id: str) -> list[OutRecord]:
    """`batch` as the Kafka hand-off sends it: screened (`prepare`), then packed."""
    return pack(screen(batch, 1_000_000), receipt_id, AT, 1_000_000)


def test_records_round_trip_byte_for_byte() -> None:
    out = _packed(_batch(), "r1")
    # s0, s1, and "bad": its rejected span arrived, so its ordinal travels too
    assert [(r.key, r.dead_letter) for r in out] == [
        (b"s0", False),
        (b"s1", False),
        (b"bad", False),
        (b"bad", True),
    ]
    for record in out:
        decoded = records.decode(record.value)
        assert decoded == record.record
        assert records.encode(decoded) == record.value
    first = out[0].record
    assert isinstance(first, records.BatchRecord)
    assert first.stream == out[0].key.decode() == "s0"
    assert (len(first.events), len(first.emissions)) == (5, 6)
    assert isinstance(out[2].record, records.BatchRecord)
    assert out[2].record.emissions[0].quarantined
    letter = out[3].record
    assert isinstance(letter, records.QuarantinedLetter)
    assert letter.span.span_proto  # kept for replay, base64 in JSON


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "empty record"),
        (b"\xff\xfe", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"schema_version": 9, "kind": "batch"}', "schema_version 9 is not supported"),
        (b'{"kind": "batch"}', "schema_version None is not supported"),
        (b'{"schema_version": 1, "kind": "nope"}', "kind 'nope' is not one of"),
        (b'{"schema_version": 1, "kind": "batch"}', "batch: receipt_id: Field required"),
    ],
)
def test_decode_rejects_with_a_reason(value: bytes, reason: str) -> None:
    with pytest.raises(records.RecordError, match=reason):
        records.decode(value)


def test_decode_rejects_unknown_fields_and_mixed_streams() -> None:
    value = _packed(_batch(streams=1), "r")[0].value
    body = json.loads(value)
    with pytest.raises(records.RecordError, match="extra_field"):
        records.decode(json.dumps({**body, "extra_field": 1}).encode())
    with pytest.raises(records.RecordError, match="holds"):
        records.decode(json.dumps({**body, "stream": "other"}).encode())


@settings(max_examples=25, deadline=None)
@given(
    limit=st.integers(min_value=6_000, max_value=60_000),
    text=st.text(min_size=0, max_size=1_500),
)
def test_packing_fits_the_limit_and_loses_nothing(limit: int, text: str) -> None:
    screened = screen(_batch(streams=3, per_stream=8, text=text), limit)
    out = pack(screened, "r", AT, limit)
    batch = screened.batch
    assert all(len(r.value) <= payload_limit(limit) for r in out if not r.dead_letter)
    stored = [r.record for r in out if isinstance(r.record, records.BatchRecord)]
    assert sorted(e.event_id for r in stored for e in r.events) == sorted(
        e.event_id for e in batch.events
    )
    assert len([e for r in stored for e in r.emissions]) == len(batch.emissions)
    for record in stored:  # an event travels with its emission record
        assert {e.event_id for e in record.events} <= {e.event_id for e in record.emissions}


def test_screen_quarantines_an_event_too_large_alone() -> None:
    batch = _batch(streams=1, per_stream=2, text="z" * 9_000)
    screened = screen(batch, 8_000).batch
    assert len(screened.events) == 0
    too_large = [q for q in screened.quarantined if q.reason.startswith("record of")]
    assert len(too_large) == 2
    assert "exceeds the broker's message limit of 8000 bytes" in too_large[0].reason
    arrived = [e for e in screened.emissions if e.quarantined and e.stream == "s0"]
    assert {e.seq for e in arrived} == {0, 1}  # arrived, so not gaps
    assert screen(_batch(), 1_000_000).batch == _batch()


def test_brake_trips_on_a_run_and_on_a_ratio() -> None:
    run = PoisonBrake(max_ratio=1.0, max_run=3)
    for _ in range(3):
        run.failed("bad")
    run.passed()  # a good record resets the run
    for _ in range(3):
        run.failed("bad")
    with pytest.raises(SinkHalted, match="4 invalid records in a row"):
        run.failed("bad")

    ratio = PoisonBrake(max_ratio=0.2, ratio_min_records=10, max_run=100)
    for n in range(9):
        if n % 2:
            ratio.failed("bad")  # 4 of 9, not yet enough records to judge
        else:
            ratio.passed()
    with pytest.raises(SinkHalted, match="5 of 10 records invalid"):
        ratio.failed("bad")


def test_dedup_token_is_content_not_offsets() -> None:
    value = _packed(_batch(streams=1), "r")[0]
    record = value.record
    assert isinstance(record, records.BatchRecord)

    def batch_at(topic: str, offset: int) -> Batch:
        batch = Batch(0.0)
        batch.add(Consumed(TopicPartition(topic, 0), offset, b"digest-1", record=record))
        return batch

    assert batch_at("a", 5).token() == batch_at("b", 900).token()
    other = Batch(0.0)
    other.add(Consumed(TopicPartition("a", 0), 5, b"digest-2", record=record))
    assert other.token() != batch_at("a", 5).token()
    assert batch_at("a", 5).offsets() == {TopicPartition("a", 0): 6}


def _old_encoding(record: records.Record) -> bytes:
    """How records were written before the single-serialization path: `json.dumps` of
    the model's Python dump, datetimes with `+00:00`, bytes base64."""

    def default(value: object) -> object:
        if isinstance(value, dt.datetime):
            return value.isoformat()
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        raise TypeError(type(value).__name__)

    body = record.model_dump(mode="python")
    if record.schema_version < records.OVERRIDE_VERSION:
        body.pop("overrides", None)  # no writer before version 6 knew the field
    return json.dumps(body, default=default, separators=(",", ":"), ensure_ascii=False).encode()


def test_packed_bytes_are_the_models_serialized_once() -> None:
    batch = _batch()
    out = _packed(batch, "r1")
    for record in out:
        assert records.encode(record.record) == record.value  # joined pieces == whole dump
        assert records.decode(record.value) == record.record
    body = json.loads(out[0].value)
    assert body["received_at"] == "2026-11-30T14:00:00.123456Z"  # RFC 3339, as RECORDS.md says
    assert list(body)[:2] == ["schema_version", "kind"]
    # nothing to quarantine: screening hands the batch itself on, with its units' bytes
    screened = screen(batch, 1_000_000)
    assert screened.batch is batch
    assert [r.value for r in pack(screened, "r1", AT, 1_000_000)] == [r.value for r in out]


def test_records_written_the_old_way_still_decode() -> None:
    for record in _packed(_batch(), "r1"):
        old = _old_encoding(record.record)
        assert b"+00:00" in old
        assert records.decode(old) == record.record


def test_a_non_finite_float_is_written_as_null_and_an_old_nan_still_decodes() -> None:
    event = _batch(streams=1).events[0]
    odd = event.model_copy(update={"extras": {"ratio": float("nan")}})
    batch = ValidatedBatch(events=(odd,), emissions=(_batch(streams=1).emissions[0],))
    record = _packed(batch, "r")[0]
    assert b'"ratio":null' in record.value
    decoded = records.decode(record.value)
    assert isinstance(decoded, records.BatchRecord)
    assert decoded.events[0].extras == {"ratio": None}
    old = records.decode(_old_encoding(record.record))  # json.dumps wrote NaN
    assert isinstance(old, records.BatchRecord)
    assert math.isnan(old.events[0].extras["ratio"])


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda v: v[:-1] + b',"extra_field":1}', "batch: extra_field: Extra inputs"),
        (lambda v: v[:-1] + b',"schema_version":9}', "schema_version 9 is not supported"),
        (lambda v: v[:-1] + b',"kind":"poison"}', "poison: "),
        (lambda v: v.replace(b'"seq":0', b'"seq":"zero"', 1), "seq: Input should be"),
        (lambda v: v.replace(b'"receipt_id":"r"', b'"receipt_id":7', 1), "receipt_id"),
        (lambda v: v[:-2], "not JSON"),
    ],
)
def test_the_fast_batch_path_is_as_strict_as_the_general_one(edit: Any, reason: str) -> None:
    value = _packed(_batch(streams=1), "r")[0].value
    assert value.startswith(b'{"schema_version":4,"kind":"batch",')
    with pytest.raises(records.RecordError, match=reason):
        records.decode(edit(value))


def test_decoded_events_share_equal_resources_for_row_building() -> None:
    out = _packed(_batch(streams=1, per_stream=4), "r")
    record = records.decode(out[0].value)
    assert isinstance(record, records.BatchRecord)
    before = [e.model_dump() for e in record.events]
    assert len({id(e.resource_attributes) for e in record.events}) == 4  # one dict each
    held = Batch(0.0)
    held.add(Consumed(TopicPartition("t", 0), 0, b"d", record=record))
    rows = held.table_rows()
    assert len(rows.events) == 4
    assert len({id(e.resource_attributes) for e in record.events}) == 1
    assert [e.model_dump() for e in record.events] == before  # same values


def _tenant_batch(tenant: str) -> ValidatedBatch:
    return _batch(streams=1).model_copy(update={"tenant_id": tenant})


def test_records_carry_the_tenant_and_round_trip() -> None:
    out = _packed(_tenant_batch("acme"), "r")
    kinds = [type(r.record).__name__ for r in out]
    assert kinds == ["BatchRecord", "BatchRecord", "QuarantinedLetter"]  # s0, "bad", its letter
    for record in out:
        body = json.loads(record.value)
        assert (body["schema_version"], body["tenant_id"], body["agents"]) == (4, "acme", None)
        decoded = records.decode(record.value)
        assert decoded == record.record
        assert records.encode(decoded) == record.value
    held = Batch(0.0)
    for offset, record in enumerate(out):
        stored = records.decode(record.value)
        assert isinstance(stored, records.BatchRecord | records.QuarantinedLetter)
        held.add(Consumed(TopicPartition("t", 0), offset, b"d%d" % offset, record=stored))
    rows = held.table_rows()
    tenants = {row[0] for table in (rows.events, rows.receipts, rows.quarantine) for row in table}
    assert tenants == {"acme"}


def _as_version(value: bytes, version: int) -> dict[str, Any]:
    """A record as an older writer wrote it: no agents before 4, no contract fields before
    3, no tenant before 2."""
    body = json.loads(value)
    body["schema_version"] = version
    del body["agents"]
    if version < 3:
        for event in body.get("events", []):
            del event["contract_version_id"], event["contract_findings"]
    if version < 2:
        del body["tenant_id"]
    return body  # type: ignore[no-any-return]


def _as_version_1(value: bytes) -> bytes:
    return json.dumps(_as_version(value, 1)).encode()


def test_version_2_records_are_read_as_checked_against_no_contract() -> None:
    checked = _tenant_batch("acme")
    event = checked.events[0].model_copy(
        update={"contract_version_id": "cv_1", "contract_findings": ("undeclared-dimension:x",)}
    )
    record = _packed(checked.model_copy(update={"events": (event, *checked.events[1:])}), "r")[0]
    assert records.decode(record.value) == record.record  # version 3 on keeps the check
    body = _as_version(record.value, 2)
    old = records.decode(json.dumps(body, separators=(",", ":")).encode())
    assert isinstance(old, records.BatchRecord) and old.schema_version == 2
    assert (old.events[0].contract_version_id, old.events[0].contract_findings) == ("", ())
    body["events"][0]["contract_version_id"] = "cv_1"
    with pytest.raises(
        records.RecordError, match="contract fields: not fields of schema_version 2"
    ):
        records.decode(json.dumps(body).encode())


def test_version_1_records_are_still_read_as_tenant_default() -> None:
    for record in _packed(_tenant_batch("acme"), "r"):
        old = records.decode(_as_version_1(record.value))
        assert (old.schema_version, old.tenant_id) == (1, "default")  # type: ignore[union-attr]
    batch = _packed(_tenant_batch("acme"), "r")[0].value
    v1 = _as_version_1(batch)
    assert v1.startswith(b'{"schema_version": 1, "kind": "batch",')  # the general path
    compact = json.dumps(json.loads(v1), separators=(",", ":")).encode()
    assert records.decode_batch_fast(compact) is not None  # and the fast one


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda b: {**b, "schema_version": 1}, "tenant_id: not a field of schema_version 1"),
        (lambda b: {k: v for k, v in b.items() if k != "tenant_id"}, "tenant_id: required"),
        (lambda b: {**b, "tenant_id": ""}, "tenant_id: String should have at least 1"),
    ],
)
def test_the_tenant_field_follows_the_version(edit: Any, reason: str) -> None:
    for record in _packed(_tenant_batch("acme"), "r"):
        value = json.dumps(edit(json.loads(record.value)), separators=(",", ":")).encode()
        with pytest.raises(records.RecordError, match=reason):
            records.decode(value)


def test_the_fast_writer_writes_what_the_fast_reader_takes() -> None:
    """`ingest.handoff.kafka_packing` assembles batch records from pieces; every one must be
    exactly what `schemas.records` parses in one pass (and what `encode` would write)."""
    for tenant in ("default", "acme", 'odd "tenant" \u00e9'):
        batch = _batch().model_copy(update={"tenant_id": tenant})
        for record in _packed(batch, "r1"):
            if record.dead_letter:
                continue
            assert record.value.startswith(records.BATCH_HEAD)
            fast = records.decode_batch_fast(record.value)
            assert fast is not None and fast == record.record
            assert records.encode(fast) == record.value


def test_version_4_records_carry_the_tokens_agents_and_version_3_is_still_read() -> None:
    agents = frozenset({"support", "billing-triage"})
    out = _packed(_tenant_batch("acme").model_copy(update={"agents": agents}), "r")
    for record in out:
        body = json.loads(record.value)
        assert (body["schema_version"], body["agents"]) == (4, ["billing-triage", "support"])
        decoded = records.decode(record.value)
        assert decoded == record.record
        assert decoded.agents == ("billing-triage", "support")  # type: ignore[union-attr]
        assert records.encode(decoded) == record.value
        old = records.decode(json.dumps(_as_version(record.value, 3)).encode())
        assert (old.schema_version, old.agents) == (3, None)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda b: {**b, "schema_version": 3}, "agents: not a field of schema_version 3"),
        (lambda b: {k: v for k, v in b.items() if k != "agents"}, "agents: required"),
        (lambda b: {**b, "agents": "billing-triage"}, "agents"),
    ],
)
def test_the_agents_field_follows_the_version(edit: Any, reason: str) -> None:
    for record in _packed(_tenant_batch("acme"), "r"):
        value = json.dumps(edit(json.loads(record.value)), separators=(",", ":")).encode()
        with pytest.raises(records.RecordError, match=reason):
            records.decode(value)


def test_a_record_read_as_an_older_version_is_written_again_as_that_version() -> None:
    """A refused record's letter (and a replay) re-encodes what was decoded."""
    for record in _packed(_tenant_batch("acme"), "r"):
        for version in (1, 2, 3):
            old = records.decode(json.dumps(_as_version(record.value, version)).encode())
            assert records.decode(records.encode(old)) == old


def _genai_batch() -> ValidatedBatch:
    """Holonograph spans and GenAI evaluations (events without ordinals) in one request."""
    from tests.genai_emit import Call, Eval, genai_contract, record_calls
    from tests.ingest.export.test_genai import book_of

    spans = [
        *record_spans([Evaluation("s0", 0, surface="summarize")], seed=1),
        *record_calls([Call([Eval("relevance", score=4.0)]), Call([Eval("tone", label="pass")])]),
    ]
    batch = validate_request(export_request(spans), contracts=book_of(genai_contract()))
    assert batch.quarantined == () and len(batch.events) == 3
    return batch


def test_events_without_ordinals_travel_in_version_5_records_of_no_stream() -> None:
    batch = _genai_batch()
    out = _packed(batch, "r1")
    genai = [e for e in batch.events if e.emission is None]
    assert [(r.key, r.record.schema_version) for r in out] == [
        (b"s0", 4),  # everything else stays version 4: a sink reading 4 reads it
        (f"default/{genai[0].event_id}".encode(), 5),
    ]
    record = out[1].record
    assert isinstance(record, records.BatchRecord)
    assert (record.stream, record.emissions, record.events) == ("", (), tuple(genai))
    for packed in out:
        decoded = records.decode(packed.value)
        assert decoded == packed.record
        assert records.encode(decoded) == packed.value
    assert json.loads(out[1].value)["events"][0]["emission"] is None


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda r: r.update(schema_version=4), "stream: empty, and a record of schema_version 4"),
        (
            lambda r: r["events"][0].update(emission={"stream": "s0", "seq": 1, "final": False}),
            "a record of no stream holds only events without ordinals",
        ),
        (
            lambda r: r.update(stream="s0"),
            "record of stream 's0' holds an event without ordinals",
        ),
    ],
)
def test_a_record_of_no_stream_is_read_strictly(edit: Any, reason: str) -> None:
    out = _packed(_genai_batch(), "r1")
    body = json.loads(out[1].value)
    edit(body)
    with pytest.raises(records.RecordError, match=reason):
        records.decode(json.dumps(body).encode())


def _override_batch() -> ValidatedBatch:
    from tests.otel_emit import Override

    items = [Evaluation("s0", 0), Override("s0", 1), Evaluation("s1", 0)]
    return validate_request(export_request(record_spans(items, seed=3)))


def test_overrides_travel_with_their_arrivals_in_version_6_records_and_only_there() -> None:
    batch = _override_batch()
    out = _packed(batch, "r1")
    assert [(r.key, r.record.schema_version) for r in out] == [(b"s0", 6), (b"s1", 4)]
    record = out[0].record
    assert isinstance(record, records.BatchRecord)
    assert record.overrides == batch.overrides
    assert [e.event_id for e in record.emissions] == ["evt_s0_0", batch.overrides[0].event_id]
    for packed in out:
        decoded = records.decode(packed.value)
        assert decoded == packed.record
        assert records.encode(decoded) == packed.value
    assert "overrides" not in json.loads(out[1].value)  # a version 4 reader reads it
    consumed = Consumed(TopicPartition("t", 0), 0, b"d", record=records.decode(out[0].value))
    assert consumed.recorded() is not None
    assert consumed.recorded().overrides == batch.overrides  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda r: r.update(schema_version=4), "overrides: not a field of schema_version 4"),
        (lambda r: r["overrides"][0].update(emission=None), "holds an override without ordinals"),
        (
            lambda r: r["overrides"][0].update(emission={"stream": "s9", "seq": 1, "final": False}),
            "record of stream 's0' holds",
        ),
        (lambda r: r["overrides"][0].update(run_mode="staging"), "run_mode"),
    ],
)
def test_a_record_with_overrides_is_read_strictly(edit: Any, reason: str) -> None:
    body = json.loads(_packed(_override_batch(), "r1")[0].value)
    edit(body)
    with pytest.raises(records.RecordError, match=reason):
        records.decode(json.dumps(body).encode())
