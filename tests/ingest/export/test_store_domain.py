"""Values the store cannot hold are refused at the door, through the real transports
and the real store: each is one quarantined span with a precise reason, counted in
partial success, and every valid span around it (in the same request and from other
clients at the same time) is stored exactly once with its receipt."""

from __future__ import annotations

import datetime as dt
import json
from functools import partial

import pytest

from tests.conftest import RunningReceiver
from tests.ingest.helpers import http_export, http_status
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans
from tests.values import (
    Mix,
    arrived_quarantined,
    nested,
    quarantine_reasons,
    send,
    send_concurrently,
    set_attribute,
    stored_once,
    valid_traffic,
)

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

TRANSPORTS = ("grpc", "http-protobuf", "http-json")


def _endpoint(receiver: RunningReceiver, transport: str) -> str:
    return receiver.grpc_endpoint if transport == "grpc" else receiver.http_endpoint


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_value_class_is_quarantined_and_nobody_else_notices(
    receiver: RunningReceiver, transport: str
) -> None:
    endpoint = _endpoint(receiver, transport)
    mix = Mix(f"bad-{transport}")
    others = valid_traffic(f"other-{transport}", clients=8, spans=5)
    sends = [partial(send, transport, endpoint, mix.request())]
    sends += [partial(send, transport, endpoint, request) for request in others]
    answers = send_concurrently(sends)

    status, response = answers[0]
    assert status == "OK"
    partial_success = response.partial_success
    assert partial_success.rejected_spans == len(mix.spoiled)
    for case in mix.spoiled[:5]:  # the first five are named in the answer
        assert case.reason in partial_success.error_message
    for status, other in answers[1:]:
        assert status == "OK"
        assert not other.HasField("partial_success")

    reasons = quarantine_reasons(receiver.store, mix.stream)
    assert reasons.keys() == mix.reasons().keys()
    for seq, reason in mix.reasons().items():
        assert reasons[seq].startswith(reason), (seq, reasons[seq])
    # Every spoiled span carried a valid ordinal: it arrived, so it is not a gap.
    assert arrived_quarantined(receiver.store, mix.stream) == set(mix.reasons())

    streams = [mix.ok] + [f"other-{transport}-{c}" for c in range(8)]
    stored = stored_once(receiver.store, streams)
    assert stored[mix.ok] == (2, 4)  # 2 events, 2 sentinels, each received once
    assert all(stored[s] == (5, 5) for s in streams[1:])
    assert (
        receiver.store.query(
            "SELECT count() FROM holonograph.evaluation_events WHERE emission_stream = {s:String}",
            {"s": mix.stream},
        ).scalar()
        == 0
    )


def test_a_resource_the_store_cannot_hold_rejects_its_evaluations_only(
    receiver: RunningReceiver,
) -> None:
    request = export_request(record_spans([Evaluation("res", 0), Sentinel("res", 1)], seed=3))
    deep = request.resource_spans[0].resource
    pair = deep.attributes.add()
    pair.key = "deployment.tree"
    pair.value.CopyFrom(nested(17))
    fine = export_request(record_spans([Evaluation("res-fine", 0)], seed=4))
    request.resource_spans.extend(fine.resource_spans)

    status, response = send("grpc", receiver.grpc_endpoint, request)
    assert status == "OK"
    assert response.partial_success.rejected_spans == 1
    assert quarantine_reasons(receiver.store, "res") == {
        0: "resource attributes: deployment.tree: nested deeper than 16 levels of arrays"
        " and kvlists"
    }
    assert stored_once(receiver.store, ["res", "res-fine"]) == {
        "res": (0, 1),  # the sentinel (resources are not stored with sentinels)
        "res-fine": (1, 1),
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_values_at_the_edges_of_the_domain_are_stored_exactly(
    receiver: RunningReceiver, transport: str
) -> None:
    stamps = {
        0: "1900-01-01T00:00:00Z",
        1: "2262-04-11T23:47:16.854775Z",
        2: "1969-12-31T23:59:59.5Z",  # before the epoch, with a fraction of a second
        3: "2026-06-30T23:30:00-05:00",
    }
    items: list[Evaluation | Sentinel] = [
        Evaluation("edge", seq, extra={"holonograph.timestamp": text})
        for seq, text in stamps.items()
    ]
    items.append(Evaluation("edge", 4, extra={"holonograph.tokens.input": 2**63 - 1}))
    items.append(Sentinel("edge", 5, interval_ms=0))
    request = export_request(record_spans(items, seed=5))
    set_attribute(request.resource_spans[0].scope_spans[0].spans[4], "holonograph.x", nested(16))

    status, response = send(transport, _endpoint(receiver, transport), request)
    assert status == "OK"
    assert not response.HasField("partial_success")
    rows = dict(
        receiver.store.query(
            "SELECT emission_seq, timestamp FROM holonograph.evaluation_events FINAL"
            " WHERE emission_seq < 4"
        ).rows
    )
    assert rows == {
        0: dt.datetime(1900, 1, 1),
        1: dt.datetime(2262, 4, 11, 23, 47, 16, 854775),
        2: dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
        3: dt.datetime(2026, 7, 1, 4, 30),
    }
    tokens, extras = receiver.store.query(
        "SELECT tokens_input, extras FROM holonograph.evaluation_events FINAL"
        " WHERE emission_seq = 4"
    ).rows[0]
    assert tokens == 2**63 - 1
    depth, value = 0, json.loads(extras)["holonograph.x"]
    while isinstance(value, dict):
        depth, value = depth + 1, value["k"]
    assert (depth, value) == (16, "leaf")
    assert (
        receiver.store.query(
            "SELECT sentinel_interval_ms FROM holonograph.emission_receipts WHERE emission_seq = 5"
        ).scalar()
        == 0
    )


def test_a_deeply_nested_json_body_is_a_bad_request(receiver: RunningReceiver) -> None:
    body = b'{"resourceSpans": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}"
    answer = http_export(receiver.http_endpoint, body, "application/json")
    assert answer.status_code == 400
    assert "nested too deeply" in http_status(answer).message
    assert "Retry-After" not in answer.headers
    # ... and the receiver goes on serving.
    request = export_request(record_spans([Evaluation("after", 0)], seed=6))
    assert send("http-json", receiver.http_endpoint, request)[0] == "OK"
