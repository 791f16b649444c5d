"""Tenants apart end to end: bearer tokens on the real transports decide the tenant,
so what tenancy promises holds for what clients can actually send — a token's agent
list is enforced span by span, and one tenant reusing another's event id and stream
(with a final sentinel) changes nothing of the other's rows or stream status."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.export.request import AGENT_REJECTED
from ingest.store.clickhouse import ClickHouseStore
from processors.completeness.job import Selection, read_report
from tests.conftest import RunningReceiver
from tests.ingest.edge.test_auth import grpc_call, http_call
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

ACME = "tok-acme-billing-1"
GLOBEX = "tok-globex-any-2"
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def tokens(path: Path) -> Path:
    digest = hashlib.sha256(ACME.encode()).hexdigest()
    path.write_text(
        "tokens:\n"
        f'  - {{name: acme-billing, tenant: acme, token_sha256: "{digest}",'
        ' agents: ["billing-triage"]}\n'
        f'  - {{name: globex, tenant: globex, token: "{GLOBEX}", agents: "*"}}\n'
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def tenant_receiver(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    running = RunningReceiver(store, auth_tokens_file=tokens(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


def rows(store: ClickHouseStore, sql: str) -> list[dict[str, Any]]:
    return store.query(sql).dicts()


def billing(stream: str, seq: int, **kwargs: Any) -> Evaluation:
    return Evaluation(stream, seq, extra={"holonograph.agent.id": "billing-triage"}, **kwargs)


def test_a_tokens_agent_list_is_enforced_per_span_over_both_transports(
    tenant_receiver: RunningReceiver,
) -> None:
    items = [
        billing("agents", 0, event_id="evt_billing"),
        Evaluation("agents", 1, event_id="evt_support", extra={"holonograph.agent.id": "support"}),
        Sentinel("agents", 2),
    ]
    payload = export_request(record_spans(items, seed=3)).SerializeToString()
    reply = grpc_call(tenant_receiver.grpc_endpoint, payload, ACME)
    assert reply.code is grpc.StatusCode.OK
    answer = PB2ExportTraceServiceResponse.FromString(reply.body or b"")
    assert answer.partial_success.rejected_spans == 1
    assert f"{AGENT_REJECTED}: 'support' is not one of the token's agents" in (
        answer.partial_success.error_message
    )
    over_http = http_call(tenant_receiver.http_endpoint, payload, ACME)  # a retry, over HTTP
    assert over_http.status_code == 200
    assert PB2ExportTraceServiceResponse.FromString(over_http.content).partial_success == (
        answer.partial_success
    )

    store = tenant_receiver.store
    events = rows(store, "SELECT tenant_id, event_id FROM holonograph.evaluation_events FINAL")
    assert events == [{"tenant_id": "acme", "event_id": "evt_billing"}]
    quarantined = rows(store, "SELECT tenant_id, reason FROM holonograph.quarantine FINAL")
    assert len(quarantined) == 1 and quarantined[0]["tenant_id"] == "acme"
    assert quarantined[0]["reason"].startswith(AGENT_REJECTED)


def test_another_tenant_cannot_overwrite_fill_or_close_over_the_wire(
    tenant_receiver: RunningReceiver,
) -> None:
    mine = [
        billing("shared", 0, event_id="evt_x", dims=[Dim("ok", passed=True)]),
        billing("shared", 2),
    ]
    reply = grpc_call(
        tenant_receiver.grpc_endpoint, export_request(record_spans(mine)).SerializeToString(), ACME
    )
    assert reply.code is grpc.StatusCode.OK
    theirs = [
        Evaluation("shared", 0, event_id="evt_x", dims=[Dim("ok", passed=False)]),
        Evaluation("shared", 1),
        Sentinel("shared", 3, final=True),
    ]
    answer = http_call(
        tenant_receiver.http_endpoint,
        export_request(record_spans(theirs, seed=5)).SerializeToString(),
        GLOBEX,
    )
    assert answer.status_code == 200

    store = tenant_receiver.store
    grades = rows(
        store,
        "SELECT tenant_id, passed FROM holonograph.evaluation_dimensions FINAL"
        " WHERE event_id = 'evt_x' ORDER BY tenant_id",
    )
    assert grades == [
        {"tenant_id": "acme", "passed": True},
        {"tenant_id": "globex", "passed": False},
    ]
    (acme,) = read_report(store, NOW, Selection(tenant="acme")).streams
    assert (acme.status, acme.final_seen, acme.missing, acme.delivered) == ("open", False, 1, 2)
    (globex,) = read_report(store, NOW, Selection(tenant="globex")).streams
    assert (globex.status, globex.final_seen, globex.missing) == ("closed-lossy", True, 1)
