"""The Guide's baggage keys on a worker's spans: `holonograph.runmode` and
`holonograph.correlation-id`, as OpenTelemetry's own BaggageSpanProcessor copies them
onto every span started under that baggage, read as the run mode and correlation id
with the same fail-closed rules, through the real receiver."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import grpc
import pytest
from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.processor.baggage import BaggageSpanProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from holonograph.demo.traffic import SeededIds
from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export
from tests.otel_emit import BASE_NS, export_request

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

ALLOWED = "eval|local_dev|production|replay|test"


def worker_span(seq: int, bag: Mapping[str, str], **attributes: Any) -> dict[str, Any]:
    """One evaluation a worker records under `bag`; `attributes` its own (None: left out)."""
    own: dict[str, Any] = {
        "holonograph.event.id": f"evt_bag_{seq}",
        "holonograph.surface.id": "classify-intent",
        "holonograph.emission.stream": "worker",
        "holonograph.emission.seq": seq,
    }
    own.update(attributes)
    return {"bag": bag, "attributes": {k: v for k, v in own.items() if v is not None}}


def record(cases: list[dict[str, Any]]) -> list[ReadableSpan]:
    """The spans as the SDK records them with a BaggageSpanProcessor copying every
    `holonograph.*` baggage entry onto each span started in that context."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(id_generator=SeededIds(5))
    provider.add_span_processor(BaggageSpanProcessor(lambda key: key.startswith("holonograph.")))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("worker", "1.0")
    for index, case in enumerate(cases):
        context = Context()
        for key, value in case["bag"].items():
            context = baggage.set_baggage(key, value, context=context)
        end = BASE_NS + index * 1_000_000
        span = tracer.start_span(
            "holonograph.evaluation",
            context=context,
            attributes=case["attributes"],
            start_time=end - 1_000,
        )
        span.add_event(
            "holonograph.dimension",
            {"holonograph.dimension.id": "correctness", "holonograph.dimension.passed": True},
            timestamp=end,
        )
        span.end(end_time=end)
    provider.shutdown()
    return list(memory.get_finished_spans())


CASES = [
    # accepted: the run mode and correlation id only as baggage
    worker_span(0, {"holonograph.runmode": "eval", "holonograph.correlation-id": "call-7"}),
    # accepted: both spellings, agreeing
    worker_span(
        1,
        {"holonograph.runmode": "production", "holonograph.correlation-id": "call-8"},
        **{"holonograph.run_mode": "production", "holonograph.correlation.id": "call-8"},
    ),
    # rejected: an unknown run mode is unknown in either spelling
    worker_span(2, {"holonograph.runmode": "staging"}),
    # rejected: two run modes on one span
    worker_span(3, {"holonograph.runmode": "eval"}, **{"holonograph.run_mode": "production"}),
    # rejected: two correlation ids on one span
    worker_span(
        4,
        {"holonograph.correlation-id": "call-1"},
        **{"holonograph.run_mode": "test", "holonograph.correlation.id": "call-2"},
    ),
    # rejected: set by hand with the wrong type, as the span attribute would be
    worker_span(5, {}, **{"holonograph.run_mode": "test", "holonograph.correlation-id": 12}),
    # rejected: neither spelling carries a run mode
    worker_span(6, {"holonograph.correlation-id": "call-9"}),
]
REASONS = {
    2: f"holonograph.runmode: 'staging' is not one of {ALLOWED}",
    3: "holonograph.runmode: 'eval' differs from holonograph.run_mode 'production'",
    4: "holonograph.correlation-id: 'call-1' differs from holonograph.correlation.id 'call-2'",
    5: "holonograph.correlation-id: expected a string, got int",
    6: "holonograph.run_mode: missing",
}


def test_the_baggage_spellings_are_read_fail_closed(receiver: RunningReceiver) -> None:
    spans = record(CASES)
    assert spans[0].attributes is not None
    assert spans[0].attributes["holonograph.runmode"] == "eval"  # what the processor copied
    reply = grpc_export(receiver.grpc_endpoint, export_request(spans).SerializeToString())
    assert reply.code is grpc.StatusCode.OK
    assert reply.response().partial_success.rejected_spans == len(REASONS)

    stored = receiver.store.query(
        "SELECT event_id, run_mode, correlation_id, extras"
        " FROM holonograph.evaluation_events FINAL ORDER BY event_id"
    ).rows
    assert [row[:3] for row in stored] == [
        ("evt_bag_0", "eval", "call-7"),
        ("evt_bag_1", "production", "call-8"),
    ]
    # Read as what they spell, not kept again as unknown extras.
    assert all(json.loads(row[3]) == {} for row in stored)
    graded = receiver.store.query(
        "SELECT event_id, run_mode, correlation_id FROM holonograph.evaluation_dimensions FINAL"
        " ORDER BY event_id"
    ).rows
    assert graded == [("evt_bag_0", "eval", "call-7"), ("evt_bag_1", "production", "call-8")]

    quarantined = dict(
        receiver.store.query("SELECT emission_seq, reason FROM holonograph.quarantine FINAL").rows
    )
    assert quarantined == REASONS


def test_a_request_of_valid_spans_reads_the_baggage_spellings_too(
    receiver: RunningReceiver,
) -> None:
    """Each span alone in its request: an all-valid one takes the hot path
    (`ingest.export.fast`), which reads the spellings as the reference does."""
    alone = [
        worker_span(10, {"holonograph.runmode": "eval", "holonograph.correlation-id": "call-10"}),
        worker_span(11, {"holonograph.runmode": "eval"}, **{"holonograph.run_mode": "production"}),
        worker_span(
            12,
            {"holonograph.correlation-id": "call-1"},
            **{"holonograph.run_mode": "test", "holonograph.correlation.id": "call-2"},
        ),
    ]
    rejected = []
    for span in record(alone):
        reply = grpc_export(receiver.grpc_endpoint, export_request([span]).SerializeToString())
        assert reply.code is grpc.StatusCode.OK
        rejected.append(reply.response().partial_success.rejected_spans)
    assert rejected == [0, 1, 1]
    stored = receiver.store.query(
        "SELECT event_id, run_mode, correlation_id FROM holonograph.evaluation_events FINAL"
    ).rows
    assert stored == [("evt_bag_10", "eval", "call-10")]
    quarantined = receiver.store.query(
        "SELECT emission_seq FROM holonograph.quarantine FINAL ORDER BY emission_seq"
    ).rows
    assert quarantined == [(11,), (12,)]
