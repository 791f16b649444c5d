"""Fault injection on the scale-out path. After each fault: every accepted span is in
the store exactly once (read with FINAL), and every span that was not accepted got
a retryable error."""

from __future__ import annotations

import concurrent.futures
import json
import urllib.request

import grpc
import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from schemas.tables import EVALUATION_EVENTS
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import accepted_ordinals, count, wait_until
from tests.ingest.helpers import grpc_export, http_export, http_status
from tests.otel_emit import Evaluation, export_grpc, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]

# The codes OTLP/gRPC clients retry (the specification's list; RESOURCE_EXHAUSTED with a
# retry delay): a receiver stopping mid-request may cancel the call it can no longer answer.
RETRYABLE = {
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DATA_LOSS,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _payload(stream: str, start: int = 0, n: int = 3) -> bytes:
    items = [Evaluation(stream, seq) for seq in range(start, start + n)]
    return export_request(record_spans(items, seed=start + 17)).SerializeToString()


def _exactly_once(
    store: ClickHouseStore,
    accepted: set[tuple[str, int]],
    retried: frozenset[tuple[str, int]] = frozenset(),
) -> None:
    """Each accepted (stream, seq) stored once: one event row, and one receipt unless the
    client retried it after a retryable error (a countable duplicate, by design: a
    timed-out request may still have reached the broker)."""
    assert accepted_ordinals(store) >= accepted
    rows = store.query(
        "SELECT emission_stream, emission_seq, received_count FROM holonograph.emission_records"
    ).rows
    assert all(received == 1 for s, q, received in rows if (s, q) not in retried), rows
    events = store.query(
        "SELECT emission_stream, emission_seq, count() FROM holonograph.evaluation_events FINAL"
        " GROUP BY emission_stream, emission_seq"
    ).rows
    assert all(n == 1 for _, _, n in events)
    assert {(s, q) for s, q, _ in events} >= accepted


def _readyz(port: int) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_sink_killed_mid_batch_then_restarted(
    broker: Broker,
    names: dict[str, str],
    store: ClickHouseStore,
    kafka_receiver: KafkaReceiver,
) -> None:
    first = RunningSink(broker, names, store)
    first.faulty.hold(EVALUATION_EVENTS.qualified)  # the rows, past the ownership check
    accepted = set()
    for n in range(4):
        assert (
            grpc_export(kafka_receiver.grpc_endpoint, _payload(f"k{n}")).code is grpc.StatusCode.OK
        )
        accepted |= {(f"k{n}", seq) for seq in range(3)}
    assert first.faulty.held.wait(30)  # the sink is inside an insert
    first.kill()
    # The orphaned insert now lands half a batch (events only), uncommitted.
    first.faulty.fail(after_inserts=1)
    first.faulty.release()
    wait_until(lambda: first.faulty.failed.is_set(), what="the orphaned half write")

    second = RunningSink(broker, names, store)
    try:
        wait_until(lambda: count(store, "emission_receipts") == len(accepted), what="redelivery")
    finally:
        second.stop()
    _exactly_once(store, accepted)
    assert count(store, "evaluation_dimensions") == len(accepted)


@pytest.mark.tansu_only("stops and restarts the broker process")
def test_broker_away_and_back(
    broker: Broker,
    names: dict[str, str],
    store: ClickHouseStore,
    kafka_receiver: KafkaReceiver,
    sink: RunningSink,
) -> None:
    assert grpc_export(kafka_receiver.grpc_endpoint, _payload("b", 0)).code is grpc.StatusCode.OK
    wait_until(lambda: count(store) == 3, what="first batch stored")

    broker.stop()
    try:
        refused = grpc_export(kafka_receiver.grpc_endpoint, _payload("b", 3))
        assert refused.code is grpc.StatusCode.UNAVAILABLE
        assert refused.retry_delay() == 1.0
        refused_http = http_export(kafka_receiver.http_endpoint, _payload("b", 3))
        assert refused_http.status_code == 503
        assert refused_http.headers["Retry-After"] == "1"
        assert "Kafka" in http_status(refused_http).message
        status, body = _readyz(int(kafka_receiver.admin_endpoint.rsplit(":", 1)[1]))
        assert status == 503 and body["reason"].startswith("kafka")
    finally:
        broker.start()

    # The official exporter retries through the outage's tail and is accepted.
    spans = record_spans([Evaluation("b", seq) for seq in range(3, 9)], seed=5)
    assert export_grpc(kafka_receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    expected = {("b", seq) for seq in range(9)}
    wait_until(lambda: accepted_ordinals(store) == expected, timeout=60, what="sink reconnected")
    wait_until(lambda: count(store) == 9, what="events stored")
    _exactly_once(store, expected, retried=frozenset(("b", seq) for seq in range(3, 6)))


def test_store_failing_for_a_while(
    names: dict[str, str],
    store: ClickHouseStore,
    kafka_receiver: KafkaReceiver,
    sink: RunningSink,
) -> None:
    sink.faulty.fail()
    accepted = set()
    for n in range(5):
        reply = grpc_export(kafka_receiver.grpc_endpoint, _payload("f", n * 3))
        assert reply.code is grpc.StatusCode.OK  # Kafka holds it; the store is the sink's problem
        accepted |= {("f", seq) for seq in range(n * 3, n * 3 + 3)}
    errors = sink.service.sink_metrics.batches.labels(result="error")
    wait_until(lambda: errors._value.get() >= 3, what="retries with backoff")
    status, body = _readyz(sink.admin_port)
    assert status == 503 and "store is down" in body["reason"]
    assert count(store) == 0

    sink.faulty.heal()
    wait_until(lambda: count(store, "emission_receipts") == 15, what="the sink to catch up")
    _exactly_once(store, accepted)
    assert _readyz(sink.admin_port)[0] == 200


def test_receiver_stopped_mid_stream(
    broker: Broker, names: dict[str, str], store: ClickHouseStore, sink: RunningSink
) -> None:
    receiver = KafkaReceiver(broker, names)
    outcomes: dict[int, grpc.StatusCode] = {}

    def client() -> None:
        for n in range(40):
            outcomes[n] = grpc_export(receiver.grpc_endpoint, _payload(f"r{n}")).code

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sending = pool.submit(client)
        wait_until(lambda: len(outcomes) >= 8, what="some accepted requests")
        receiver.stop()
        sending.result(120)

    accepted = {n for n, code in outcomes.items() if code is grpc.StatusCode.OK}
    refused = {n for n, code in outcomes.items() if code is not grpc.StatusCode.OK}
    assert accepted and refused
    assert {outcomes[n] for n in refused} <= RETRYABLE
    expected = {(f"r{n}", seq) for n in accepted for seq in range(3)}
    wait_until(lambda: accepted_ordinals(store) >= expected, what="accepted spans stored")
    _exactly_once(store, expected)
    stored_requests = {int(s[1:]) for s, _ in accepted_ordinals(store)}
    assert stored_requests <= set(outcomes)
