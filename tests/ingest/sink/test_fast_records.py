"""The sink's hot path (`ingest.sink.fast`) against the reference (`schemas.records.decode`
and the rows `TableRows.add` builds from its models), on the same records: those the
receiver packs from the fuzz corpus of `test_fuzz` (quarantined spans and all), the
wire fixture and the bench payload, and records written otherwise.

Wherever the hot path takes a record it must build exactly the reference's rows, give
the reference's models, and be judged the same by the ownership check; a record the
reference rejects it must never take. No store is needed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.contracts import ContractBook
from ingest.export.decode import parse_json, parse_protobuf
from ingest.export.fast import FastBatch
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import pack, screen
from ingest.sink.batch import Consumed, items_rows, record_rows
from ingest.sink.fast import FastRecord, fast_record
from ingest.store import owners
from ingest.store.owners import Owners, StreamOwner
from schemas.events import ValidatedBatch
from schemas.records import BatchRecord, RecordError, decode, encode
from tests.ingest.export.test_fast import CORPUS
from tests.ingest.export.test_fuzz import MUTATIONS, Mutation, _apply, _base

WIRE = Path(__file__).resolve().parents[2] / "testdata" / "wire"
AT = dt.datetime(2026, 11, 30, 14, 0, 0, 123456, tzinfo=dt.UTC)
TP = TopicPartition("records", 0)


def _records(batch: ValidatedBatch, limit: int = 1_000_000) -> list[bytes]:
    return [r.value for r in pack(screen(batch, limit), "r" * 32, AT, limit) if not r.dead_letter]


def assert_same(value: bytes, written: bool = True) -> bool:
    """True when the hot path took `value` (and built the reference's rows exactly).
    `written`: as a receiver writes it (the models encode to the same bytes)."""
    fast = fast_record(value)
    try:
        reference = decode(value)
    except RecordError:
        assert fast is None, "the hot path took a record the reference rejects"
        return False
    if fast is None:
        return False
    assert isinstance(reference, BatchRecord)
    assert fast.model() == reference
    assert encode(fast.model()) == value or not written
    ours, theirs = Consumed(TP, 0, b"", record=fast), Consumed(TP, 0, b"", record=reference)
    expected, got = items_rows([theirs]), items_rows([ours])
    for table in ("events", "dimensions", "receipts", "quarantine"):
        assert getattr(got, table) == getattr(expected, table), table
    assert record_rows(fast) == record_rows(reference)
    recorded = theirs.recorded()
    assert isinstance(fast.batch, FastBatch)
    assert fast.batch.materialize() == recorded
    mine, other = ours.submission(), theirs.submission()
    assert mine is not None and other is not None
    assert mine.writer == other.writer and mine.received_at == other.received_at
    assert_same_ownership(mine, other)
    return True


def assert_same_ownership(mine: owners.Submission, other: owners.Submission) -> None:
    """`decide` on the fast batch and on the models, against owners that let it be,
    own its stream, or own its first event: the same batch to store, the same claims."""
    batch = other.batch
    assert isinstance(batch, ValidatedBatch)
    tenant = batch.tenant_id
    states = [Owners()]
    streams = {e.stream for e in batch.emissions}
    if streams:
        stream = sorted(streams)[0]
        foreign = StreamOwner(any_agent=False, agents=frozenset({"nobody"}))
        states.append(Owners(streams={(tenant, stream): foreign}))
    if batch.events:
        states.append(Owners(events={(tenant, batch.events[0].event_id): "someone-else"}))
    for state in states:
        a, b = _copy(state), _copy(state)
        decided = owners.decide(a, mine)
        expected = owners.decide(b, other)
        got = decided.materialize() if isinstance(decided, FastBatch) else decided
        assert got == expected
        assert a.events == b.events and a.streams == b.streams
        assert a.event_claims == b.event_claims and a.stream_claims == b.stream_claims


def _copy(state: Owners) -> Owners:
    return Owners(events=dict(state.events), streams=dict(state.streams))


def mutated(
    request: Any, example: int, mutations: list[Mutation], contracts: bool, agents: bool
) -> tuple[Any, bytes, Principal, ContractBook | None]:
    """`request` with `test_fuzz`'s `mutations` applied, as a receiver parses it from
    its bytes (and those bytes); the principal and contracts the two flags choose."""
    spans = request.resource_spans[0].scope_spans[0].spans
    for mutation in mutations:
        _apply(example, spans[mutation.span], mutation, request)
    wire = request.SerializeToString()
    principal = Principal("acme", agents=frozenset({"agent-a", "agent-b"})) if agents else ANONYMOUS
    return parse_protobuf(wire), wire, principal, ContractBook() if contracts else None


taken: list[bool] = []


@CORPUS
@given(
    mutations=st.lists(MUTATIONS, min_size=0, max_size=4),
    contracts=st.booleans(),
    agents=st.booleans(),
    example=st.integers(0, 10_000),
)
def test_fuzz_corpus_records_match_the_reference(
    mutations: list[Mutation], contracts: bool, agents: bool, example: int
) -> None:
    """The receiver's records of every mutation of `test_fuzz` (and of none)."""
    request, _, principal, book = mutated(_base(example), example, mutations, contracts, agents)
    batch = validate_request(request, principal=principal, contracts=book)
    for limit in (1_000_000, 2_000):
        for value in _records(batch, limit):
            taken.append(assert_same(value))


def test_every_record_of_the_fuzz_corpus_takes_the_hot_path() -> None:
    """Run after the property above (file order): every batch record a receiver packs
    is one the hot path takes (what it leaves to the reference is tested below)."""
    assert taken, "run with the property test above"
    assert all(taken), (sum(taken), len(taken))


def test_the_wire_fixture_and_the_bench_payload_take_the_hot_path() -> None:
    batches = [validate_request(parse_json(p.read_bytes())) for p in sorted(WIRE.glob("*.json"))]
    factory = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="sinkfast"))
    for number in (0, 1, 15):
        request = parse_protobuf(factory.body(number))
        batches.append(validate_request(request, contracts=ContractBook()))
        agents = frozenset({"billing-triage"})
        batches.append(validate_request(request, principal=Principal("acme", agents=agents)))
    values = [value for batch in batches for value in _records(batch)]
    assert values
    for value in values:
        assert assert_same(value)


