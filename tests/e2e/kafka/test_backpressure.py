"""A slow broker: requests waiting for acks past `--kafka-timeout-ms` get UNAVAILABLE
with RetryInfo; bytes waiting past `--max-inflight-bytes` get RESOURCE_EXHAUSTED /
429 at once, so memory stays bounded. Once the broker answers again, requests are
accepted and every accepted span is stored once."""

from __future__ import annotations

import concurrent.futures
import datetime as dt

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from ingest.export.request import validate_request
from ingest.handoff.kafka_packing import pack, screen
from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ingest.helpers import grpc_export, http_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]


def _payload(stream: str) -> bytes:
    items = [Evaluation(stream, seq) for seq in range(20)]
    return export_request(record_spans(items, seed=len(stream))).SerializeToString()


def _record_bytes(payload: bytes) -> int:
    batch = validate_request(PB2ExportTraceServiceRequest.FromString(payload))
    return sum(
        len(r.value)
        for r in pack(screen(batch, 1_000_000), "0" * 32, dt.datetime.now(dt.UTC), 1_000_000)
    )


@pytest.mark.tansu_only("pauses the broker process")
def test_slow_broker_gives_unavailable_and_backpressure(
    broker: Broker, names: dict[str, str], store: ClickHouseStore, sink: RunningSink
) -> None:
    first, second = _payload("slow-a"), _payload("slow-b")
    limit = _record_bytes(first) * 3 // 2  # one request fits, two do not
    receiver = KafkaReceiver(
        broker, names, max_request_bytes=limit, max_inflight_bytes=limit, kafka_timeout_ms=3_000
    )
    try:
        assert grpc_export(receiver.grpc_endpoint, _payload("warm")).code is grpc.StatusCode.OK
        broker.pause()
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(grpc_export, receiver.grpc_endpoint, first)
                handoff = receiver.service.handoff
                wait_until(lambda: handoff.inflight_bytes > 0, what="bytes in flight")  # type: ignore[union-attr]
                refused = grpc_export(receiver.grpc_endpoint, second)
                assert refused.code is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert refused.retry_delay() == 1.0
                refused_http = http_export(receiver.http_endpoint, second)
                assert refused_http.status_code == 429
                assert refused_http.headers["Retry-After"] == "1"
                slow = waiting.result(30)
            assert slow.code is grpc.StatusCode.UNAVAILABLE
            assert "did not acknowledge within 3s" in slow.details
            assert slow.retry_delay() == 1.0
            assert handoff.inflight_bytes == 0  # type: ignore[union-attr]
        finally:
            broker.resume()
        for payload in (first, second):
            assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.OK
    finally:
        receiver.stop()
    wait_until(lambda: count(store) == 60, what="accepted spans stored")
    events = store.query(
        "SELECT event_id FROM holonograph.evaluation_events FINAL"
        " GROUP BY event_id HAVING count() > 1"
    ).rows
    assert events == []
