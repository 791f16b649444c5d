"""The hot path (`ingest.export.fast`) against the reference (`validate_request` + the
rows `TableRows.add` builds from its models), on the same requests: the fuzz corpus
of `test_fuzz`, the wire fixture, the bench payload and hand-picked edges.

Wherever the hot path takes a request it must build exactly the reference's rows and
answer the same counts; where the reference rejects anything the hot path must not
take the request at all. No store is needed: the rows are compared as values. Each
test runs for both forms of the wire reader (`wire_form`: pure, and compiled where
built)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from bench.payload import PayloadSpec, RequestFactory
from ingest.export import flat
from ingest.export.contracts import ContractBook
from ingest.export.decode import parse_json, parse_protobuf, to_any_value
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.handler import _outcome
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import _EMISSION_JSON, _EVENT_JSON, pack, screen, screen_fast
from ingest.store.rows import TableRows
from schemas.events import ValidatedBatch
from tests.ingest.export.test_fuzz import MUTATIONS, SPANS, Mutation, _apply, _base
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = pytest.mark.usefixtures("wire_form")

WIRE = Path(__file__).resolve().parents[2] / "testdata" / "wire"
AT = dt.datetime(2026, 11, 30, 14, 0, 0, 123456, tzinfo=dt.UTC)


def reference_rows(batch: Any, receipt: str = "r" * 32, order: int = 2) -> TableRows:
    rows = TableRows()
    rows.add(batch, receipt, AT, order)
    return rows


def fast_rows(batch: FastBatch, receipt: str = "r" * 32, order: int = 2) -> TableRows:
    rows = TableRows()
    batch.add_to(rows, receipt, AT, order)
    return rows


def assert_same(
    request: PB2ExportTraceServiceRequest,
    principal: Principal = ANONYMOUS,
    contracts: ContractBook | None = None,
    wire: bytes | None = None,
) -> bool:
    """True when the hot path took `request` (and built the reference's rows exactly).
    `wire`: the bytes it was parsed from, which the hot path reads as they are."""
    reference = validate_request(request, principal=principal, contracts=contracts)
    fast = fast_batch(request, principal, contracts)
    if fast is None:
        assert wire is None or fast_batch(request, principal, contracts, wire=wire) is None
        return False
    assert reference.quarantined == (), "the hot path took a request the reference rejects"
    assert reference.collapsed_spans == 0
    expected, got = reference_rows(reference), fast_rows(fast)
    shared = TableRows()
    fast.add_shared(shared, "r" * 32, AT, 2)  # as the log's commit adds it
    for table in ("events", "dimensions", "receipts", "quarantine"):
        assert getattr(got, table) == getattr(expected, table), table
        assert getattr(shared.expanded(), table) == getattr(expected, table), table
        if table in ("events", "dimensions") and getattr(expected, table):
            columns = [list(c) for c in zip(*getattr(expected, table), strict=True)]
            assert [list(c) for c in shared.table_columns(table)] == columns, table
    # Decoded without the dimension rows laid out (`serve --kafka`, version 7): a commit
    # lays them out, the same rows.
    if wire is not None:  # as the receiver decodes it: from the bytes it got
        assert fast_rows(fast_batch(request, principal, contracts, wire=wire)).events == got.events  # type: ignore[arg-type]
    for add in ("add_to", "add_shared"):
        bare = fast_batch(request, principal, contracts, layers=False, wire=wire)
        assert bare is not None and not bare.dimensions
        rows = TableRows()
        getattr(bare, add)(rows, "r" * 32, AT, 2)
        for table in ("events", "dimensions", "receipts"):
            assert getattr(rows.expanded(), table) == getattr(expected, table), (add, table)
    assert _outcome(fast) == _outcome(reference)
    assert fast.rows == len(reference.events) + len(reference.emissions)
    assert fast.materialize() == reference
    assert_same_records(request, reference, principal, contracts)
    return True


def assert_same_records(
    request: PB2ExportTraceServiceRequest,
    reference: ValidatedBatch,
    principal: Principal,
    contracts: ContractBook | None,
) -> None:
    """The Kafka form: the models' JSON, and the records packed from it, byte for byte."""
    fast = fast_batch(request, principal, contracts, with_json=True)
    assert fast is not None
    assert fast.event_json == [_EVENT_JSON(e) for e in reference.events]
    assert fast.receipt_json == [_EMISSION_JSON(e) for e in reference.emissions]
    for limit in (1_000_000, 2_000):  # one record per stream; and many small ones
        screened = screen_fast(fast, limit)
        expected = pack(screen(reference, limit), "r" * 32, AT, limit)
        if screened is None:  # something too large to travel: left to the models
            assert screen(reference, limit).batch.quarantined
            continue
        got = pack(screened, "r" * 32, AT, limit)
        assert [(r.key, r.value, r.dead_letter) for r in got] == [
            (r.key, r.value, r.dead_letter) for r in expected
        ]


taken: list[bool] = []
# The fuzz corpus's settings (the sink's records test runs the same examples).
CORPUS = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@CORPUS
@given(
    mutations=st.lists(MUTATIONS, min_size=0, max_size=4),
    contracts=st.booleans(),
    example=st.integers(0, 10_000),
)
def test_fuzz_corpus_rows_match_the_reference(
    mutations: list[Mutation], contracts: bool, example: int
) -> None:
    """The mutations of `test_fuzz` (and none): every request the hot path takes gets
    the reference's rows; every one the reference rejects a span of is left to it."""
    request = _base(example)
    spans = request.resource_spans[0].scope_spans[0].spans
    for mutation in mutations:
        _apply(example, spans[mutation.span], mutation, request)
    wire = request.SerializeToString()
    request = parse_protobuf(wire)  # as the receiver reads it
    taken.append(assert_same(request, contracts=ContractBook() if contracts else None, wire=wire))


def test_the_fuzz_corpus_exercised_both_paths() -> None:
    """Run after the property above (file order): neither path went untested."""
    assert taken, "run with the property test above"
    assert any(taken) and not all(taken), (sum(taken), len(taken))


VALUES = st.one_of(
    st.text(max_size=8), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
    st.booleans(), st.lists(st.text(max_size=4), max_size=3),
)  # fmt: skip
OPTIONAL = [
    "holonograph.agent.id", "holonograph.correlation.id", "holonograph.provenance",
    "holonograph.lens.version", "holonograph.light_source.id",
    "holonograph.light_source.requested", "holonograph.cohort_tags",
    "holonograph.multiplex.role", "holonograph.fixture.id", "holonograph.latency_ms",
    "holonograph.cost.usd", "holonograph.tokens.input", "holonograph.tokens.output",
    "holonograph.sdk.name", "holonograph.sdk.version", "holonograph.timestamp",
    "holonograph.substrate.prompt_hash", "holonograph.marker.user_message",
    "holonograph.custom.thing", "other.attribute", "holonograph.emission.final",
    "holonograph.runmode", "holonograph.correlation-id",
]  # fmt: skip
GOOD = {
    "holonograph.provenance": st.sampled_from(["production-state", "exploratory-state", ""]),
    "holonograph.timestamp": st.sampled_from(
        ["2026-11-30T14:00:00Z", "2026-11-30T15:00:00.5+01:00", 1_796_046_238_000_123_456]
    ),
    "holonograph.latency_ms": st.one_of(st.floats(0, 1e6), st.integers(0, 10**6)),
    "holonograph.cohort_tags": st.one_of(
        st.text(max_size=8), st.lists(st.sampled_from(["a=b", "tier", "x=y=z"]), max_size=3)
    ),
    "holonograph.tokens.input": st.integers(0, 2**63 - 1),
    "holonograph.emission.final": st.booleans(),
}


@st.composite
def evaluation(draw: st.DrawFn, stream: str, seq: int) -> Evaluation:
    extra: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(OPTIONAL), max_size=8, unique=True)):
        strategy = GOOD.get(key, st.text(max_size=8)) if draw(st.booleans()) else VALUES
        extra[key] = draw(strategy)
    dims = [
        Dim(
            f"d{n}",
            passed=draw(st.one_of(st.none(), st.booleans())),
            score=draw(st.one_of(st.none(), st.floats(0, 1))),
            expected=draw(st.one_of(st.none(), st.text(max_size=10))),
            judge=draw(st.one_of(st.none(), st.just("judge/v1"))),
        )
        for n in range(draw(st.integers(0, 3)))
    ]
    return Evaluation(
        stream,
        seq,
        run_mode=draw(st.sampled_from(["production", "eval", "replay", "test", "local_dev"])),
        event_id=draw(st.one_of(st.none(), st.just(f"evt-{stream}-{seq}"))),
        dims=dims,
        extra=extra,
    )


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(data=st.data(), spans=st.integers(1, 6), other=st.integers(0, 2))
def test_sdk_spans_rows_match_the_reference(data: st.DataObject, spans: int, other: int) -> None:
    """Spans an SDK builds, with any mix of the optional attributes (valid or not)."""
    items: list[Evaluation | Sentinel] = []
    for n in range(spans):
        if data.draw(st.integers(0, 3)) == 0:
            counters = {"offered": data.draw(st.integers(0, 9)), "dropped": 0}
            items.append(Sentinel(f"s{n}", n, counters=counters))
        else:
            items.append(data.draw(evaluation(f"s{n}", n)))
    request = export_request(record_spans(items, seed=spans, other_spans=other))
    assert_same(request, contracts=ContractBook())


