"""Attacks on identity every path that writes the store must refuse, and how to tell
they changed nothing (docs/security.md, "Event ids and streams have owners").

One tenant, `acme`, three tokens: the victim's may write only `billing-triage`, the
attacker's only `other-agent`, the operator's any agent. `VICTIM` is what the victim
sends first (an event, a second one, a sentinel: a gap-free stream); each `Forgery` is
what a token then sends to change it, and `victim_view(store)` is what must stay as it
was. `tokens_file` writes the three tokens as the receiver reads them. Every forgery
but the invalid span is an all-valid request, which the receiver's hot path takes
(`HotPathSpy` shows it did).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.export import handler
from ingest.export.fast import FastBatch
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED
from processors.completeness.job import Selection, read_report
from schemas.store import Store
from tests.ingest.edge.test_auth import grpc_call, http_call
from tests.otel_emit import Dim, Evaluation, Item, Sentinel, export_request, record_spans

TENANT = "acme"
VICTIM_TOKEN = "tok-acme-billing-victim-1"
ATTACKER_TOKEN = "tok-acme-other-attacker-2"
OPERATOR_TOKEN = "tok-acme-operator-3"
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
VICTIM_EVENT = "evt_01HVICTIM000000000000000"


def tokens_file(path: Path) -> Path:
    digest = hashlib.sha256(VICTIM_TOKEN.encode()).hexdigest()
    path.write_text(
        "tokens:\n"
        f'  - {{name: billing, tenant: {TENANT}, token_sha256: "{digest}",'
        ' agents: ["billing-triage"]}\n'
        f'  - {{name: other, tenant: {TENANT}, token: "{ATTACKER_TOKEN}",'
        ' agents: ["other-agent"]}\n'
        f'  - {{name: operator, tenant: {TENANT}, token: "{OPERATOR_TOKEN}", agents: "*"}}\n'
    )
    path.chmod(0o600)
    return path


def billing(stream: str, seq: int, **kwargs: Any) -> Evaluation:
    return Evaluation(stream, seq, extra={"holonograph.agent.id": "billing-triage"}, **kwargs)


def other(stream: str, seq: int, **kwargs: Any) -> Evaluation:
    return Evaluation(stream, seq, extra={"holonograph.agent.id": "other-agent"}, **kwargs)


VICTIM: list[Item] = [
    billing("victim", 0, event_id=VICTIM_EVENT, dims=[Dim("correctness", passed=True)]),
    billing("victim", 1),
    Sentinel("victim", 2, counters={"offered": 2, "delivered": 2, "dropped": 0, "failed": 0}),
]


@dataclass(frozen=True)
class Forgery:
    name: str
    token: str
    items: list[Item]
    reason: str  # how the rejection's reason starts
    door_rejected: bool = False  # the receiver rejects it before the store edge sees it


FORGERIES = [
    Forgery(
        "reuse-the-event-id-on-its-own-stream",
        ATTACKER_TOKEN,
        [other("attacker", 0, event_id=VICTIM_EVENT, dims=[Dim("correctness", passed=False)])],
        f"{EVENT_OWNED}: {VICTIM_EVENT!r} belongs to agent 'billing-triage', which this token"
        " may not write",
    ),
    Forgery(
        "reuse-the-event-id-on-the-victims-stream",
        ATTACKER_TOKEN,
        [other("victim", 0, event_id=VICTIM_EVENT, dims=[Dim("correctness", passed=False)])],
        f"{STREAM_OWNED}: 'victim' was opened by a token that may write 'billing-triage'",
    ),
    Forgery(
        "forged-sentinel-claiming-998-dropped",
        ATTACKER_TOKEN,
        [Sentinel("victim", 3, counters={"offered": 1000, "delivered": 2, "dropped": 998})],
        STREAM_OWNED,
    ),
    Forgery(
        "forged-final-sentinel", ATTACKER_TOKEN, [Sentinel("victim", 5, final=True)], STREAM_OWNED
    ),
    Forgery("extend-the-victims-stream", ATTACKER_TOKEN, [other("victim", 3)], STREAM_OWNED),
    Forgery(
        "invalid-span-on-the-victims-stream",
        ATTACKER_TOKEN,
        [other("victim", 4, run_mode="staging")],
        "holonograph.run_mode: 'staging' is not one of",
        door_rejected=True,
    ),
    Forgery(
        "any-agent-token-moves-the-event-to-another-agent",
        OPERATOR_TOKEN,
        [other("operator", 0, event_id=VICTIM_EVENT, dims=[Dim("correctness", passed=False)])],
        f"{EVENT_OWNED}: {VICTIM_EVENT!r} belongs to agent 'billing-triage'; a span naming"
        " agent 'other-agent' cannot replace it",
    ),
]


def victim_view(store: Store) -> dict[str, Any]:
    """The victim's event, grades, arrivals and completeness: what no forgery may change."""
    events = store.query(
        "SELECT event_id, agent_id, emission_stream, emission_seq"
        " FROM holonograph.evaluation_events FINAL"
        " WHERE tenant_id = {t:String} AND (event_id = {e:String} OR emission_stream = 'victim')"
        " ORDER BY event_id",
        {"t": TENANT, "e": VICTIM_EVENT},
    ).rows
    grades = store.query(
        "SELECT event_id, dimension_id, passed FROM holonograph.evaluation_dimensions FINAL"
        " WHERE tenant_id = {t:String} AND event_id = {e:String} ORDER BY dimension_id",
        {"t": TENANT, "e": VICTIM_EVENT},
    ).rows
    arrivals = store.query(
        "SELECT emission_seq, kind, final, quarantined, received_count, completeness_dropped"
        " FROM holonograph.emission_records"
        " WHERE tenant_id = {t:String} AND emission_stream = 'victim' ORDER BY emission_seq",
        {"t": TENANT},
    ).rows
    (stream,) = [
        s for s in read_report(store, NOW, Selection(tenant=TENANT, stream="victim")).streams
    ]
    return {
        "events": events,
        "grades": grades,
        "arrivals": arrivals,
        "stream": (stream.status, stream.last_seq, stream.missing, stream.quarantined,
                   stream.final_seen, stream.loss),
    }  # fmt: skip


