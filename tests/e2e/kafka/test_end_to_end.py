"""Spans in through the official OTel exporters -> receiver -> Kafka -> sink -> store:
the rows are the embedded path's rows, column for column."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, snapshot, truncate, wait_until
from tests.otel_emit import Dim, Evaluation, Sentinel, export_grpc, export_http, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]


def _spans(stream: str, seed: int) -> list:  # type: ignore[type-arg]
    items = [
        Evaluation(
            stream,
            0,
            dims=[
                Dim("correctness", passed=True, expected="refund", actual="refund"),
                Dim("tone", score=0.75, judge="judge/gpt"),
            ],
            extra={
                "holonograph.agent.id": "billing-triage",
                "holonograph.lens.version": "lv_2026_07_01",
                "holonograph.light_source.id": "openai/gpt-4o/2024-08-06",
                "holonograph.substrate.prompt_hash": "p1",
                "holonograph.cohort_tags": ["region=eu", "beta"],
                "holonograph.marker.user_message": "where is my refund?",
                "holonograph.marker.tool_invocations": ["lookup_order", "refund"],
                "holonograph.latency_ms": 812.5,
                "holonograph.cost.usd": 0.00123,
                "holonograph.tokens.input": 812,
                "holonograph.future.thing": 3.25,
            },
        ),
        Evaluation(stream, 1, run_mode="eval", dims=[]),
        Evaluation(stream, 2, run_mode=None),  # fail-closed: quarantined, arrived
        Sentinel(stream, 3, counters={"offered": 3, "delivered": 3, "dropped": 0}),
        Evaluation(stream, 4, final=True),
    ]
    return record_spans(items, seed=seed, other_spans=2)


def _send_all(grpc_endpoint: str, http_base: str) -> None:
    assert export_grpc(grpc_endpoint, _spans("s-grpc", 1)) is SpanExportResult.SUCCESS
    assert export_http(http_base, _spans("s-http", 2), gzip=True) is SpanExportResult.SUCCESS


def test_rows_out_match_the_embedded_path(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    embedded = RunningReceiver(store)
    try:
        _send_all(embedded.grpc_endpoint, embedded.http_endpoint)
    finally:
        embedded.stop()
    expected = snapshot(store)
    assert len(expected["evaluation_events"]) == 6
    assert len(expected["quarantine"]) == 2
    truncate(store)

    receiver = KafkaReceiver(broker, names)
    sink = RunningSink(broker, names, store)
    try:
        _send_all(receiver.grpc_endpoint, receiver.http_endpoint)
        wait_until(
            lambda: count(store, "emission_receipts") == 10 and count(store, "quarantine") == 2,
            what="sink to store every row",
        )
    finally:
        receiver.stop()
        sink.stop()
    assert snapshot(store) == expected


def test_batches_are_bounded_by_rows(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    receiver = KafkaReceiver(broker, names)
    try:
        for n in range(4):  # four records of 3 events: 9 rows each
            spans = record_spans([Evaluation(f"rows{n}", seq) for seq in range(3)], seed=n)
            assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    finally:
        receiver.stop()
    sink = RunningSink(broker, names, store, sink_batch_rows=5, sink_batch_seconds=30)
    try:  # the backlog arrives in one fetch; the row bound still splits it
        wait_until(lambda: count(store, "emission_receipts") == 12, what="all stored")
    finally:
        sink.stop()
    inserts = [rows for table, rows in sink.faulty.insert_calls if table.endswith("events")]
    assert inserts == [3, 3, 3, 3]


def test_the_sink_returns_memory_once_it_holds_nothing(
    kafka_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    trimmer = sink.service.trimmer
    spans = record_spans([Evaluation("trim", seq) for seq in range(20)])
    assert export_grpc(kafka_receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    wait_until(lambda: count(store, "emission_receipts") == 20, what="the sink to store the spans")
    before = trimmer.trims  # trims at most every 10 s, then after 2 s of holding nothing
    wait_until(lambda: trimmer.trims > before, timeout=30, what="an idle trim after the commit")
    assert sink.service.sink is not None and sink.service.sink.held() == 0