def test_the_wire_fixture_takes_the_hot_path() -> None:
    for path in sorted(WIRE.glob("*.otlp.json")):
        request = parse_json(path.read_bytes())
        assert assert_same(request), path.name
        assert assert_same(request, contracts=ContractBook()), path.name


@pytest.mark.parametrize("batch", [1, 64, 512])
def test_bench_payload_takes_the_hot_path(batch: int) -> None:
    factory = RequestFactory(PayloadSpec(batch=batch, sentinel_every=16, tag="fastpath"))
    for number in (0, 1, 15, 16):
        request = parse_protobuf(factory.body(number))
        assert assert_same(request, contracts=ContractBook())
        assert assert_same(request, Principal("acme", agents=frozenset({"billing-triage"})))


def _request(*items: Evaluation | Sentinel) -> PB2ExportTraceServiceRequest:
    return export_request(record_spans(list(items), seed=3))


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([Evaluation("a", 0, event_id="e1"), Evaluation("a", 1, event_id="e1")],
                     id="event-id-twice"),
        pytest.param([Evaluation("a", 0, event_id="e1"), Evaluation("a", 0, event_id="e2")],
                     id="ordinal-twice"),
        pytest.param([Evaluation("a", 0, run_mode=None)], id="no-run-mode"),
        pytest.param([Evaluation("a", 0, dims=[Dim("x")])], id="ungraded-dimension"),
        pytest.param([Evaluation("a", 0, extra={"holonograph.latency_ms": "fast"})],
                     id="wrong-type"),
        # The string attributes read in one pass, the tokens and dimensions checked inline.
        pytest.param([Evaluation("a", 0, extra={"holonograph.sdk.name": 3})],
                     id="text-not-a-string"),
        pytest.param([Evaluation("a", 0, extra={"holonograph.fixture.id": ["f"]})],
                     id="text-a-list"),
        pytest.param([Evaluation("a", 0, extra={"holonograph.tokens.output": 2.5})],
                     id="tokens-not-integer"),
        pytest.param([Evaluation("a", 0, dims=[Dim("x", passed=True, judge=7)])],  # type: ignore[arg-type]
                     id="judge-not-a-string"),
        pytest.param([Evaluation("a", 0, dims=[Dim("x", score=float("nan"))])],
                     id="score-not-finite"),
    ],
)  # fmt: skip
def test_what_the_reference_must_judge_is_left_to_it(items: list[Evaluation]) -> None:
    request = _request(*items)
    assert fast_batch(request) is None
    assert not assert_same(request)