def _bench_record() -> bytes:
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="sinkedge"))
    return _records(validate_request(parse_protobuf(factory.body(0))))[0]


def _rewrite(value: bytes, change: object) -> bytes:
    document = json.loads(value)
    change(document)  # type: ignore[operator]
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(extra=1),  # unknown field: the reference rejects it
        lambda d: d["events"][0].update(extra=1),
        lambda d: d["events"][0]["emission"].update(seq="1"),  # lax: the reference coerces
        lambda d: d["events"][0]["outcome"].update(tokens_input=1.0),
        lambda d: d["events"][0].update(timestamp="2026-11-30 14:00:00Z"),
        lambda d: d["events"][0].update(run_mode="prod"),
        lambda d: d["events"][0].update(contract_version_id="cv_1"),
        lambda d: d["events"][0].update(event_id=""),
        lambda d: d["emissions"][0].update(stream="elsewhere"),
        lambda d: d.update(schema_version=3),
        lambda d: d["events"].append(d["events"][0]),  # an event id twice
        lambda d: d.update(events=[d["events"][0]], emissions=[]),
    ],
)
def test_records_it_does_not_check_are_left_to_the_reference(change: object) -> None:
    value = _rewrite(_bench_record(), change)
    assert fast_record(value) is None
    assert not assert_same(value, written=False)  # the reference decides alone


def test_a_record_not_as_our_writers_write_it_is_left_to_the_reference() -> None:
    """The same record with spaces, or its keys in another order: the reference reads
    it, the hot path leaves it to the reference."""
    value = _bench_record()
    assert isinstance(fast_record(value), FastRecord)
    spaced = json.dumps(json.loads(value)).encode()
    document = json.loads(value)
    reordered = json.dumps(dict(reversed(list(document.items())))).encode()
    for other in (spaced, reordered):
        assert fast_record(other) is None
        assert not assert_same(other, written=False)
    assert isinstance(decode(spaced), BatchRecord)


def test_a_repeated_key_keeps_its_last_value_on_both_paths() -> None:
    """As the models' own parse: the earlier value is ignored, even one they would reject."""
    value = _bench_record()
    stream = json.loads(value)["stream"]
    for earlier in (b'"elsewhere"', b"1"):
        doubled = value.replace(b'"stream":', b'"stream":' + earlier + b',"stream":', 1)
        assert doubled != value
        assert assert_same(doubled, written=False)
        record = fast_record(doubled)
        assert record is not None and record.model().stream == stream


def test_a_genai_request_s_version_5_record_is_left_to_the_models() -> None:
    """A request with holonograph spans and GenAI evaluations packs a version 4 record
    (the hot path takes it, with the reference's rows) and a version 5 record of events
    without ordinals, which only the models decode; one relabelled version 4 is not
    taken either (its stream is empty and its events have no emission)."""
    from tests.schemas.test_records import _genai_batch

    values = _records(_genai_batch())
    versions = [json.loads(v)["schema_version"] for v in values]
    assert versions == [4, 5]
    assert assert_same(values[0])
    assert fast_record(values[1]) is None
    decoded = decode(values[1])
    assert isinstance(decoded, BatchRecord) and decoded.schema_version == 5
    assert [e.emission for e in decoded.events] == [None, None]
    relabelled = values[1].replace(b'{"schema_version":5,', b'{"schema_version":4,', 1)
    assert relabelled != values[1]
    assert fast_record(relabelled) is None


def test_times_parsed_once_per_text_keep_each_row_s_own_time() -> None:
    """The hot path parses each distinct time text of a record once: an arrival whose
    time differs from its event's, and two events of one time text, still get the
    reference's rows; a time that is not text is left to the reference."""
    value = _bench_record()
    document = json.loads(value)
    first, second = document["events"][0], document["events"][1]

    def later_arrival(d: dict) -> None:  # type: ignore[type-arg]
        d["emissions"][0]["event_time"] = "2026-11-30T14:00:01.5Z"

    def one_time(d: dict) -> None:  # type: ignore[type-arg]
        d["events"][1]["timestamp"] = first["timestamp"]

    assert first["timestamp"] != second["timestamp"] or first["timestamp"]
    for change in (later_arrival, one_time):
        changed = _rewrite(value, change)
        assert changed != value
        assert isinstance(fast_record(changed), FastRecord)
        assert assert_same(changed, written=False)

    def listed_time(d: dict) -> None:  # type: ignore[type-arg]
        d["emissions"][0]["event_time"] = [first["timestamp"]]

    unhashable = _rewrite(value, listed_time)
    assert fast_record(unhashable) is None
    assert not assert_same(unhashable, written=False)
