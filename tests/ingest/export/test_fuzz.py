"""Mutated valid requests through the real receiver and store (property-based,
bounded, derandomized): whatever a client puts in its spans, the receiver never
crashes, never answers 5xx for bad data, and every answer matches the rows stored:
the spans it accepted are stored events and sentinel receipts, the spans it rejected
are quarantine rows."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue as PB2AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export, http_export, http_response
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans
from tests.values import nested, send, set_attribute

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SPANS = 5
EXAMPLES = 60
KEYS = [
    "holonograph.event.id", "holonograph.surface.id", "holonograph.run_mode",
    "holonograph.emission.stream", "holonograph.emission.seq", "holonograph.emission.final",
    "holonograph.provenance", "holonograph.timestamp", "holonograph.latency_ms",
    "holonograph.cost.usd", "holonograph.tokens.input", "holonograph.cohort_tags",
    "holonograph.marker.user_message", "holonograph.substrate.prompt_hash",
    "holonograph.sentinel.interval_ms", "holonograph.completeness.offered",
    "holonograph.completeness.window_start", "holonograph.custom.thing", "other.attribute",
]  # fmt: skip
DIMENSION_KEYS = [
    "holonograph.dimension.id", "holonograph.dimension.passed", "holonograph.dimension.score",
    "holonograph.dimension.judge",
]  # fmt: skip
TIMES = [
    "2500-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
    "1899-12-31T23:59:59Z", "1900-01-01T00:00:00Z", "2262-04-11T23:47:16.854775Z",
    "2262-04-11T23:47:16.854776Z", "2026-13-01T00:00:00Z", "2026-11-30T14:00:00", "soon",
]  # fmt: skip
NANOS = [0, 1, 2**63 - 1, 2**63, 2**64 - 1]
NAMES = ["holonograph.evaluation", "holonograph.session.sentinel", "holonograph.x", "GET /", ""]


def _array(items: list[PB2AnyValue]) -> PB2AnyValue:
    value = PB2AnyValue()
    for item in items:
        value.array_value.values.add().CopyFrom(item)
    return value


def _kvlist(pairs: list[tuple[str, PB2AnyValue]]) -> PB2AnyValue:
    value = PB2AnyValue()
    for key, item in pairs:
        pair = value.kvlist_value.values.add()
        pair.key = key
        pair.value.CopyFrom(item)
    return value


SCALARS = st.one_of(
    st.text(max_size=12).map(lambda s: PB2AnyValue(string_value=s)),
    st.sampled_from(TIMES).map(lambda s: PB2AnyValue(string_value=s)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: PB2AnyValue(int_value=i)),
    st.sampled_from([-1, 0, 2**63 - 1, -(2**63)]).map(lambda i: PB2AnyValue(int_value=i)),
    st.floats().map(lambda f: PB2AnyValue(double_value=f)),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]).map(
        lambda f: PB2AnyValue(double_value=f)
    ),
    st.booleans().map(lambda b: PB2AnyValue(bool_value=b)),
    st.binary(max_size=6).map(lambda b: PB2AnyValue(bytes_value=b)),
    st.just(PB2AnyValue()),
)
VALUES = st.one_of(
    st.recursive(
        SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(_array),
            st.lists(st.tuples(st.text(max_size=4), inner), max_size=3).map(_kvlist),
        ),
        max_leaves=8,
    ),
    st.integers(10, 45).map(nested),  # past the stored depth, past the decoder's
)


@dataclass(frozen=True)
class Mutation:
    span: int
    kind: str
    key: str = ""
    value: Any = None


MUTATIONS = st.one_of(
    st.builds(Mutation, st.integers(0, SPANS - 1), st.just("set"), st.sampled_from(KEYS), VALUES),
    st.builds(Mutation, st.integers(0, SPANS - 1), st.just("delete"), st.sampled_from(KEYS)),
    st.builds(Mutation, st.integers(0, SPANS - 1), st.just("end"), value=st.sampled_from(NANOS)),
    st.builds(Mutation, st.integers(0, SPANS - 1), st.just("name"), value=st.sampled_from(NAMES)),
    st.builds(Mutation, st.integers(0, SPANS - 1), st.just("ids"), value=st.sampled_from(range(4))),
    st.builds(
        Mutation,
        st.integers(0, SPANS - 1),
        st.just("dimension"),
        st.sampled_from(DIMENSION_KEYS),
        VALUES,
    ),
    st.builds(Mutation, st.just(0), st.just("resource"), st.just("deploy.x"), VALUES),
)

_examples = itertools.count()


def _base(example: int) -> PB2ExportTraceServiceRequest:
    """Valid spans, each on its own stream with its own event id (unique per run)."""
    items: list[Evaluation | Sentinel] = []
    for i in range(SPANS):
        stream = f"fz{example}-{i}"
        if i % 3 == 2:
            items.append(Sentinel(stream, 0, counters={"offered": 1}))
        else:
            items.append(Evaluation(stream, 0, dims=[Dim("correctness", passed=True)]))
    return export_request(record_spans(items, seed=example, resource={"fz.example": example}))


def _unique(example: int, span: int, key: str, value: PB2AnyValue) -> PB2AnyValue:
    """A string event id or stream kept unique, so no two spans are one event."""
    if key in ("holonograph.event.id", "holonograph.emission.stream") and value.HasField(
        "string_value"
    ):
        return PB2AnyValue(string_value=f"fz{example}-{span}-{value.string_value}")
    return value


def _apply(example: int, span: PB2Span, m: Mutation, request: PB2ExportTraceServiceRequest) -> None:
    if m.kind in ("set", "delete"):
        for index in reversed(range(len(span.attributes))):  # (a copy would re-parse)
            if span.attributes[index].key == m.key:
                del span.attributes[index]
        if m.kind == "set":
            set_attribute(span, m.key, _unique(example, m.span, m.key, m.value))
    elif m.kind == "end":
        span.end_time_unix_nano = m.value
    elif m.kind == "name":
        span.name = m.value
    elif m.kind == "ids":
        span.trace_id, span.span_id = [
            (span.trace_id[:8], span.span_id),
            (span.trace_id + b"\x01", span.span_id),
            (span.trace_id, bytes(8)),
            (bytes(16), span.span_id),
        ][m.value]
    elif m.kind == "dimension":
        event = span.events.add(
            name="holonograph.dimension", time_unix_nano=span.end_time_unix_nano
        )
        set_attribute(event, "holonograph.dimension.id", PB2AnyValue(string_value="fuzzed"))
        set_attribute(event, m.key, m.value)
    else:  # resource
        pair = request.resource_spans[0].resource.attributes.add()
        pair.key = m.key
        pair.value.CopyFrom(m.value)


def _totals(receiver: RunningReceiver) -> tuple[int, int, int]:
    row = receiver.store.query(
        "SELECT"
        " (SELECT count() FROM holonograph.evaluation_events FINAL),"
        " (SELECT count() FROM holonograph.emission_receipts FINAL"
        "   WHERE kind = 'sentinel' AND NOT quarantined),"
        " (SELECT count() FROM holonograph.quarantine FINAL)"
    ).rows[0]
    return int(row[0]), int(row[1]), int(row[2])


@pytest.fixture(scope="module")
def fuzz_receiver(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ingest.store.clickhouse import open_store
    from schemas.migrations import apply_migrations

    store = open_store(f"chdb://{tmp_path_factory.mktemp('fuzz') / 'store'}")
    apply_migrations(store)
    running = RunningReceiver(store)
    yield running
    running.stop()
    store.close()


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    mutations=st.lists(MUTATIONS, min_size=1, max_size=6),
    transport=st.sampled_from(["grpc", "http-protobuf", "http-json"]),
)
def test_mutated_requests_never_crash_and_answers_match_the_store(
    fuzz_receiver: RunningReceiver, mutations: list[Mutation], transport: str
) -> None:
    example = next(_examples)
    request = _base(example)
    spans = request.resource_spans[0].scope_spans[0].spans
    for mutation in mutations:
        _apply(example, spans[mutation.span], mutation, request)
    ours = sum(span.name.startswith("holonograph.") for span in spans)
    endpoint = fuzz_receiver.grpc_endpoint if transport == "grpc" else fuzz_receiver.http_endpoint

    before = _totals(fuzz_receiver)
    status, response = send(transport, endpoint, request)
    after = _totals(fuzz_receiver)

    assert status == "OK", (status, response)  # a bad span is never a failed request
    rejected = response.partial_success.rejected_spans
    events, sentinels, quarantined = (a - b for a, b in zip(after, before, strict=True))
    assert events + sentinels == ours - rejected, response.partial_success.error_message
    assert quarantined == rejected, response.partial_success.error_message


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    target=st.integers(0, SPANS - 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=3),
    transport=st.sampled_from(["grpc", "http-protobuf"]),
)
def test_corrupt_bytes_inside_one_span_cost_that_span_at_most(
    fuzz_receiver: RunningReceiver, target: int, flips: list[tuple[float, int]], transport: str
) -> None:
    """Bytes of one span replaced in place (the framing around it intact): whatever
    they turn into, the request is answered 200 and the other spans are stored."""
    request = _base(next(_examples))
    spans = request.resource_spans[0].scope_spans[0].spans
    body = bytearray(request.SerializeToString())
    span = spans[target].SerializeToString()
    start = bytes(body).find(span)
    assert start > 0 and bytes(body).count(span) == 1
    for where, byte in flips:
        body[start + min(int(where * len(span)), len(span) - 1)] = byte
    endpoint = fuzz_receiver.grpc_endpoint if transport == "grpc" else fuzz_receiver.http_endpoint

    before = _totals(fuzz_receiver)
    status, response = _send_bytes(transport, endpoint, bytes(body))
    after = _totals(fuzz_receiver)

    assert status == "OK", (status, response)
    rejected = response.partial_success.rejected_spans
    events, sentinels, quarantined = (a - b for a, b in zip(after, before, strict=True))
    assert quarantined == rejected
    # The other spans all land; the spoiled one is stored, rejected or (renamed) ignored.
    assert SPANS - 1 <= events + sentinels + rejected <= SPANS
    assert events + sentinels >= SPANS - 1


def _send_bytes(transport: str, endpoint: str, body: bytes) -> tuple[str, Any]:
    """(status, ExportTraceServiceResponse or the error's message) for raw bytes."""
    if transport == "grpc":
        reply = grpc_export(endpoint, body)
        ok = reply.code.name == "OK"
        return reply.code.name, reply.response() if ok else reply.details
    answer = http_export(endpoint, body)
    if answer.status_code != 200:
        return str(answer.status_code), answer.content
    return "OK", http_response(answer)
