"""Both transports, per the OTLP specification: one export path, identical rows,
and every bad-input case answered precisely while the server keeps serving."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import grpc
import pytest

from tests.conftest import RunningReceiver
from tests.ingest.helpers import (
    grpc_export,
    http_export,
    http_response,
    http_status,
    to_otlp_json,
)
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

# The wire contract's example request (a copy of shared/examples/, kept with the tests).
EXAMPLE = (
    Path(__file__).resolve().parents[2] / "testdata" / "wire" / "evaluation-and-sentinel.otlp.json"
)

TABLE_DUMPS = {
    "evaluation_events": "SELECT * EXCEPT (ingested_at, ingest_version)"
    " FROM holonograph.evaluation_events FINAL ORDER BY event_id",
    "evaluation_dimensions": "SELECT * EXCEPT (ingested_at, ingest_version)"
    " FROM holonograph.evaluation_dimensions FINAL ORDER BY event_id, dimension_id",
    "emission_records": "SELECT * EXCEPT (first_received_at, last_received_at)"
    " FROM holonograph.emission_records ORDER BY emission_stream, emission_seq",
    "quarantine": "SELECT * EXCEPT received_at FROM holonograph.quarantine FINAL"
    " ORDER BY quarantine_id",
}


def _mixed_request_bytes() -> bytes:
    items = [
        Evaluation("strm_a", 0, dims=[Dim("correctness", passed=True), Dim("tone", score=0.5)]),
        Evaluation("strm_a", 1, run_mode=None),  # rejected: no run mode
        Sentinel("strm_a", 2, counters={"offered": 3, "dropped": 0}),
    ]
    return export_request(record_spans(items)).SerializeToString()


def _dump(receiver: RunningReceiver) -> dict[str, list[tuple[object, ...]]]:
    return {name: receiver.store.query(sql).rows for name, sql in TABLE_DUMPS.items()}


def _clear(receiver: RunningReceiver) -> None:
    for table in ("evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine"):
        receiver.store.command(f"TRUNCATE TABLE holonograph.{table}")


def test_same_request_through_every_transport_gives_identical_rows(
    receiver: RunningReceiver,
) -> None:
    payload = _mixed_request_bytes()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    as_json = to_otlp_json(ExportTraceServiceRequest.FromString(payload))
    dumps = {}
    for transport in ("grpc", "grpc-gzip", "http-protobuf", "http-json", "http-json-gzip"):
        _clear(receiver)
        if transport.startswith("grpc"):
            reply = grpc_export(receiver.grpc_endpoint, payload, gzip=transport.endswith("gzip"))
            assert reply.code is grpc.StatusCode.OK
            response = reply.response()
        elif transport == "http-protobuf":
            http_reply = http_export(receiver.http_endpoint, payload)
            assert http_reply.status_code == 200
            assert http_reply.headers["Content-Type"].startswith("application/x-protobuf")
            response = http_response(http_reply)
        else:
            http_reply = http_export(
                receiver.http_endpoint, as_json, "application/json", gzip=transport.endswith("gzip")
            )
            assert http_reply.status_code == 200
            assert http_reply.headers["Content-Type"].startswith("application/json")
            response = http_response(http_reply)
        assert response.partial_success.rejected_spans == 1
        assert "holonograph.run_mode: missing" in response.partial_success.error_message
        dumps[transport] = _dump(receiver)
    first = dumps["grpc"]
    assert len(first["evaluation_events"]) == 1
    assert len(first["evaluation_dimensions"]) == 2
    assert len(first["emission_records"]) == 3  # the rejected span arrived: no gap
    assert len(first["quarantine"]) == 1
    for transport, dump in dumps.items():
        assert dump == first, transport


def test_shared_example_request_is_accepted_over_json(receiver: RunningReceiver) -> None:
    reply = http_export(receiver.http_endpoint, EXAMPLE.read_bytes(), "application/json")
    assert reply.status_code == 200
    assert reply.json() == {}
    rows = receiver.store.query(
        "SELECT event_id, trace_id, span_id, tokens_input FROM holonograph.evaluation_events"
    ).rows
    assert rows == [
        ("evt_01J9Z8Q2M4T7", "44066542ec38008d331dfd3b27241631", "7694e2fe860397b7", 153)
    ]


def test_otlp_json_accepts_int64_as_numbers_and_ignores_unknown_fields(
    receiver: RunningReceiver,
) -> None:
    document = json.loads(EXAMPLE.read_text())
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["endTimeUnixNano"] = int(span["endTimeUnixNano"])
    span["someFutureField"] = {"x": 1}
    for attribute in span["attributes"]:
        if attribute["key"] == "holonograph.emission.seq":
            attribute["value"] = {"intValue": 41}
    reply = http_export(receiver.http_endpoint, json.dumps(document).encode(), "application/json")
    assert reply.status_code == 200, reply.text
    assert (
        receiver.store.query("SELECT emission_seq FROM holonograph.evaluation_events").scalar()
        == 41
    )


def test_empty_request_succeeds_on_both(receiver: RunningReceiver) -> None:
    assert grpc_export(receiver.grpc_endpoint, b"").code is grpc.StatusCode.OK
    assert http_export(receiver.http_endpoint, b"").status_code == 200
    assert http_export(receiver.http_endpoint, b"{}", "application/json").status_code == 200


def test_undecodable_bodies(receiver: RunningReceiver) -> None:
    reply = grpc_export(receiver.grpc_endpoint, b"\xff\xff\xff\xff")
    assert reply.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a protobuf ExportTraceServiceRequest" in reply.details
    assert reply.retry_delay() is None

    bad_proto = http_export(receiver.http_endpoint, b"\xff\xff\xff\xff")
    assert bad_proto.status_code == 400
    assert "not a protobuf ExportTraceServiceRequest" in http_status(bad_proto).message

    bad_json = http_export(receiver.http_endpoint, b"{not json", "application/json")
    assert bad_json.status_code == 400
    assert "not valid JSON" in http_status(bad_json).message

    bad_hex = json.loads(EXAMPLE.read_text())
    bad_hex["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "zz"
    reply_hex = http_export(
        receiver.http_endpoint, json.dumps(bad_hex).encode(), "application/json"
    )
    # One span with an id that is not hex costs that span only (the sentinel lands).
    assert reply_hex.status_code == 200
    partial = http_response(reply_hex).partial_success
    assert partial.rejected_spans == 1
    assert "span: traceId 'zz' is not valid hex" in partial.error_message

    corrupt_gzip = http_export(
        receiver.http_endpoint, b"not gzip", headers={"Content-Encoding": "gzip"}
    )
    assert corrupt_gzip.status_code == 400
    assert "gzip" in http_status(corrupt_gzip).message
    _assert_still_serving(receiver)


def test_content_type_method_and_encoding(receiver: RunningReceiver) -> None:
    assert http_export(receiver.http_endpoint, b"x", "text/plain").status_code == 415
    assert http_export(receiver.http_endpoint, b"", method="GET").status_code == 405
    assert http_export(receiver.http_endpoint, b"", method="PUT").status_code == 405
    brotli = http_export(receiver.http_endpoint, b"x", headers={"Content-Encoding": "br"})
    assert brotli.status_code == 415
    _assert_still_serving(receiver)


@pytest.fixture
def small_receiver(store) -> RunningReceiver:  # type: ignore[no-untyped-def]
    running = RunningReceiver(store, max_request_bytes=64 * 1024, max_inflight_bytes=1024 * 1024)
    yield running
    running.stop()


def test_size_limit_applies_after_decompression(small_receiver: RunningReceiver) -> None:
    big = Evaluation("s", 0, extra={"holonograph.marker.response_text": "a" * 200_000})
    payload = export_request(record_spans([big])).SerializeToString()
    assert len(gzip.compress(payload)) < 64 * 1024 < len(payload)

    http_reply = http_export(small_receiver.http_endpoint, payload, gzip=True)
    assert http_reply.status_code == 413
    assert "after gzip decompression" in http_status(http_reply).message
    assert "Retry-After" not in http_reply.headers

    plain = http_export(small_receiver.http_endpoint, payload)
    assert plain.status_code == 413

    reply = grpc_export(small_receiver.grpc_endpoint, payload, gzip=True)
    assert reply.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reply.retry_delay() is None
    assert (
        small_receiver.store.query("SELECT count() FROM holonograph.evaluation_events").scalar()
        == 0
    )
    _assert_still_serving(small_receiver)


def test_gzip_bomb_is_refused_without_inflating(small_receiver: RunningReceiver) -> None:
    bomb = gzip.compress(b"\0" * (60 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 64 * 1024  # small on the wire, 60 MiB once inflated
    reply = http_export(small_receiver.http_endpoint, bomb, headers={"Content-Encoding": "gzip"})
    assert reply.status_code == 413
    assert "after gzip decompression" in http_status(reply).message
    _assert_still_serving(small_receiver)


def _assert_still_serving(receiver: RunningReceiver) -> None:
    payload = export_request(record_spans([Evaluation("alive", 0, event_id="evt_alive")]))
    reply = http_export(receiver.http_endpoint, payload.SerializeToString())
    assert reply.status_code == 200
    assert (
        receiver.store.query(
            "SELECT count() FROM holonograph.evaluation_events WHERE event_id = 'evt_alive'"
        ).scalar()
        == 1
    )