@pytest.mark.parametrize(
    ("run_mode", "extra", "hot"),
    [
        pytest.param(None, {"holonograph.runmode": "eval"}, True, id="run-mode-as-baggage"),
        pytest.param("eval", {"holonograph.runmode": "eval"}, True, id="run-mode-twice-agreeing"),
        pytest.param("test", {"holonograph.correlation-id": "call-7"}, True,
                     id="correlation-as-baggage"),
        pytest.param("test", {"holonograph.correlation-id": "c", "holonograph.correlation.id": "c"},
                     True, id="correlation-twice-agreeing"),
        pytest.param("production", {"holonograph.runmode": "eval"}, False, id="two-run-modes"),
        pytest.param("test", {"holonograph.correlation-id": "a", "holonograph.correlation.id": "b"},
                     False, id="two-correlation-ids"),
        pytest.param("test", {"holonograph.correlation-id": 12}, False, id="baggage-wrong-type"),
        pytest.param(None, {"holonograph.runmode": "staging"}, False, id="baggage-unknown-mode"),
    ],
)  # fmt: skip
def test_the_baggage_spellings_are_read_as_the_reference_reads_them(
    run_mode: str | None, extra: dict[str, Any], hot: bool
) -> None:
    """The Guide's baggage keys: the hot path reads them as the span attributes they
    spell (the reference's rows), and leaves two that differ to the reference."""
    request = _request(Evaluation("a", 0, run_mode=run_mode, extra=extra))
    assert assert_same(request) is hot
    assert bool(validate_request(request).quarantined) is not hot


