"""Text the store cannot encode, against a live receiver: a lone surrogate (`\\ud800`,
valid as an OTLP/JSON escape, never valid UTF-8) rejects its span with a reason in
`partial_success` and a quarantine row; the request's other spans are stored, and
nothing is answered 5xx. On protobuf the same code point arrives as the bytes
ED A0 80, which are not UTF-8."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from ingest.export.salvage import SPAN_REASON
from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export, http_export, http_response, to_otlp_json
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

_MARK = "surface-MARK-0001"


def _second_span(document: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    return span


def _with_surrogate(where: str, span: dict[str, Any]) -> None:
    if where == "span-name":
        span["name"] += "\ud800"
    elif where == "attribute-value":
        (surface,) = (a for a in span["attributes"] if a["key"] == "holonograph.surface.id")
        surface["value"]["stringValue"] = "bad\ud800text"
    else:  # an enum given by name (upb's own error path)
        span["kind"] = "\ud800"


def _stored(receiver: RunningReceiver, stream: str) -> list[int]:
    rows = receiver.store.query(
        "SELECT emission_seq FROM holonograph.evaluation_events FINAL"
        " WHERE emission_stream = {s:String} ORDER BY emission_seq",
        {"s": stream},
    ).rows
    return [int(row[0]) for row in rows]


def _quarantined(receiver: RunningReceiver, stream: str) -> list[tuple[int, str]]:
    rows = receiver.store.query(
        "SELECT emission_seq, reason FROM holonograph.quarantine FINAL"
        " WHERE emission_stream = {s:String}",
        {"s": stream},
    ).rows
    return [(int(seq), str(reason)) for seq, reason in rows]


@pytest.mark.parametrize("where", ["span-name", "attribute-value", "span-kind"])
def test_lone_surrogate_in_otlp_json_rejects_its_span(
    receiver: RunningReceiver, where: str
) -> None:
    stream = f"json-surrogate-{where}"
    request = export_request(record_spans([Evaluation(stream, 0), Evaluation(stream, 1)]))
    document = json.loads(to_otlp_json(request))
    _with_surrogate(where, _second_span(document))
    body = json.dumps(document).encode()  # escapes it: "\\ud800"
    assert b"\\ud800" in body
    reply = http_export(receiver.http_endpoint, body, content_type="application/json")
    assert reply.status_code == 200, reply.content
    partial = http_response(reply).partial_success
    assert partial.rejected_spans == 1
    problem = "surrogate"
    assert problem in partial.error_message
    assert _stored(receiver, stream) == [0]
    ((seq, reason),) = _quarantined(receiver, stream)
    assert seq == 1  # it arrived: its ordinal is no gap
    assert problem in reason


def _protobuf_with_surrogate_bytes(stream: str) -> bytes:
    spans = [Evaluation(stream, 0), Evaluation(stream, 1, surface=_MARK)]
    payload = export_request(record_spans(spans)).SerializeToString()
    assert payload.count(_MARK.encode()) == 1
    # Same length, so every length prefix stays valid: "\ud800" as UTF-8 would encode it.
    return payload.replace(_MARK.encode(), b"surface-\xed\xa0\x80-00001")


def test_lone_surrogate_in_protobuf_rejects_its_span(receiver: RunningReceiver) -> None:
    stream = "pb-surrogate-http"
    reply = http_export(receiver.http_endpoint, _protobuf_with_surrogate_bytes(stream))
    assert reply.status_code == 200, reply.content
    assert http_response(reply).partial_success.rejected_spans == 1
    assert _stored(receiver, stream) == [0]
    assert _quarantined(receiver, stream) == [(1, SPAN_REASON)]

    stream = "pb-surrogate-grpc"
    answer = grpc_export(receiver.grpc_endpoint, _protobuf_with_surrogate_bytes(stream))
    assert answer.code is grpc.StatusCode.OK, answer.details
    assert answer.response().partial_success.rejected_spans == 1
    assert "not UTF-8" in answer.response().partial_success.error_message
    assert _stored(receiver, stream) == [0]
    assert _quarantined(receiver, stream) == [(1, SPAN_REASON)]
