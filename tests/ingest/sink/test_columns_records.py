"""Version 8 records (a hot-path batch's rows as columns) against versions 7 and 4: on
the fuzz corpus of `test_fuzz`, the wire fixtures and the bench payload, the sink must
store exactly the same rows from a request's version 8 record as from its version 4
records (and its version 7 ones), by its hot path (`ingest.sink.fast`) and by the
reference (`schemas.records.decode`, through `rows_of_columns`); a mangled version 8
record the reference rejects, the hot path must never take. No store is needed."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import ANONYMOUS
from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import pack, payload_limit, screen, screen_columns
from ingest.sink.fast import fast_record
from schemas.records import COLUMNS_VERSION, EVENT_ROW, RecordError, decode
from tests.ingest.export.test_fast import CORPUS
from tests.ingest.export.test_fuzz import MUTATIONS, SPANS, Mutation
from tests.ingest.sink.test_fast_records import _bench_record, mutated
from tests.ingest.sink.test_rows_records import (
    AT,
    ODD,
    TABLES,
    _fixture_batches,
    _model_records,
    _rows,
    _rows_records,
    assert_never_more,
    assert_same_rows,
    one_replaced,
)
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans
from tests.schemas.test_records import _batch, _packed

LIMIT = 1_000_000


def _columns_records(batch: FastBatch, limit: int = LIMIT) -> list[bytes] | None:
    """The version 8 record of `batch`; None when the receiver writes version 7 for it
    (rows of several streams, or more than one record holds)."""
    screened = screen_columns(batch, limit)
    if screened is None:
        return None
    out = pack(screened, "r" * 32, AT, limit)
    assert len(out) == 1 and not out[0].dead_letter
    assert out[0].record.schema_version == COLUMNS_VERSION
    assert len(out[0].value) <= payload_limit(limit)
    return [out[0].value]


def assert_same_as_rows(batch: FastBatch, values: list[bytes]) -> None:
    """The version 8 record stores, by either path, the rows of the batch's version 7
    records, and the reference decodes both to the same version 4 record."""
    rows = _rows_records(batch, LIMIT)
    assert rows is not None and len(rows) == 1
    fast, reference = fast_record(values[0]), fast_record(rows[0])
    assert fast is not None and reference is not None
    for table in TABLES:
        assert getattr(_rows([fast]), table) == getattr(_rows([reference]), table), table
        assert getattr(_rows([decode(values[0])]), table) == getattr(_rows([fast]), table)
    assert decode(values[0]) == decode(rows[0])


def _one_stream(example: int) -> Any:
    """`test_fuzz`'s valid spans on one stream (seqs 0 to 4): what version 8 holds."""
    items: list[Evaluation | Sentinel] = []
    for i in range(SPANS):
        if i % 3 == 2:
            items.append(Sentinel(f"fz{example}", i, counters={"offered": 1}))
        else:
            dims = [Dim("correctness", passed=True)] + [Dim("tone", score=0.5)] * (i % 2)
            items.append(Evaluation(f"fz{example}", i, dims=dims))
    return export_request(record_spans(items, seed=example, resource={"fz.example": example}))


taken: list[bool] = []


@CORPUS
@given(
    mutations=st.lists(MUTATIONS, min_size=0, max_size=4),
    contracts=st.booleans(),
    agents=st.booleans(),
    example=st.integers(0, 10_000),
)
def test_fuzz_corpus_columns_records_store_the_same_rows(
    mutations: list[Mutation], contracts: bool, agents: bool, example: int
) -> None:
    """Every request of `test_fuzz`'s mutations of one stream's spans the hot path
    takes, as `serve --kafka` decodes it (no dimension rows laid out, from the wire)
    and with the rows laid out: its version 8 record against its version 4 and 7
    records."""
    request, wire, principal, book = mutated(
        _one_stream(example), example, mutations, contracts, agents
    )
    batch = fast_batch(request, principal=principal, contracts=book)
    if batch is None:
        return
    bare = fast_batch(request, principal=principal, contracts=book, layers=False, wire=wire)
    assert bare is not None
    values = _columns_records(batch)
    assert _columns_records(bare) == values  # laid out or not: the same record
    taken.append(values is not None)
    if values is None:
        return
    assert_same_as_rows(batch, values)
    old = _model_records(request, principal, book, LIMIT)
    if old is not None:
        assert_same_rows(values, old)


def test_the_fuzz_corpus_has_columns_records() -> None:
    """Run after the property above (file order): it compared some records."""
    assert any(taken), len(taken)


def test_the_wire_fixtures_and_the_bench_payload_store_the_same_rows() -> None:
    count = 0
    for request, principal, book, wire in _fixture_batches():
        batch = fast_batch(request, principal=principal, contracts=book)
        if batch is None:
            continue
        values = _columns_records(batch)
        bare = fast_batch(request, principal=principal, contracts=book, layers=False, wire=wire)
        assert bare is not None and _columns_records(bare) == values
        if values is None:
            continue
        assert_same_as_rows(batch, values)
        old = _model_records(request, principal, book, LIMIT)
        assert old is not None
        assert_same_rows(values, old)
        count += 1
    assert count >= 6


def test_rows_too_large_for_one_record_are_not_columns() -> None:
    factory = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="colsedge"))
    batch = fast_batch(parse_protobuf(factory.body(0)))
    assert batch is not None
    assert _columns_records(batch, LIMIT) is not None
    assert _columns_records(batch, 4_000) is None  # the receiver writes version 7 records


def _bench_value() -> bytes:
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="colsedge"))
    batch = fast_batch(parse_protobuf(factory.body(0)))
    assert batch is not None
    values = _columns_records(batch)
    assert values is not None
    return values[0]


