"""`holonograph.override` spans with `serve --kafka`: an override travels with its
arrival in a version 6 record of its stream (a record without one stays version 4), and
the sink stores the row the embedded path stores; a bad override span is a dead letter
with its reason beside the stored evaluations; another agent's reuse of its id and a
re-send store nothing."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED
from processors.lessons import cluster
from schemas.records import OVERRIDE_VERSION, SCHEMA_VERSION, BatchRecord, decode
from schemas.tables import LESSON_OVERRIDES
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import wait_until
from tests.e2e.kafka.test_ownership_kafka import token_receiver  # noqa: F401 (a fixture)
from tests.otel_emit import Evaluation, Item, Override, export_http, record_spans
from tests.ownership_cases import ATTACKER_TOKEN, VICTIM_TOKEN, send
from tests.processors.lessons.support import Clock, call

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]

AT = {"holonograph.timestamp": "2026-07-01T00:05:00Z"}
STORED = tuple(c for c in LESSON_OVERRIDES.columns if c != "recorded_at")


def _rows(store: ClickHouseStore) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in store.query(
            f"SELECT {', '.join(STORED)} FROM {LESSON_OVERRIDES.qualified} FINAL ORDER BY event_id"
        ).rows
    ]


def _count(store: ClickHouseStore, table: str) -> int:
    return int(store.query(f"SELECT count() FROM holonograph.{table} FINAL").scalar())


async def _versions(broker: Broker, topic: str) -> list[int]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        fetched = await consumer.getmany(timeout_ms=3000)
        records = [decode(m.value) for messages in fetched.values() for m in messages]
    finally:
        await consumer.stop()
    return sorted(r.schema_version for r in records if isinstance(r, BatchRecord))


async def test_an_override_span_reaches_the_store_through_kafka_as_on_the_embedded_path(
    kafka_receiver: KafkaReceiver,
    sink: RunningSink,
    store: ClickHouseStore,
    broker: Broker,
    names: dict[str, str],
) -> None:
    items: list[Item] = [
        Evaluation("strm_k", 0),
        Override("strm_k", 1, extra=AT),
        Override("strm_k", 2, tags=["bad\ttag"]),
        Evaluation("strm_plain", 0),
    ]
    spans = record_spans(items, seed=5)
    assert export_http(kafka_receiver.http_endpoint, spans) is SpanExportResult.SUCCESS

    def stored() -> bool:
        receipts = store.query("SELECT count() FROM holonograph.emission_receipts").scalar()
        return receipts == 4 and _count(store, "quarantine") == 1

    wait_until(stored, what="the sink to store the override")
    (row,) = _rows(store)
    stored_row = dict(zip(STORED, row, strict=True))
    assert stored_row["source"] == "otlp"
    assert (stored_row["emission_stream"], stored_row["emission_seq"]) == ("strm_k", 1)
    assert stored_row["occurred_at"].isoformat().startswith("2026-07-01 00:05:00".replace(" ", "T"))
    (reason,) = store.query("SELECT reason FROM holonograph.quarantine FINAL").rows[0]
    assert reason.startswith("holonograph.override.tags: item 0: String should match pattern")
    assert _count(store, "evaluation_events") == 2
    # Only the record that holds the override is version 6.
    versions = await _versions(broker, names["kafka_records_topic"])
    assert versions == sorted([OVERRIDE_VERSION, SCHEMA_VERSION])

    # The embedded path stores the same row from the same span.
    from ingest.export.request import validate_request
    from ingest.store.rows import TableRows
    from schemas.events import ValidatedBatch
    from tests.otel_emit import export_request

    batch = validate_request(export_request(record_spans([items[1]], seed=5)))
    rows = TableRows()
    recorded_at = store.query(f"SELECT recorded_at FROM {LESSON_OVERRIDES.qualified}").scalar()
    rows.add(ValidatedBatch(overrides=batch.overrides), "r", recorded_at)
    (embedded,) = rows.overrides
    embedded_row = dict(zip(LESSON_OVERRIDES.columns, embedded, strict=True))
    assert {k: embedded_row[k] for k in STORED if k not in ("occurred_at",)} == {
        k: stored_row[k] for k in STORED if k not in ("occurred_at",)
    }

    # Clustering sees it.
    window = {"surfaceId": "classify-intent", "since": "2026-07-01T00:00:00Z"}
    shown = call(store, cluster.JOB, {**window, "until": "2026-07-02T00:00:00Z"}, Clock())
    assert shown.to_json()["eventCount"] == 1


def test_the_sink_refuses_another_agents_reuse_of_an_override_id_and_stores_a_resend_once(
    token_receiver: KafkaReceiver,  # noqa: F811
    sink: RunningSink,
    store: ClickHouseStore,
) -> None:
    endpoint = token_receiver.grpc_endpoint
    assert send(endpoint, [Override("victim", 0, event_id="ovr_v")], VICTIM_TOKEN, 1) == (0, "")
    wait_until(lambda: len(_rows(store)) == 1, what="the victim's override")
    before = _rows(store)
    # Kafka's receiver has no store: it accepts both, and the sink decides.
    forged = Override("attack", 0, agent="other-agent", event_id="ovr_v")
    assert send(endpoint, [forged], ATTACKER_TOKEN, seed=2)[0] == 0
    assert send(endpoint, [Override("victim", 0, event_id="ovr_v")], VICTIM_TOKEN, 3)[0] == 0
    wait_until(lambda: _count(store, "quarantine") == 1, what="the forgery's quarantine")
    wait_until(
        lambda: store.query("SELECT count() FROM holonograph.emission_receipts").scalar() == 3,
        what="the re-send's receipt",
    )
    (reason,) = store.query("SELECT reason FROM holonograph.quarantine FINAL").rows[0]
    assert reason.startswith(f"{EVENT_OWNED}: 'ovr_v' belongs to agent 'billing-triage'")
    assert _rows(store) == before
    recorded = store.query(f"SELECT count() FROM {LESSON_OVERRIDES.qualified}").scalar()
    assert recorded == 1  # the re-send wrote no second row
