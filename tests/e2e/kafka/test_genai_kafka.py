"""GenAI evaluation results with `serve --kafka`: an event without emission ordinals
travels in a version 5 record of no stream, beside the version 4 records of a stream,
and the sink stores the same rows as the embedded path: no receipts for it, every
dimension, and a rejected log record in the quarantine."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import wait_until
from tests.e2e.kafka.test_contracts_kafka import register
from tests.genai_emit import (
    Call,
    Eval,
    export_logs_http,
    genai_contract,
    record_call_logs,
    record_calls,
)
from tests.otel_emit import Evaluation, export_http, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]

CONTRACT = genai_contract(
    genai={
        "surfaces": [
            {"surfaceId": "classify-intent", "agentName": "triage"},
            {"surfaceId": "classify-intent", "serviceName": "billing-api"},
        ],
        "labels": {"passLabels": ["pass"]},
    }
)


def test_genai_events_reach_the_store_through_kafka(
    kafka_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    assert register(kafka_receiver, CONTRACT)["versionId"].startswith("cv_")
    spans = [
        *record_spans([Evaluation("strm_g", 0, surface="summarize")], seed=2),
        *record_calls([Call([Eval("relevance", score=4.0), Eval("correctness", label="pass")])]),
    ]
    assert export_http(kafka_receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    _, records = record_call_logs([Call([Eval("tone", score=0.5), Eval(None, score=1.0)])], seed=9)
    export_logs_http(kafka_receiver.http_endpoint, records)

    def stored() -> bool:
        events = store.query("SELECT count() FROM holonograph.evaluation_events FINAL").scalar()
        rejected = store.query("SELECT count() FROM holonograph.quarantine FINAL").scalar()
        # Receipts are written last in a commit, so they say the commit is whole.
        receipts = store.query("SELECT count() FROM holonograph.emission_receipts").scalar()
        return events == 3 and rejected == 1 and receipts == 1

    wait_until(stored, what="the sink to store the GenAI events")
    rows = store.query(
        "SELECT emission_stream, arraySort(dimension_ids) FROM holonograph.evaluation_events"
        " FINAL ORDER BY emission_stream, dimension_ids"
    ).rows
    assert rows == [
        ("", ["correctness", "relevance"]),
        ("", ["tone"]),
        ("strm_g", ["correctness"]),
    ]
    receipts = store.query(
        "SELECT emission_stream, count() FROM holonograph.emission_receipts GROUP BY 1"
    ).rows
    assert receipts == [("strm_g", 1)]
    (reason,) = store.query("SELECT reason FROM holonograph.quarantine FINAL").rows[0]
    assert reason == "gen_ai.evaluation.name: missing"
