"""A success response means committed rows; a failing or slow store gets retryable
errors with a delay, and nothing accepted is lost or doubled."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable

import grpc
import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.edge.admission import PROTOBUF_EXPANSION, SPAN_COST
from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export, http_export, http_status
from tests.otel_emit import Evaluation, export_grpc, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


def _payload(stream: str, count: int = 3, start: int = 0) -> bytes:
    items = [Evaluation(stream, seq) for seq in range(start, start + count)]
    return export_request(record_spans(items, seed=start + len(stream))).SerializeToString()


def _count(receiver: RunningReceiver, table: str = "evaluation_events") -> int:
    return int(receiver.store.query(f"SELECT count() FROM holonograph.{table} FINAL").scalar())


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_store_down_gives_retryable_errors_and_loses_nothing(receiver: RunningReceiver) -> None:
    receiver.faulty.fail()
    reply = grpc_export(receiver.grpc_endpoint, _payload("down"))
    assert reply.code is grpc.StatusCode.UNAVAILABLE
    assert "store write failed: store is down (injected)" in reply.details
    assert reply.retry_delay() == 1.0

    http_reply = http_export(receiver.http_endpoint, _payload("down"))
    assert http_reply.status_code == 503
    assert http_reply.headers["Retry-After"] == "1"
    assert "store is down" in http_status(http_reply).message
    assert _count(receiver) == 0

    receiver.faulty.heal()
    assert grpc_export(receiver.grpc_endpoint, _payload("down")).code is grpc.StatusCode.OK
    assert _count(receiver) == 3
    assert _count(receiver, "emission_receipts") == 3


def test_official_exporter_retries_until_the_store_is_back(receiver: RunningReceiver) -> None:
    receiver.faulty.fail()
    spans = record_spans([Evaluation("retry", n) for n in range(5)])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(export_grpc, receiver.grpc_endpoint, spans)
        assert receiver.faulty.failed.wait(20)
        receiver.faulty.heal()
        assert pending.result(60) is SpanExportResult.SUCCESS
    assert _count(receiver) == 5
    assert _count(receiver, "emission_receipts") == 5  # the failed attempt left no receipt


def test_partial_store_failure_then_retry_counts_once(receiver: RunningReceiver) -> None:
    receiver.faulty.fail(after_inserts=1)  # events written, then the store dies
    payload = _payload("half")
    assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.UNAVAILABLE
    receiver.faulty.heal()
    assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.OK
    assert _count(receiver) == 3
    assert _count(receiver, "evaluation_dimensions") == 3
    received = receiver.store.query(
        "SELECT sum(received_count) FROM holonograph.emission_records"
    ).scalar()
    assert received == 3


def _cost(size: int, spans: int = 3) -> int:
    """What admission counts for a request of `size` bytes and `spans` spans."""
    return int(size * PROTOBUF_EXPANSION) + spans * SPAN_COST


@pytest.fixture
def tight_receiver(store) -> RunningReceiver:  # type: ignore[no-untyped-def]
    # Two requests' memory cost fits the budget, a third does not.
    size = len(_payload("tight"))
    cost = _cost(size)
    running = RunningReceiver(store, max_request_bytes=size * 2, max_inflight_bytes=cost * 2)
    yield running
    running.faulty.release()
    running.stop()


def test_backpressure_when_too_many_bytes_wait(tight_receiver: RunningReceiver) -> None:
    receiver = tight_receiver
    receiver.faulty.hold()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(grpc_export, receiver.grpc_endpoint, _payload("tight", 3, 0))
        assert receiver.faulty.held.wait(20)
        second = pool.submit(grpc_export, receiver.grpc_endpoint, _payload("tight", 3, 3))
        handoff = receiver.service.handoff
        wait_until(lambda: handoff.inflight_bytes >= 2 * len(_payload("tight")))  # type: ignore[union-attr]
        admission = receiver.service.edge.admission  # type: ignore[union-attr]
        assert admission.inflight_bytes == 2 * _cost(len(_payload("tight")))

        refused = grpc_export(receiver.grpc_endpoint, _payload("tight", 3, 6))
        assert refused.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.retry_delay() == 1.0
        # Refused on arrival, before decoding: counted by admission, not by the writer.
        assert "estimated" in refused.details and "bytes of memory" in refused.details
        refused_http = http_export(receiver.http_endpoint, _payload("tight", 3, 6))
        assert refused_http.status_code == 429
        assert refused_http.headers["Retry-After"] == "1"

        receiver.faulty.release()
        assert first.result(30).code is grpc.StatusCode.OK
        assert second.result(30).code is grpc.StatusCode.OK
    assert _count(receiver) == 6
    assert grpc_export(receiver.grpc_endpoint, _payload("tight", 3, 6)).code is grpc.StatusCode.OK
    assert _count(receiver) == 9


def test_concurrent_requests_are_group_committed(receiver: RunningReceiver) -> None:
    receiver.faulty.hold()
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        first = pool.submit(grpc_export, receiver.grpc_endpoint, _payload("g0"))
        assert receiver.faulty.held.wait(20)
        rest = [
            pool.submit(grpc_export, receiver.grpc_endpoint, _payload(f"g{n}"))
            for n in range(1, 10)
        ]
        handoff = receiver.service.handoff
        wait_until(lambda: len(handoff._queue) == 9)  # type: ignore[union-attr]
        receiver.faulty.release()
        assert all(f.result(30).code is grpc.StatusCode.OK for f in [first, *rest])
    event_inserts = [rows for table, rows in receiver.faulty.insert_calls if "events" in table]
    assert event_inserts == [3, 27]  # the nine waiting requests went in one insert
    assert _count(receiver) == 30