def _rewrite(value: bytes, change: Any) -> bytes:
    document = json.loads(value)
    change(document)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def test_the_writers_record_takes_the_hot_path_with_constant_columns_once() -> None:
    value = _bench_value()
    assert assert_never_more(value)
    document = json.loads(value)
    events = document["events"]
    assert events["rows"] == 2 and len(events["columns"]) == len(EVENT_ROW)
    widths = [len(c) for c in events["columns"]]
    assert 1 in widths and 2 in widths  # the resource once, the event ids each


def _column(d: dict[str, Any], table: str, n: int) -> list[Any]:
    column: list[Any] = d[table]["columns"][n]
    return column


@pytest.mark.parametrize(
    ("change", "rejected"),
    [
        (lambda d: d.update(extra=1), True),  # unknown field
        (lambda d: d.pop("dimensions"), True),
        (lambda d: d["events"].update(rows=3), True),  # a column of 2 values for 3 rows
        (lambda d: d["events"].update(rows=0), True),
        (lambda d: d["events"]["columns"].pop(), True),  # 27 columns
        (lambda d: d["emissions"]["columns"].append([None]), True),
        (lambda d: _column(d, "events", 0).append("x"), True),  # 3 event ids for 2 rows
        (lambda d: _column(d, "events", 0).pop(), False),  # one for both: a repeat
        (lambda d: _column(d, "events", 27).__setitem__(0, 3), True),  # counts' sum
        (lambda d: _column(d, "events", 27).__setitem__(0, -1), True),
        (lambda d: d["dimensions"].update(rows=d["dimensions"]["rows"] + 1), True),
        (lambda d: d.update(events=[]), True),  # version 7's rows
        (lambda d: d.update(events={"columns": [], "rows": 0}), True),  # keys' order
        (lambda d: _column(d, "events", 3).__setitem__(0, "corr"), False),  # kept: 2 values
        (lambda d: _column(d, "events", 0).__setitem__(1, _column(d, "events", 0)[0]), False),
        (lambda d: _column(d, "events", 20).__setitem__(0, "1"), False),  # lax: the models
    ],
)
def test_records_the_hot_path_does_not_check_are_left_to_the_reference(
    change: Any, rejected: bool
) -> None:
    value = _rewrite(_bench_value(), change)
    assert_never_more(value)
    if rejected:
        assert fast_record(value) is None
        with pytest.raises(RecordError):
            decode(value)


def test_a_kind_given_twice_is_read_as_the_reference_reads_it() -> None:
    value = _bench_value()
    changed = value[:-1] + b',"kind":"poison"}'
    assert fast_record(changed) is None
    with pytest.raises(RecordError):
        decode(changed)


@settings(max_examples=300, deadline=None)
@given(where=st.integers(0, 10_000), odd=ODD)
def test_any_value_replaced_never_makes_the_hot_path_take_more(where: int, odd: Any) -> None:
    """Any one value of the record (envelope, table, column or value) replaced by an
    odd one."""
    assert_never_more(one_replaced(_bench_value(), where, odd))


def test_a_record_of_models_or_a_letter_at_version_8_is_rejected() -> None:
    """Version 8 holds columns: a batch record of models (or a letter) of that version is
    refused with the reason."""
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="colsedge"))
    batch = validate_request(parse_protobuf(factory.body(0)))
    value = pack(screen(batch, LIMIT), "r" * 32, AT, LIMIT)[0].value
    changed = _rewrite(value, lambda d: d.update(schema_version=COLUMNS_VERSION))
    with pytest.raises(RecordError, match="contract_findings: Field required"):
        decode(changed)
    assert fast_record(changed) is None
    letter = next(r.value for r in _packed(_batch(), "r1") if r.dead_letter)
    changed = _rewrite(letter, lambda d: d.update(schema_version=COLUMNS_VERSION))
    with pytest.raises(RecordError, match="schema_version 8: a batch record of rows"):
        decode(changed)


def test_a_request_of_sentinels_only_stores_the_same_rows() -> None:
    """No events: an events table of no rows (every column empty)."""
    items = [Sentinel("fzs", i, counters={"offered": i + 1}) for i in range(3)]
    request = parse_protobuf(export_request(record_spans(items, seed=3)).SerializeToString())
    batch = fast_batch(request)
    assert batch is not None and not batch.events and len(batch.receipts) == 3
    values = _columns_records(batch)
    assert values is not None
    assert json.loads(values[0])["events"] == {"rows": 0, "columns": [[]] * len(EVENT_ROW)}
    assert_same_as_rows(batch, values)
    old = _model_records(request, ANONYMOUS, None, LIMIT)
    assert old is not None
    assert_same_rows(values, old)


def test_a_taken_record_and_its_rows_are_freed_without_the_garbage_collector() -> None:
    """A record's rows go as soon as the sink drops the record (after its commit), not
    at the next full pass of the collector, which the services make rare
    (`ingest.service.gctune`): nothing of a taken record of version 4, 7 or 8 is left
    in a reference cycle, and its batch still gives the record's models."""
    factory = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="cyclefre"))
    batch = fast_batch(parse_protobuf(factory.body(0)))
    assert batch is not None
    columns, rows = _columns_records(batch), _rows_records(batch, LIMIT)
    assert columns is not None and rows is not None and len(rows) == 1
    for value in (_bench_record(), rows[0], columns[0]):
        record = fast_record(value)
        assert record is not None
        assert record.batch.materialize() == record.models()
        gc.collect()
        gc.disable()
        try:
            record = fast_record(value)
            assert record is not None and record.rows > 0
            del record
            assert gc.collect() == 0
        finally:
            gc.enable()
