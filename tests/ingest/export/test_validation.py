"""Fail-closed validation through the real receiver: exact rejected counts, precise
messages, quarantine rows with the original attributes, and the rest lands."""

from __future__ import annotations

import json

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export, http_export, http_response
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

BAD_CASES: list[tuple[Evaluation | Sentinel, str]] = [
    (Evaluation("s", 1, run_mode=None), "holonograph.run_mode: missing"),
    (
        Evaluation("s", 2, run_mode="staging"),
        "holonograph.run_mode: 'staging' is not one of eval|local_dev|production|replay|test",
    ),
    (Evaluation("s", 3, extra={"holonograph.surface.id": None}), "holonograph.surface.id: missing"),
    (
        Evaluation("s", 4, dims=[Dim("correctness")]),
        "event 0 (holonograph.dimension): dimension 'correctness': neither"
        " holonograph.dimension.passed nor holonograph.dimension.score",
    ),
    (
        Evaluation("s", 5, extra={"holonograph.latency_ms": "fast"}),
        "holonograph.latency_ms: expected a double, got string",
    ),
    (
        Evaluation("s", 6, extra={"holonograph.provenance": "prod"}),
        "holonograph.provenance: 'prod' is not production-state or exploratory-state",
    ),
    (
        Evaluation("s", 7, dims=[Dim("tone", score=1.0), Dim("tone", passed=True)]),
        "event 1: dimension 'tone' graded twice",
    ),
    (Sentinel("s", -1), "holonograph.emission.seq: must be >= 0, got -1"),
]


def _request_with_bad_cases() -> ExportTraceServiceRequest:
    good = [Evaluation("s", 0, event_id="evt_good"), Sentinel("s", 9)]
    return export_request(record_spans(good + [case for case, _ in BAD_CASES]))


def test_each_bad_span_is_quarantined_with_its_reason(receiver: RunningReceiver) -> None:
    request = _request_with_bad_cases()
    reply = grpc_export(receiver.grpc_endpoint, request.SerializeToString())
    assert reply.code is grpc.StatusCode.OK
    partial = reply.response().partial_success
    assert partial.rejected_spans == len(BAD_CASES)
    assert partial.error_message.startswith(f"rejected {len(BAD_CASES)} span(s): span ")
    for _, reason in BAD_CASES[:5]:
        assert reason in partial.error_message
    assert partial.error_message.endswith(f"and {len(BAD_CASES) - 5} more")

    reasons = dict(
        receiver.store.query(
            "SELECT emission_seq, reason FROM holonograph.quarantine FINAL"
            " WHERE emission_stream = 's' OR emission_stream IS NULL"
        ).rows
    )
    assert reasons == {
        1: BAD_CASES[0][1], 2: BAD_CASES[1][1], 3: BAD_CASES[2][1], 4: BAD_CASES[3][1],
        5: BAD_CASES[4][1], 6: BAD_CASES[5][1], 7: BAD_CASES[6][1], None: BAD_CASES[7][1],
    }  # fmt: skip
    attributes = json.loads(
        receiver.store.query(
            "SELECT attributes FROM holonograph.quarantine WHERE emission_seq = 5"
        ).scalar()
    )
    assert attributes["holonograph.latency_ms"] == "fast"
    assert attributes["holonograph.surface.id"] == "classify-intent"

    assert receiver.store.query(
        "SELECT event_id FROM holonograph.evaluation_events FINAL"
    ).rows == [("evt_good",)]
    emissions = receiver.store.query(
        "SELECT emission_seq, quarantined FROM holonograph.emission_records ORDER BY emission_seq"
    ).rows
    # Rejected spans with a valid stream and seq arrived: their ordinals are no gap.
    assert emissions == [(0, False), *[(n, True) for n in range(1, 8)], (9, False)]


def test_bad_trace_and_span_ids_are_rejected(receiver: RunningReceiver) -> None:
    request = export_request(record_spans([Evaluation("ids", 0), Evaluation("ids", 1)]))
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"\0" * 16
    spans[1].span_id = b"\1\2\3"
    reply = http_export(receiver.http_endpoint, request.SerializeToString())
    assert reply.status_code == 200
    partial = http_response(reply).partial_success
    assert partial.rejected_spans == 2
    assert "trace_id: must be 16 non-zero bytes" in partial.error_message
    assert "span_id: must be 8 non-zero bytes, got 3 bytes" in partial.error_message
    assert receiver.store.query("SELECT count() FROM holonograph.quarantine").scalar() == 2


def test_unknown_holonograph_span_name_is_quarantined(receiver: RunningReceiver) -> None:
    request = export_request(record_spans([Evaluation("n", 0)]))
    request.resource_spans[0].scope_spans[0].spans[0].name = "holonograph.mystery"
    reply = grpc_export(receiver.grpc_endpoint, request.SerializeToString())
    assert reply.response().partial_success.rejected_spans == 1
    assert "span name 'holonograph.mystery' is not in the wire contract" in (
        reply.response().partial_success.error_message
    )


def test_quarantine_rows_are_idempotent_on_retry(receiver: RunningReceiver) -> None:
    payload = export_request(record_spans([Evaluation("r", 1, run_mode=None)])).SerializeToString()
    for _ in range(3):
        assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.OK
    assert receiver.store.query("SELECT count() FROM holonograph.quarantine FINAL").scalar() == 1
