"""Tenants apart and one event id = one event, through the real receiver and store.

Requests are exported as a `Principal` through the seam the edge calls after it
authenticated a token (`ExportHandler.export(..., principal)` on the service's loop);
requests without a principal go over the wire as the anonymous (`default`) tenant.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from ingest.export.handler import ExportOutcome
from ingest.export.principal import Principal
from ingest.export.request import AGENT_REJECTED
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.replay import NOT_REPLAYED_AGENT, replay_quarantine
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.rows import ingest_version
from processors.completeness.job import Selection, read_report, recompute_completeness
from processors.series.cells import SeriesQuery, event_count, fetch_cells
from schemas.events import ValidatedBatch
from tests.conftest import RunningReceiver
from tests.ingest.helpers import accept_run_mode_alias, grpc_export
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

ACME = Principal(tenant_id="acme", name="acme-prod")
GLOBEX = Principal(tenant_id="globex", name="globex-prod")
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def export_as(
    receiver: RunningReceiver, request: PB2ExportTraceServiceRequest, principal: Principal
) -> ExportOutcome:
    """What the edge does once a token authenticated the request."""
    exporter = receiver.service._exporter
    assert exporter is not None
    outcome: ExportOutcome = receiver.call(exporter.export(request, request.ByteSize(), principal))
    return outcome


def rows(store: ClickHouseStore, sql: str, **params: Any) -> list[dict[str, Any]]:
    return store.query(sql, params).dicts()


def ns(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp()) * 1_000_000_000


def test_one_tenant_cannot_overwrite_close_or_fill_another_tenants_data(
    receiver: RunningReceiver,
) -> None:
    store = receiver.store
    acme = [
        Evaluation("strm", 0, event_id="evt_shared", dims=[Dim("correctness", passed=True)]),
        Evaluation("strm", 2),
    ]
    outcome = export_as(receiver, export_request(record_spans(acme, seed=1)), ACME)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (2, 0)

    # Globex reuses Acme's event id and stream name, fills Acme's gap (seq 1), closes
    # the stream with a final sentinel and sends a span that is quarantined.
    globex = [
        Evaluation("strm", 0, event_id="evt_shared", dims=[Dim("correctness", passed=False)]),
        Evaluation("strm", 1),
        Evaluation("strm", 2, run_mode="staging"),
        Sentinel("strm", 3, final=True),
    ]
    outcome = export_as(receiver, export_request(record_spans(globex, seed=2)), GLOBEX)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (3, 1)

    shared = rows(
        store,
        "SELECT tenant_id, passed FROM holonograph.evaluation_dimensions FINAL"
        " WHERE event_id = 'evt_shared' ORDER BY tenant_id",
    )
    assert shared == [
        {"tenant_id": "acme", "passed": True},
        {"tenant_id": "globex", "passed": False},
    ]
    quarantined = rows(store, "SELECT tenant_id FROM holonograph.quarantine FINAL")
    assert quarantined == [{"tenant_id": "globex"}]

    report = read_report(store, NOW, Selection(tenant="acme"))
    (stream,) = report.streams
    assert (stream.tenant_id, stream.status, stream.final_seen) == ("acme", "open", False)
    assert (stream.expected, stream.delivered, stream.missing) == (3, 2, 1)
    assert stream.quarantined == 0
    (theirs,) = read_report(store, NOW, Selection(tenant="globex")).streams
    assert (theirs.status, theirs.delivered, theirs.quarantined) == ("closed-complete", 4, 1)

    recompute_completeness(store, NOW)
    status = rows(
        store,
        "SELECT tenant_id, status, missing FROM holonograph.stream_status FINAL ORDER BY tenant_id",
    )
    assert status == [
        {"tenant_id": "acme", "status": "open", "missing": 1},
        {"tenant_id": "globex", "status": "closed-complete", "missing": 0},
    ]


def test_an_evaluation_of_an_agent_the_token_may_not_write_is_rejected(
    receiver: RunningReceiver,
) -> None:
    billing = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}), name="billing")
    items = [
        Evaluation("s", 0, event_id="evt_ok", extra={"holonograph.agent.id": "billing-triage"}),
        Evaluation("s", 1, event_id="evt_other", extra={"holonograph.agent.id": "support-bot"}),
        Evaluation("s", 2, event_id="evt_anonymous"),
        Sentinel("s", 3),
    ]
    outcome = export_as(receiver, export_request(record_spans(items)), billing)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (2, 2)
    assert f"{AGENT_REJECTED}: 'support-bot' is not one of the token's agents" in (
        outcome.error_message
    )
    assert f"{AGENT_REJECTED}: no agent id, and the token lists its agents" in (
        outcome.error_message
    )

    store = receiver.store
    events = rows(store, "SELECT tenant_id, event_id FROM holonograph.evaluation_events FINAL")
    assert events == [{"tenant_id": "acme", "event_id": "evt_ok"}]
    quarantined = rows(
        store,
        "SELECT tenant_id, emission_seq, reason FROM holonograph.quarantine FINAL"
        " ORDER BY emission_seq",
    )
    assert [(q["tenant_id"], q["emission_seq"]) for q in quarantined] == [("acme", 1), ("acme", 2)]
    assert all(q["reason"].startswith(AGENT_REJECTED) for q in quarantined)
    arrived = rows(
        store,
        "SELECT emission_seq, quarantined FROM holonograph.emission_records ORDER BY emission_seq",
    )
    assert [(r["emission_seq"], r["quarantined"]) for r in arrived] == [
        (0, False),
        (1, True),
        (2, True),
        (3, False),
    ]


def test_the_same_event_id_twice_in_one_request(receiver: RunningReceiver) -> None:
    items = [
        Evaluation("s", 0, event_id="evt_twice", end_ns=ns("2026-11-30T13:00:00+00:00")),
        # the same event again (its own span ids): one event
        Evaluation("s", 0, event_id="evt_twice", end_ns=ns("2026-11-30T13:00:00+00:00")),
        Evaluation("s", 1, event_id="evt_clash", dims=[Dim("correctness", passed=True)]),
        Evaluation("s", 2, event_id="evt_clash", dims=[Dim("correctness", passed=False)]),
    ]
    spans = record_spans(items)
    reply = grpc_export(receiver.grpc_endpoint, export_request(spans).SerializeToString())
    assert reply.code is grpc.StatusCode.OK
    partial = reply.response().partial_success
    assert partial.rejected_spans == 1
    first = f"{spans[2].context.span_id:016x}"
    assert (
        f"holonograph.event.id: 'evt_clash' was already sent in this request by span {first}"
        " with different content" in partial.error_message
    )

    store = receiver.store
    stored = rows(
        store,
        "SELECT event_id, count() AS n FROM holonograph.evaluation_events"
        " GROUP BY event_id ORDER BY event_id",
    )
    assert stored == [{"event_id": "evt_clash", "n": 1}, {"event_id": "evt_twice", "n": 1}]
    grade = rows(
        store,
        "SELECT passed FROM holonograph.evaluation_dimensions FINAL WHERE event_id = 'evt_clash'",
    )
    assert grade == [{"passed": True}]  # the first span's; the conflicting one is quarantined
    (q,) = rows(store, "SELECT span_id, emission_seq, reason FROM holonograph.quarantine FINAL")
    assert (q["span_id"], q["emission_seq"]) == (f"{spans[3].context.span_id:016x}", 2)
    assert "'evt_clash'" in q["reason"]
    arrived = rows(
        store,
        "SELECT emission_seq, quarantined, received_count FROM holonograph.emission_records"
        " ORDER BY emission_seq",
    )
    assert [tuple(r.values()) for r in arrived] == [(0, False, 1), (1, False, 1), (2, True, 1)]


def test_a_backfill_over_ten_years_in_one_request_is_stored(receiver: RunningReceiver) -> None:
    months = [dt.datetime(2016 + m // 12, m % 12 + 1, 15, tzinfo=dt.UTC) for m in range(120)]
    items = [
        Evaluation("backfill", seq, end_ns=int(month.timestamp()) * 1_000_000_000)
        for seq, month in enumerate(months)
    ]
    reply = grpc_export(
        receiver.grpc_endpoint, export_request(record_spans(items)).SerializeToString()
    )
    assert reply.code is grpc.StatusCode.OK
    assert reply.response().partial_success.rejected_spans == 0

    store = receiver.store
    span = rows(
        store,
        "SELECT count() AS n, min(timestamp) AS first, max(timestamp) AS last"
        " FROM holonograph.evaluation_events FINAL",
    )
    assert span == [{"n": 120, "first": months[0].replace(tzinfo=None),
                     "last": months[-1].replace(tzinfo=None)}]  # fmt: skip
    recompute_completeness(store, NOW)  # windows of all 120 months in one insert
    windows = store.query(
        "SELECT uniqExact(toStartOfMonth(bucket_start)) FROM holonograph.completeness_windows"
        " FINAL WHERE bucket = 'day' AND scope = 'stream'"
    ).scalar()
    assert windows == 120


@pytest.mark.parametrize(
    ("first_at", "resent_at"),
    [
        ("2026-03-10T10:59:30+00:00", "2026-03-10T11:00:30+00:00"),  # the next hour
        ("2026-01-31T23:59:30+00:00", "2026-02-01T00:00:30+00:00"),  # the next month
    ],
)
def test_a_resend_with_another_timestamp_counts_once(
    receiver: RunningReceiver, first_at: str, resent_at: str
) -> None:
    other = Evaluation("s", 1, event_id="evt_other", end_ns=ns(first_at))
    first = Evaluation("s", 0, event_id="evt_judged", dims=[Dim("correctness", passed=False)],
                       end_ns=ns(first_at))  # fmt: skip
    resent = Evaluation("s", 0, event_id="evt_judged", dims=[Dim("correctness", passed=True)],
                        end_ns=ns(resent_at))  # fmt: skip
    for request in ([first, other], [resent]):
        payload = export_request(record_spans(request)).SerializeToString()
        assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.OK

    store = receiver.store
    for table in ("evaluation_events", "evaluation_dimensions"):
        assert store.query(f"SELECT count() FROM holonograph.{table} FINAL").scalar() == 2
    latest = rows(
        store,
        "SELECT passed, timestamp FROM holonograph.evaluation_dimensions FINAL"
        " WHERE event_id = 'evt_judged'",
    )
    resent_time = dt.datetime.fromisoformat(resent_at).replace(tzinfo=None)
    assert latest == [{"passed": True, "timestamp": resent_time}]  # the latest received

    (stream,) = read_report(store, NOW, Selection()).streams
    assert (stream.expected, stream.delivered, stream.duplicates) == (2, 2, 1)
    since = dt.datetime.fromisoformat(first_at) - dt.timedelta(days=1)
    query = SeriesQuery("classify-intent", since, since + dt.timedelta(days=3))
    assert event_count(store, query) == 2
    cells = fetch_cells(store, query, "correctness", binary=True)
    assert (sum(c.n for c in cells), sum(c.y for c in cells)) == (2, 2)


async def test_of_two_versions_in_one_group_commit_the_later_received_wins(
    store: ClickHouseStore,
) -> None:
    def version(passed: bool, seed: int) -> ValidatedBatch:
        from ingest.export.request import validate_request

        item = Evaluation("s", 0, event_id="evt_v", dims=[Dim("correctness", passed=passed)])
        return validate_request(export_request(record_spans([item], seed=seed)))

    handoff = EmbeddedHandoff(store, max_inflight_bytes=1 << 30, clock=lambda: NOW)
    first = asyncio.create_task(handoff.submit(handoff.prepare(version(False, 1)), "r1", 1))
    later = asyncio.create_task(handoff.submit(handoff.prepare(version(True, 2)), "r2", 1))
    await asyncio.gather(first, later)
    await handoff.close()
    # One commit, one receipt time: the request's place in the commit decides (the
    # insert keeps both versions; FINAL and the merges keep the later one).
    versions = store.query(
        "SELECT ingest_version FROM holonograph.evaluation_events ORDER BY ingest_version"
    ).rows
    assert versions == [(ingest_version(NOW, 0),), (ingest_version(NOW, 1),)]
    final = "SELECT ingest_version FROM holonograph.evaluation_events FINAL"
    assert store.query(final).rows == [(ingest_version(NOW, 1),)]
    winner = rows(store, "SELECT passed FROM holonograph.evaluation_dimensions FINAL")
    assert winner == [{"passed": True}]


async def test_replay_keeps_the_tenant_and_leaves_agent_rejections_rejected(
    receiver: RunningReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}))
    agent = {"holonograph.agent.id": "billing-triage"}
    items = [
        Evaluation("s", 0, event_id="evt_prod", run_mode="prod", extra=agent),
        Evaluation("s", 1, event_id="evt_foreign", extra={"holonograph.agent.id": "other"}),
    ]
    outcome = await asyncio.to_thread(
        export_as, receiver, export_request(record_spans(items)), token
    )
    assert outcome.rejected_spans == 2
    accept_run_mode_alias(monkeypatch, "prod")  # the fix
    store = receiver.store
    handoff = EmbeddedHandoff(store, max_inflight_bytes=1 << 30)
    try:
        report = await replay_quarantine(store, handoff)
    finally:
        await handoff.close()
    assert (report.seen, report.replayed, report.still_rejected) == (2, 1, 1)
    assert report.reasons == {NOT_REPLAYED_AGENT: 1}
    events = rows(store, "SELECT tenant_id, event_id FROM holonograph.evaluation_events FINAL")
    assert events == [{"tenant_id": "acme", "event_id": "evt_prod"}]
    receipts = rows(
        store,
        "SELECT tenant_id, emission_seq, quarantined, received_count"
        " FROM holonograph.emission_records ORDER BY emission_seq",
    )
    assert [tuple(r.values()) for r in receipts] == [("acme", 0, False, 1), ("acme", 1, True, 1)]
