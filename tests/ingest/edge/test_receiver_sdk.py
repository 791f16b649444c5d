"""Spans from the official OpenTelemetry SDK and OTLP exporters land as exact rows."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import RunningReceiver
from tests.otel_emit import (
    BASE_NS,
    Dim,
    Evaluation,
    Sentinel,
    export_grpc,
    export_http,
    record_spans,
)

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

FULL_EVALUATION = Evaluation(
    stream="strm_sdk",
    seq=0,
    event_id="evt_full",
    dims=[
        Dim("correctness", passed=False, expected="a correct answer", actual="misread intent"),
        Dim("tone", score=0.82, judge="judge:politeness"),
    ],
    extra={
        "holonograph.agent.id": "billing-triage",
        "holonograph.correlation.id": "corr_1",
        "holonograph.lens.version": "lv_2026_07_01",
        "holonograph.light_source.id": "openai/gpt-5/2026-05",
        "holonograph.light_source.requested": "anthropic/claude-sonnet-5",
        "holonograph.substrate.prompt_hash": "v2-sha256-9d3f",
        "holonograph.cohort_tags": ["customer-tier=enterprise", "vip"],
        "holonograph.multiplex.role": "primary",
        "holonograph.fixture.id": "fx_refund",
        "holonograph.marker.user_message": "I want a refund",
        "holonograph.marker.tool_invocations": ["refund_lookup", "send_email"],
        "holonograph.latency_ms": 1326.297,
        "holonograph.cost.usd": 0.001404,
        "holonograph.tokens.input": 153,
        "holonograph.tokens.output": 490,
        "holonograph.sdk.name": "@holonograph/client",
        "holonograph.sdk.version": "0.3.1",
        "holonograph.future.flag": "kept",
    },
)
SENTINEL = Sentinel(
    stream="strm_sdk",
    seq=1,
    final=True,
    counters={
        "offered": 10,
        "delivered": 9,
        "dropped": 1,
        "failed": 0,
        "window_start": "2026-07-05T18:22:00Z",
        "window_end": "2026-07-05T18:22:10Z",
    },
)


def _event_row(receiver: RunningReceiver) -> dict[str, object]:
    rows = receiver.store.query("SELECT * FROM holonograph.evaluation_events FINAL").dicts()
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("transport", ["grpc", "http", "grpc-gzip", "http-gzip"])
def test_official_exporters_rows_match_field_by_field(
    receiver: RunningReceiver, transport: str
) -> None:
    spans = record_spans([FULL_EVALUATION, SENTINEL], resource={"service.name": "triage"})
    gzip = transport.endswith("gzip")
    if transport.startswith("grpc"):
        result = export_grpc(receiver.grpc_endpoint, spans, gzip=gzip)
    else:
        result = export_http(receiver.http_endpoint, spans, gzip=gzip)
    assert result is SpanExportResult.SUCCESS

    event_span = spans[0]
    row = _event_row(receiver)
    expected_time = dt.datetime(2026, 11, 30, 13, 43, 58)
    assert row == {
        "tenant_id": "default",
        "event_id": "evt_full",
        "surface_id": "classify-intent",
        "agent_id": "billing-triage",
        "correlation_id": "corr_1",
        "run_mode": "production",
        "provenance": "production-state",
        "timestamp": expected_time,
        "lens_version": "lv_2026_07_01",
        "light_source_id": "openai/gpt-5/2026-05",
        "light_source_requested": "anthropic/claude-sonnet-5",
        "substrate": {"prompt_hash": "v2-sha256-9d3f"},
        "cohort_tags": ["customer-tier=enterprise", "vip"],
        "multiplex_role": "primary",
        "fixture_id": "fx_refund",
        "markers": {
            "user_message": ["I want a refund"],
            "tool_invocations": ["refund_lookup", "send_email"],
        },
        "latency_ms": 1326.297,
        "cost_usd": 0.001404,
        "tokens_input": 153,
        "tokens_output": 490,
        "sdk_name": "@holonograph/client",
        "sdk_version": "0.3.1",
        "dimension_ids": ["correctness", "tone"],
        "emission_stream": "strm_sdk",
        "emission_seq": 0,
        "emission_final": False,
        "trace_id": f"{event_span.context.trace_id:032x}",
        "span_id": f"{event_span.context.span_id:016x}",
        "resource_attributes": row["resource_attributes"],
        "extras": json.dumps({"holonograph.future.flag": "kept"}, separators=(",", ":")),
        "ingested_at": row["ingested_at"],
        "ingest_version": row["ingest_version"],
        "contract_version_id": "",  # no contract registered: flagged as such
        "contract_findings": ["no-contract"],
        # the sorting key's placement (migration 0016): its first receipt's surface, hour
        "placed_surface_id": "classify-intent",
        "placed_hour": expected_time.replace(minute=0, second=0),
    }
    resource = json.loads(str(row["resource_attributes"]))
    assert resource["service.name"] == "triage"
    assert resource["telemetry.sdk.name"] == "opentelemetry"

    dims = receiver.store.query(
        "SELECT dimension_id, passed, score, expected, actual, judge, surface_id, run_mode,"
        " provenance, lens_version, light_source_id, light_source_requested, substrate,"
        " cohort_tags, correlation_id, timestamp, emission_stream"
        " FROM holonograph.evaluation_dimensions FINAL ORDER BY dimension_id"
    ).rows
    layer = (
        "classify-intent", "production", "production-state", "lv_2026_07_01",
        "openai/gpt-5/2026-05", "anthropic/claude-sonnet-5", {"prompt_hash": "v2-sha256-9d3f"},
        ["customer-tier=enterprise", "vip"], "corr_1", expected_time, "strm_sdk",
    )  # fmt: skip
    assert dims == [
        ("correctness", False, None, "a correct answer", "misread intent", "", *layer),
        ("tone", None, 0.82, "", "", "judge:politeness", *layer),
    ]

    emissions = receiver.store.query(
        "SELECT emission_seq, kind, final, quarantined, event_id, surface_id, received_count,"
        " sentinel_interval_ms, completeness_offered, completeness_delivered,"
        " completeness_dropped, completeness_failed, completeness_window_start,"
        " completeness_window_end FROM holonograph.emission_records ORDER BY emission_seq"
    ).rows
    assert emissions == [
        (0, "evaluation", False, False, "evt_full", "classify-intent", 1,
         None, None, None, None, None, None, None),
        (1, "sentinel", True, False, "", "", 1, 30000, 10, 9, 1, 0,
         dt.datetime(2026, 7, 5, 18, 22, 0), dt.datetime(2026, 7, 5, 18, 22, 10)),
    ]  # fmt: skip
    assert receiver.store.query("SELECT count() FROM holonograph.quarantine").scalar() == 0


def test_non_holonograph_spans_are_counted_not_stored(receiver: RunningReceiver) -> None:
    spans = record_spans([Evaluation("s", 0)], other_spans=3)
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    assert receiver.store.query("SELECT count() FROM holonograph.evaluation_events").scalar() == 1
    metrics = receiver.service.metrics
    assert metrics.spans_ignored._value.get() == 3
    assert metrics.spans_accepted._value.get() == 1


def test_event_without_id_gets_stable_derived_id(receiver: RunningReceiver) -> None:
    item = Evaluation("strm_x", 5, extra={"holonograph.event.id": None})
    spans = record_spans([item])
    assert "holonograph.event.id" not in spans[0].attributes
    assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    ids = receiver.store.query("SELECT event_id FROM holonograph.evaluation_events FINAL").rows
    assert len(ids) == 1 and ids[0][0].startswith("evt_d_")


def test_timestamp_attribute_overrides_span_end(receiver: RunningReceiver) -> None:
    item = Evaluation("s", 0, extra={"holonograph.timestamp": "2026-07-05T18:22:14.812Z"})
    assert export_http(receiver.http_endpoint, record_spans([item])) is SpanExportResult.SUCCESS
    stamp = receiver.store.query("SELECT timestamp FROM holonograph.evaluation_events").scalar()
    assert stamp == dt.datetime(2026, 7, 5, 18, 22, 14, 812000)
    assert BASE_NS  # the span's own end time was ignored