def test_an_agent_the_token_may_not_write_is_left_to_the_reference() -> None:
    request = _request(Evaluation("a", 0, extra={"holonograph.agent.id": "other"}))
    principal = Principal("acme", agents=frozenset({"mine"}))
    assert fast_batch(request, principal) is None
    assert validate_request(request, principal=principal).quarantined


def test_a_governed_agent_is_left_to_the_reference() -> None:
    from schemas.contracts import Contract, ContractVersion

    contract = Contract.model_validate(
        {"agentId": "billing", "surfaces": [{"id": "classify-intent", "dimensions": []}]}
    )
    version = ContractVersion(
        tenant_id="default", version_id="cv1", previous_version_id=None,
        registered_at=AT, contract=contract,
    )  # fmt: skip
    book = ContractBook([version])
    governed = _request(Evaluation("a", 0, extra={"holonograph.agent.id": "billing"}))
    other = _request(Evaluation("a", 0, extra={"holonograph.agent.id": "someone"}))
    assert fast_batch(governed, contracts=book) is None
    assert assert_same(other, contracts=book)


def test_rows_carry_the_commit_columns_given_at_commit() -> None:
    """Receipt id, receipt time and version are filled per commit, on copies."""
    batch = fast_batch(_request(Evaluation("a", 0), Sentinel("a", 1)))
    assert batch is not None
    first, second = fast_rows(batch, "one", 0), fast_rows(batch, "two", 5)
    assert [r[3] for r in first.receipts] == ["one", "one"]
    assert [r[3] for r in second.receipts] == ["two", "two"]
    assert second.events[0][31] == first.events[0][31] + 5
    assert json.loads(first.events[0][28])["service.name"] == "billing-triage-agent"
    assert SPANS == 5  # the corpus shape this file relies on


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(data=st.data(), spans=st.integers(1, 4), form=st.sampled_from(["events", "spans"]))
def test_a_genai_evaluation_anywhere_in_a_request_takes_the_reference_path(
    data: st.DataObject, spans: int, form: str
) -> None:
    """A `gen_ai.evaluation.result` on any span (or a span of that name) is never
    stored by the hot path, which would ignore it: the request takes the reference,
    which stores the same rows for its holonograph spans as the hot path does alone,
    and the GenAI event besides."""
    from tests.genai_emit import Call, Eval, genai_contract, record_calls
    from tests.ingest.export.test_genai import book_of

    book = book_of(genai_contract())
    items = [Evaluation(f"s{n}", n, surface="summarize") for n in range(spans)]
    holonograph = record_spans(items, seed=spans)
    genai = record_calls([Call([Eval("relevance", score=data.draw(st.floats(0, 5)))])], form=form)
    at = data.draw(st.integers(0, len(holonograph)))
    request = export_request([*holonograph[:at], *genai, *holonograph[at:]])
    assert fast_batch(request, contracts=book) is None
    reference = validate_request(request, contracts=book)
    assert reference.quarantined == ()
    mapped = [e for e in reference.events if e.emission is None]
    assert [len(e.outcome.dimensions) for e in mapped] == [1]
    alone = fast_batch(export_request(holonograph), contracts=book)
    assert alone is not None
    own = reference.model_copy(
        update={"events": tuple(e for e in reference.events if e.emission is not None)}
    )
    expected, got = reference_rows(own), fast_rows(alone)
    for table in ("events", "dimensions", "receipts"):
        assert getattr(got, table) == getattr(expected, table), table


