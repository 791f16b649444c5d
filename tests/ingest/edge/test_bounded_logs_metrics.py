"""Hostile volume against a live receiver: 10,000 malformed requests (framing aiohttp
cannot parse, bodies that do not decode, missing tokens, oversized bodies, on both
transports) write a bounded number of log lines and no traceback, and 10,000
rejected spans whose reasons all quote a different value (a key, a run mode, a span
name of the client's choosing) add a bounded number of metric series."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
import requests

from ingest.edge.answers import REFUSAL_REASONS
from ingest.metrics import REASON_LABELS
from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.ingest.edge.test_auth import TOKEN_B, entry, tokens_yaml
from tests.ingest.helpers import EXPORT, http_response
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

MAX_REQUEST_BYTES = 64 * 1024
SEQ = "holonograph.emission.seq"


@pytest.fixture
def hostile_receiver(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(tokens_yaml(entry("globex", TOKEN_B)))
    tokens.chmod(0o600)
    running = RunningReceiver(
        store,
        auth_tokens_file=tokens,
        max_request_bytes=MAX_REQUEST_BYTES,
        max_inflight_bytes=MAX_REQUEST_BYTES,
        rejection_log_seconds=3600,
    )
    yield running
    running.stop()


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _raw(port: int, data: bytes) -> bytes:
    """One connection: send `data`, read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


_FRAMING = [
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Content-Type: application/x-protobuf\r\n\r\nzz\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nno colon in this header line\r\n\r\n",
]


def _statuses(base: str, count: int, body: bytes, token: str | None) -> list[int]:
    """`count` POSTs over 8 keep-alive connections; their status codes."""
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def batch(n: int) -> list[int]:
        with requests.Session() as session:
            return [
                session.post(
                    f"{base}/v1/traces", data=body, headers=headers, timeout=10
                ).status_code
                for _ in range(n)
            ]

    with ThreadPoolExecutor(max_workers=8) as pool:
        parts = list(pool.map(batch, [count // 8] * 8))
    return [status for part in parts for status in part]


def _grpc_codes(endpoint: str, count: int, token: str | None) -> list[grpc.StatusCode]:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    codes = []
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(EXPORT)
        for _ in range(count):
            try:
                call(b"\xff\xff\xff not protobuf", timeout=10, metadata=metadata)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as err:
                codes.append(err.code())
    return codes


def _series(receiver: RunningReceiver, name: str) -> dict[str, float]:
    text = requests.get(f"{receiver.admin_endpoint}/metrics", timeout=10).text
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{")
    }


def test_10000_malformed_requests_log_a_few_lines_and_no_traceback(
    hostile_receiver: RunningReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    receiver = hostile_receiver
    http_port = _port(receiver.http_endpoint)
    garbage = b"\xff\xff\xff not protobuf"

    with ThreadPoolExecutor(max_workers=8) as pool:
        framing = list(pool.map(lambda data: _raw(http_port, data), _FRAMING * 2000))
    assert all(answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request") for answer in framing)
    unauthenticated = _statuses(receiver.http_endpoint, 1504, garbage, None)
    malformed = _statuses(receiver.http_endpoint, 1000, garbage, TOKEN_B)
    too_large = _statuses(receiver.http_endpoint, 496, b"x" * (MAX_REQUEST_BYTES + 1), TOKEN_B)
    assert set(unauthenticated) == {401} and set(malformed) == {400} and set(too_large) == {413}
    assert set(_grpc_codes(receiver.grpc_endpoint, 500, None)) == {grpc.StatusCode.UNAUTHENTICATED}
    assert set(_grpc_codes(receiver.grpc_endpoint, 500, TOKEN_B)) == {
        grpc.StatusCode.INVALID_ARGUMENT
    }
    total = len(framing) + len(unauthenticated) + len(malformed) + len(too_large) + 1000
    assert total == 10_000

    refused = _series(receiver, "holonograph_requests_refused_total")
    assert sum(refused.values()) == total
    assert len(refused) <= 2 * len(REFUSAL_REASONS)
    receiver.stop()  # the summary of what was counted since the last line is logged

    lines = [caplog.handler.format(record) for record in caplog.records]
    assert not [record for record in caplog.records if record.exc_info]
    assert not [line for line in lines if "Traceback" in line]
    logged = [line for line in lines if "refused" in line]
    # One line at the first refusal (an interval had passed), one at the stop; the
    # tokens' own log says at most one line per 10 s.
    assert 2 <= len(logged) <= 6, lines
    final = next(line for line in reversed(lines) if "request(s) refused" in line)
    assert "9999 request(s) refused" in final  # the first had its own line
    assert "5999 http malformed HTTP request" in final and "1504 http unauthenticated" in final
    assert sum(len(line.splitlines()) for line in lines) <= 20


def _hostile_spans(stream: str, count: int) -> bytes:
    """`count` spans each rejected for a reason quoting a value of its own."""
    items = []
    for seq in range(count):
        kind = seq % 4
        if kind == 0:
            items.append(Evaluation(stream, seq, extra={f"holonograph.substrate.k{seq}": 5}))
        elif kind == 1:
            items.append(Evaluation(stream, seq, extra={f"holonograph.zz{seq}": float("nan")}))
        elif kind == 2:
            items.append(Evaluation(stream, seq, run_mode=f"mode-{seq}"))
        else:
            items.append(Evaluation(stream, seq))
    request = export_request(record_spans(items))
    for span in request.resource_spans[0].scope_spans[0].spans:
        seq = next(a.value.int_value for a in span.attributes if a.key == SEQ)
        if span.name == "holonograph.evaluation" and seq % 4 == 3:
            span.name = f"holonograph.made-up-{span.span_id.hex()}"
    return request.SerializeToString()


def test_10000_rejected_spans_with_distinct_reasons_add_few_metric_series(
    store: ClickHouseStore,
) -> None:
    receiver = RunningReceiver(store, rejection_log_seconds=3600)
    try:
        before = requests.get(f"{receiver.admin_endpoint}/metrics", timeout=10).text
        rejected = 0
        for index in range(10):
            body = _hostile_spans(f"hostile-{index}", 1000)
            reply = requests.post(
                f"{receiver.http_endpoint}/v1/traces",
                data=body,
                headers={"Content-Type": "application/x-protobuf"},
                timeout=60,
            )
            assert reply.status_code == 200
            rejected += http_response(reply).partial_success.rejected_spans
        assert rejected == 10_000
        series = _series(receiver, "holonograph_spans_rejected_total")
        assert sum(series.values()) == 10_000
        labels = {key.split('reason="', 1)[1].rstrip('"}') for key in series}
        assert labels <= REASON_LABELS
        assert len(labels) == 4, labels
        after = requests.get(f"{receiver.admin_endpoint}/metrics", timeout=10).text
        assert len(after.splitlines()) - len(before.splitlines()) <= 20
        assert len(after) < 2 * len(before) + 4096
    finally:
        receiver.stop()
