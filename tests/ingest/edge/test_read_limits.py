"""Bounded reads on the HTTP listener: a client trickling its body or its header is
disconnected while other clients are served, and connections past the cap are told
to come back later. Raw sockets, so the bytes on the wire are exactly the test's."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import grpc
import pytest

from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export, http_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture
def strict_receiver(store: ClickHouseStore) -> Iterator[RunningReceiver]:
    running = RunningReceiver(
        store,
        http_header_timeout_seconds=1.0,
        body_timeout_seconds=1.0,
        http_max_connections=3,
    )
    yield running
    running.stop()


def _connect(receiver: RunningReceiver) -> socket.socket:
    port = int(receiver.http_endpoint.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _read_until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection (or the deadline)."""
    received = b""
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"connection still open; received {received!r}")


def _payload(stream: str) -> bytes:
    return export_request(record_spans([Evaluation(stream, 0)])).SerializeToString()


def _stored(receiver: RunningReceiver, stream: str) -> int:
    return int(
        receiver.store.query(
            "SELECT count() FROM holonograph.evaluation_events WHERE emission_stream = {s:String}",
            {"s": stream},
        ).scalar()
    )


def test_trickling_body_is_disconnected_while_others_are_served(
    strict_receiver: RunningReceiver,
) -> None:
    body = _payload("slow")
    slow = _connect(strict_receiver)
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    slow.sendall(head.encode() + body[:5])
    started = time.monotonic()
    # Meanwhile another client is served at once, on both transports.
    assert http_export(strict_receiver.http_endpoint, _payload("fast")).status_code == 200
    assert grpc_export(strict_receiver.grpc_endpoint, _payload("fast-grpc")).code is (
        grpc.StatusCode.OK
    )
    for index in range(5, 8):  # a byte now and then: never idle, never done
        slow.sendall(body[index : index + 1])
        time.sleep(0.2)
    answer = _read_until_closed(slow, started + 10)
    slow.close()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"did not arrive within 1s" in answer
    assert time.monotonic() - started < 5
    assert _stored(strict_receiver, "fast") == 1 and _stored(strict_receiver, "fast-grpc") == 1
    assert _stored(strict_receiver, "slow") == 0


def test_trickling_header_is_disconnected(strict_receiver: RunningReceiver) -> None:
    slow = _connect(strict_receiver)
    started = time.monotonic()
    for piece in (b"POST /v1/tr", b"aces HTTP/1.1\r\n", b"Host: x\r\n"):
        slow.sendall(piece)
        time.sleep(0.3)
    assert http_export(strict_receiver.http_endpoint, _payload("other")).status_code == 200
    assert _read_until_closed(slow, started + 10) == b""
    assert time.monotonic() - started < 5
    slow.close()


def test_connections_past_the_cap_are_told_to_retry(strict_receiver: RunningReceiver) -> None:
    """Three connections each receiving a request (none can be shed): a fourth is told
    to come back, and is served once they are answered."""
    table = strict_receiver.service.http_connections
    body = _payload("held")
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    held = [_connect(strict_receiver) for _ in range(3)]
    try:
        for sock in held:
            sock.sendall(head + body[:3])
        deadline = time.monotonic() + 10
        while table.answering() < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        extra = _connect(strict_receiver)
        answer = _read_until_closed(extra, time.monotonic() + 10)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"Retry-After: 1\r\n" in answer
    finally:
        for sock in held:
            sock.close()

    def served() -> bool:
        return http_export(strict_receiver.http_endpoint, _payload("after")).status_code == 200

    deadline = time.monotonic() + 10
    while not served():  # the closed connections are released as the server notices
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _stored(strict_receiver, "after") >= 1
