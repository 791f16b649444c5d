"""Identity owned by the agent on the scale-out path: `serve --kafka` has no store, so
it answers a forgery as it answers any valid span, and the sink, checking the records
(version 4 carries the token's agents) against the owners in the store, quarantines it
with the reason; the victim's rows and completeness stay as they were."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import STREAM_OWNED
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ingest.edge.test_auth import grpc_call
from tests.otel_emit import Item, export_request, record_spans
from tests.ownership_cases import (
    FORGERIES,
    VICTIM,
    VICTIM_EVENT,
    VICTIM_TOKEN,
    quarantined,
    tokens_file,
    victim_view,
)

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture
def token_receiver(
    broker: Broker, names: dict[str, str], tmp_path: Path
) -> Iterator[KafkaReceiver]:
    running = KafkaReceiver(broker, names, auth_tokens_file=tokens_file(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


def send(receiver: KafkaReceiver, items: list[Item], token: str, seed: int) -> int:
    """The request's rejected spans as the receiver answers them."""
    payload = export_request(record_spans(items, seed=seed)).SerializeToString()
    reply = grpc_call(receiver.grpc_endpoint, payload, token)
    assert reply.code is grpc.StatusCode.OK, reply
    answer = PB2ExportTraceServiceResponse.FromString(reply.body or b"")
    return int(answer.partial_success.rejected_spans)


def test_every_forgery_through_kafka_is_quarantined_by_the_sink_and_changes_nothing(
    token_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    assert send(token_receiver, VICTIM, VICTIM_TOKEN, seed=1) == 0
    wait_until(lambda: count(store, "emission_receipts") == 3, what="the victim's spans stored")
    before = victim_view(store)
    assert before["grades"] == [(VICTIM_EVENT, "correctness", True)]
    for seed, forgery in enumerate(FORGERIES, start=2):
        rejected = send(token_receiver, forgery.items, forgery.token, seed)
        assert rejected == (len(forgery.items) if forgery.door_rejected else 0), forgery.name
        wait_until(
            lambda f=forgery: any(  # type: ignore[misc]
                reason.startswith(f.reason) and (not f.door_rejected or STREAM_OWNED in reason)
                for _, reason in quarantined(store)
            ),
            what=f"the sink to quarantine {forgery.name}",
        )
        assert victim_view(store) == before, forgery.name
    assert len(quarantined(store)) == sum(len(f.items) for f in FORGERIES)
    metrics = sink.service.metrics.exposition().decode()
    rejected_by_sink = sum(len(f.items) for f in FORGERIES if not f.door_rejected)
    assert f"holonograph_sink_ownership_rejected_spans_total {rejected_by_sink}.0" in metrics
