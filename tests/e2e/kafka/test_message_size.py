"""A request larger than the broker's message limit is split across messages, never
dropped; an event that alone exceeds it is quarantined with that reason, and the
client is told in `partial_success`."""

from __future__ import annotations

import grpc
import pytest

from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]

LIMIT = 20_000


def test_split_and_oversize_quarantine(
    broker: Broker, names: dict[str, str], store: ClickHouseStore, sink: RunningSink
) -> None:
    receiver = KafkaReceiver(broker, names, kafka_max_message_bytes=LIMIT)
    try:
        text = "x" * 1_500
        items = [
            Evaluation("big", seq, extra={"holonograph.marker.response_text": text})
            for seq in range(60)  # ~100 kB for one stream: at least five messages
        ]
        items.append(
            Evaluation("big", 60, extra={"holonograph.marker.response_text": "y" * 30_000})
        )
        payload = export_request(record_spans(items)).SerializeToString()
        reply = grpc_export(receiver.grpc_endpoint, payload)
        assert reply.code is grpc.StatusCode.OK
        partial = reply.response().partial_success
        assert partial.rejected_spans == 1
        assert f"exceeds the broker's message limit of {LIMIT} bytes" in partial.error_message

        produced = receiver.service.handoff._metrics.records.labels(  # type: ignore[union-attr]
            topic=names["kafka_records_topic"]
        )._value.get()
        assert produced >= 5
        wait_until(
            lambda: count(store, "emission_receipts") == 61 and count(store, "quarantine") == 1
        )
        stored = store.query(
            "SELECT emission_seq, quarantined, received_count FROM holonograph.emission_records"
            " ORDER BY emission_seq"
        ).rows
        assert [seq for seq, _, _ in stored] == list(range(61))  # no gap: 60 arrived
        assert [q for _, q, _ in stored] == [False] * 60 + [True]
        assert {n for _, _, n in stored} == {1}
        reason = store.query("SELECT reason FROM holonograph.quarantine FINAL").scalar()
        assert reason.startswith("record of ")
    finally:
        receiver.stop()