def quarantined(store: Store) -> list[tuple[str, str]]:
    """(emission stream, reason) of every quarantined span of the tenant."""
    rows = store.query(
        "SELECT ifNull(emission_stream, ''), reason FROM holonograph.quarantine FINAL"
        " WHERE tenant_id = {t:String} ORDER BY emission_stream, reason",
        {"t": TENANT},
    ).rows
    return [(str(s), str(r)) for s, r in rows]


def send(endpoint: str, items: list[Item], token: str, seed: int) -> tuple[int, str]:
    """`items` as one OTLP request with `token`, over gRPC to `host:port` or over HTTP
    (protobuf) to `http://host:port`: the rejected spans and the message of the
    answer's partial success."""
    payload = export_request(record_spans(items, seed=seed)).SerializeToString()
    if endpoint.startswith("http://"):
        answer = http_call(endpoint, payload, token)
        assert answer.status_code == 200, answer.text
        body = answer.content
    else:
        reply = grpc_call(endpoint, payload, token)
        assert reply.code is grpc.StatusCode.OK, reply
        body = reply.body or b""
    partial = PB2ExportTraceServiceResponse.FromString(body).partial_success
    return int(partial.rejected_spans), str(partial.error_message)


class HotPathSpy:
    """What the receiver's export handler made of each request it decoded in this
    process: a `FastBatch` (the hot path) or None (the reference path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken: list[bool] = []
        original = handler.fast_batch

        def spied(*args: Any, **kwargs: Any) -> FastBatch | None:
            found = original(*args, **kwargs)
            self.taken.append(found is not None)
            return found

        monkeypatch.setattr(handler, "fast_batch", spied)
