"""Version 7 records (a hot-path batch's rows) against version 4 (its models' JSON): on
the fuzz corpus of `test_fuzz`, the wire fixtures and the bench payload, the sink must
store exactly the same rows from the records a receiver writes of either version, by
its hot path (`ingest.sink.fast`) and by the reference (`schemas.records.decode`: the
version 4 record of the same rows); and a mangled version 7 record the reference
rejects, the hot path must never take. No store is needed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.contracts import ContractBook
from ingest.export.decode import parse_json, parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import pack, payload_limit, screen, screen_rows
from ingest.sink.batch import Consumed, items_rows, record_rows
from ingest.sink.fast import FastRecord, fast_record
from ingest.store.rows import TableRows
from schemas.records import (
    ROWS_VERSION,
    SCHEMA_VERSION,
    BatchRecord,
    RecordError,
    decode,
    encode,
)
from tests.ingest.export.test_fast import CORPUS
from tests.ingest.export.test_fuzz import MUTATIONS, Mutation, _base
from tests.ingest.sink.test_fast_records import TP, assert_same, assert_same_ownership, mutated
from tests.schemas.test_records import _batch, _packed

WIRE = Path(__file__).resolve().parents[2] / "testdata" / "wire"
AT = dt.datetime(2026, 11, 30, 14, 0, 0, 123456, tzinfo=dt.UTC)
TABLES = ("events", "dimensions", "receipts", "quarantine", "overrides")


def _rows_records(batch: FastBatch, limit: int) -> list[bytes] | None:
    screened = screen_rows(batch, limit)
    if screened is None:
        return None  # a unit too large: the receiver quarantines it on the models
    out = pack(screened, "r" * 32, AT, limit)
    assert all(not r.dead_letter for r in out)
    assert all(r.record.schema_version == ROWS_VERSION for r in out)
    assert all(len(r.value) <= payload_limit(limit) for r in out)  # each fits a message
    return [r.value for r in out]


def assert_unlayered_same(
    batch: FastBatch, request: Any, principal: Principal, book: Any, wire: bytes | None = None
) -> None:
    """What `serve --kafka` decodes for version 7 (`fast_batch(layers=False)`: no
    dimension rows laid out; `wire`: from the bytes it got) writes the same records,
    byte for byte, and lays out the same dimension rows when asked (`FastBatch.layer`)."""
    bare = fast_batch(request, principal=principal, contracts=book, layers=False, wire=wire)
    assert bare is not None and not bare.layers and not bare.dimensions
    assert len(bare.dimension_values) == len(batch.dimensions)
    for limit in (1_000_000, 4_000):
        assert _rows_records(bare, limit) == _rows_records(batch, limit)
    assert bare.events == batch.events and bare.receipts == batch.receipts
    bare.layer()
    assert bare.layers and bare.dimensions == batch.dimensions and not bare.dimension_values


def _model_records(
    request: Any, principal: Principal, contracts: Any, limit: int
) -> list[bytes] | None:
    """The version 4 records; None when one of its spans is too large for them (a
    version 7 unit, smaller, may still fit: not the same batch)."""
    batch = validate_request(request, principal=principal, contracts=contracts)
    out = pack(screen(batch, limit), "r" * 32, AT, limit)
    if any(r.dead_letter for r in out):
        return None
    return [r.value for r in out]


def _rows(records: list[Any]) -> TableRows:
    return items_rows([Consumed(TP, n, b"", record=r) for n, r in enumerate(records)])


def assert_same_rows(rows_values: list[bytes], model_values: list[bytes]) -> None:
    """The version 7 records of a request store what its version 4 records store, by
    either path, and decode to the same models (the events and emission records)."""
    fast = [fast_record(v) for v in rows_values]
    assert all(isinstance(f, FastRecord) for f in fast), "the hot path takes every record"
    reference = [decode(v) for v in rows_values]
    old = [decode(v) for v in model_values]
    assert all(isinstance(r, BatchRecord) for r in (*reference, *old))
    expected = _rows(old)
    for got in (_rows(fast), _rows(reference)):
        for table in TABLES:
            assert getattr(got, table) == getattr(expected, table), table
    assert sum(record_rows(f) for f in fast if f) == sum(record_rows(r) for r in old)  # type: ignore[arg-type]

    def models(records: list[Any]) -> tuple[Any, Any]:
        return (
            tuple(e for r in records for e in r.events),
            tuple(e for r in records for e in r.emissions),
        )

    assert models(reference) == models(old)
    for record, ref in zip(fast, reference, strict=True):
        assert record is not None and isinstance(ref, BatchRecord)
        assert record.model() == ref
        assert ref.schema_version == SCHEMA_VERSION  # the version 4 record of its rows
        # Encoded again (a refused record's letter), it is a version 4 record the hot
        # path takes, with the same rows.
        assert assert_same(encode(ref), written=False)
        mine = Consumed(TP, 0, b"", record=record).submission()
        other = Consumed(TP, 0, b"", record=ref).submission()
        assert mine is not None and other is not None
        assert mine.writer == other.writer and mine.received_at == other.received_at
        assert_same_ownership(mine, other)


taken: list[bool] = []
compared: list[int] = []


@CORPUS
@given(
    mutations=st.lists(MUTATIONS, min_size=0, max_size=4),
    contracts=st.booleans(),
    agents=st.booleans(),
    example=st.integers(0, 10_000),
)
def test_fuzz_corpus_rows_records_store_the_same_rows(
    mutations: list[Mutation], contracts: bool, agents: bool, example: int
) -> None:
    """Every request of `test_fuzz` the receiver's hot path takes: its version 7
    records against its version 4 records (under two message limits: one record per
    stream, and several)."""
    request, wire, principal, book = mutated(_base(example), example, mutations, contracts, agents)
    batch = fast_batch(request, principal=principal, contracts=book)
    taken.append(batch is not None)
    if batch is None:
        bare = fast_batch(request, principal=principal, contracts=book, layers=False, wire=wire)
        assert bare is None
        return  # the reference path: such a request is written as version 4 (5, 6)
    assert_unlayered_same(batch, request, principal, book, wire)
    for limit in (1_000_000, 4_000):
        values = _rows_records(batch, limit)
        old = _model_records(request, principal, book, limit)
        if values is not None and old is not None:
            assert_same_rows(values, old)
            compared.append(limit)


def test_the_fuzz_corpus_has_hot_path_requests() -> None:
    """Run after the property above (file order): it compared some records."""
    assert any(taken), len(taken)
    assert set(compared) == {1_000_000, 4_000}, compared


def _fixture_batches() -> list[tuple[Any, Principal, Any, bytes | None]]:
    """(request, principal, contracts, the protobuf bytes it was parsed from)."""
    out: list[tuple[Any, Principal, Any, bytes | None]] = [
        (parse_json(p.read_bytes()), ANONYMOUS, None, None) for p in sorted(WIRE.glob("*.json"))
    ]
    factory = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="sinkrows"))
    for number in (0, 1, 15):
        body = factory.body(number)
        request = parse_protobuf(body)
        out.append((request, ANONYMOUS, ContractBook(), body))
        out.append((request, Principal("acme", agents=frozenset({"billing-triage"})), None, body))
    return out


def test_the_wire_fixtures_and_the_bench_payload_store_the_same_rows() -> None:
    count = 0
    for request, principal, book, wire in _fixture_batches():
        batch = fast_batch(request, principal=principal, contracts=book)
        if batch is None:
            continue
        assert_unlayered_same(batch, request, principal, book, wire)
        for limit in (1_000_000, 4_000):
            values = _rows_records(batch, limit)
            old = _model_records(request, principal, book, limit)
            assert values is not None and old is not None
            assert_same_rows(values, old)
            count += 1
    assert count >= 6


def _bench_value() -> bytes:
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="rowsedge"))
    batch = fast_batch(parse_protobuf(factory.body(0)))
    assert batch is not None
    values = _rows_records(batch, 1_000_000)
    assert values is not None and len(values) == 1
    return values[0]


def _rewrite(value: bytes, change: Any) -> bytes:
    document = json.loads(value)
    change(document)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def assert_never_more(value: bytes) -> bool:
    """The hot path never takes a record the reference rejects, and where both take it
    they store the same rows. True when the hot path took it."""
    fast = fast_record(value)
    try:
        reference = decode(value)
    except RecordError:
        assert fast is None, "the hot path took a record the reference rejects"
        return False
    if fast is None:
        return False
    assert isinstance(reference, BatchRecord) and fast.model() == reference
    for table in TABLES:
        assert getattr(_rows([fast]), table) == getattr(_rows([reference]), table), table
    return True


def test_the_writers_record_takes_the_hot_path() -> None:
    assert assert_never_more(_bench_value())


def _event(d: dict[str, Any]) -> list[Any]:
    row: list[Any] = d["events"][0]
    return row


def _sentinel(d: dict[str, Any]) -> list[Any]:
    return next(r for r in d["emissions"] if r[1] == "sentinel")


@pytest.mark.parametrize(
    ("change", "rejected"),
    [
        (lambda d: d.update(extra=1), True),  # unknown field
        (lambda d: d.pop("contract_findings"), True),
        (lambda d: _event(d).append(1), True),  # a row of 29 values
        (lambda d: d["emissions"][0].pop(), True),
        (lambda d: _event(d).__setitem__(6, _event(d)[6] + 1), True),  # not whole µs
        (lambda d: _event(d).__setitem__(4, "prod"), True),  # run mode
        (lambda d: _event(d).__setitem__(0, ""), True),  # event id
        (lambda d: _event(d).__setitem__(25, "[]"), True),  # resource not an object
        (lambda d: _event(d).__setitem__(26, "{"), True),
        (lambda d: _event(d)[27].append(["x"]), True),  # a dimension row of 1 value
        (lambda d: d["emissions"][0].__setitem__(8, 5), True),  # counters on an evaluation's
        (lambda d: d.update(stream=""), True),
        (lambda d: d["events"].append(d["events"][0]), False),  # repeat: the models decide
        (lambda d: d.update(events=[_event(d)], emissions=[]), False),
        (lambda d: _event(d).__setitem__(21, "1"), False),  # lax: the models coerce
        (lambda d: _event(d).__setitem__(25, '{"b": 1, "a": 2}'), False),  # not as rows write
        (lambda d: _sentinel(d).__setitem__(12, "2026-11-30 14:00:00Z"), False),
        (lambda d: _event(d).__setitem__(6, -1000), False),  # before the epoch: the models
    ],
)
def test_records_the_hot_path_does_not_check_are_left_to_the_reference(
    change: Any, rejected: bool
) -> None:
    value = _rewrite(_bench_value(), change)
    assert fast_record(value) is None
    assert not assert_never_more(value)
    if rejected:
        with pytest.raises(RecordError):
            decode(value)


ODD = st.sampled_from(
    [
        None,
        "",
        "x",
        "prod",
        -1,
        0,
        1,
        1.5,
        2**63,
        True,
        False,
        [],
        {},
        ["a"],
        {"a": "b"},
        "{}",
        '{"a":1}',
        "[1]",
        "2026-11-30T14:00:00Z",
        float("inf"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(where=st.integers(0, 10_000), odd=ODD)
def test_any_value_replaced_never_makes_the_hot_path_take_more(where: int, odd: Any) -> None:
    """Any one value of the record (envelope, row or nested) replaced by an odd one."""
    assert_never_more(one_replaced(_bench_value(), where, odd))


def one_replaced(value: bytes, where: int, odd: Any) -> bytes:
    """The JSON record `value` with its `where`-th value (envelope, row, column or
    nested, counted depth first, modulo their number) replaced by `odd`."""
    document = json.loads(value)
    holders: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        keys = range(len(node)) if isinstance(node, list) else list(node)
        for key in keys:
            holders.append((node, key))
            if isinstance(node[key], list | dict):
                walk(node[key])

    walk(document)
    holder, key = holders[where % len(holders)]
    holder[key] = odd
    return json.dumps(document, separators=(",", ":"), allow_nan=True).encode()


def test_a_record_of_models_at_version_7_is_rejected() -> None:
    """Version 7 holds rows: a batch record of models (or a letter) of that version is
    refused with the reason, as any record of a version not as its version says."""
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="rowsedge"))
    batch = validate_request(parse_protobuf(factory.body(0)))
    value = pack(screen(batch, 1_000_000), "r" * 32, AT, 1_000_000)[0].value
    changed = _rewrite(value, lambda d: d.update(schema_version=ROWS_VERSION))
    with pytest.raises(RecordError, match="contract_findings"):
        decode(changed)
    assert fast_record(changed) is None


def test_a_quarantined_letter_at_version_7_is_rejected() -> None:
    letter = next(r.value for r in _packed(_batch(), "r1") if r.dead_letter)
    assert decode(letter).kind == "quarantined"
    changed = _rewrite(letter, lambda d: d.update(schema_version=ROWS_VERSION))
    with pytest.raises(RecordError, match="schema_version 7: a batch record of rows"):
        decode(changed)