def test_several_substrate_columns_markers_and_extras_keep_the_span_order() -> None:
    """The flat reader's map has no order: a span with several attributes whose order
    the rows keep is read in order (the Map columns and the Kafka JSON alike)."""
    names = [f"c{n}" for n in range(8, 0, -1)]  # eight: a map's order is not theirs by chance
    extra: dict[str, Any] = {f"holonograph.substrate.{name}": name for name in names}
    extra |= {f"holonograph.marker.{name}": [name] for name in names}
    extra |= {f"holonograph.custom.{name}": name for name in names}
    request = export_request(record_spans([Evaluation("s", 0, extra=extra)], seed=1))
    request = parse_protobuf(request.SerializeToString())
    assert assert_same(request)
    fast = fast_batch(request)
    assert fast is not None
    event = fast_rows(fast).events[0]
    assert list(event[11]) == names
    assert list(event[15]) == names


def _field(number: int, body: bytes) -> bytes:
    return bytes([number << 3 | 2]) + bytes(_VarintBytes(len(body))) + body


taken_twice: list[bool] = []


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize(
    "extra",
    [
        to_any_value(["zz"]),
        to_any_value("other"),
        to_any_value(7),
        AnyValue(),
        None,  # the attribute's own value again
    ],
)
def test_a_value_sent_twice_in_the_wire_bytes_gives_the_reference_rows(
    first: bool, extra: Any
) -> None:
    """Bytes no OTLP client writes: one attribute of each span (and every array) with
    its `value` sent twice (another before or after its own; or its own again: the
    OTLP parse appends two arrays). Read from those bytes, the hot path builds the rows
    it builds from the parsed request (and both are the reference's)."""
    factory = RequestFactory(PayloadSpec(batch=8, tag="twicewir"))
    request = parse_protobuf(factory.body(0))
    resource_spans = request.resource_spans[0]
    scope_spans = resource_spans.scope_spans[0]
    spans = b""
    for n, span in enumerate(scope_spans.spans):
        pairs = list(span.attributes)
        doubled = pairs[n % len(pairs)]
        body = type(span)()
        body.CopyFrom(span)
        del body.attributes[:]
        encoded = body.SerializeToString()
        for pair in pairs:
            kv = pair.SerializeToString()
            again = (pair.value if extra is None else extra).SerializeToString()
            if pair is doubled or pair.value.HasField("array_value"):
                kv = _field(2, again) + kv if first else kv + _field(2, again)
            encoded += _field(9, kv)
        spans += _field(2, encoded)
    scope = type(scope_spans)()
    scope.CopyFrom(scope_spans)
    del scope.spans[:]
    resource = type(resource_spans)()
    resource.CopyFrom(resource_spans)
    del resource.scope_spans[:]
    wire = _field(1, resource.SerializeToString() + _field(2, scope.SerializeToString() + spans))
    parsed = parse_protobuf(wire)
    assert parsed.SerializeToString() != wire  # what the OTLP parse merged
    assert flat._Check.FromString(wire).ByteSize() < len(wire)  # the check sees it
    from_wire = fast_batch(parsed, wire=wire)
    again_parsed = fast_batch(parsed)
    assert (from_wire is None) == (again_parsed is None)
    taken_twice.append(from_wire is not None)
    if from_wire is not None and again_parsed is not None:
        assert fast_rows(from_wire).events == fast_rows(again_parsed).events
        assert fast_rows(from_wire).dimensions == fast_rows(again_parsed).dimensions
        assert_same(parsed, wire=wire)


def test_a_value_sent_twice_was_taken_by_the_hot_path() -> None:
    """Run after the test above (file order): some of those requests took the hot path."""
    assert any(taken_twice), taken_twice
