"""`holonograph.override` spans through the official OpenTelemetry exporter into the
embedded receiver: the same `lesson_overrides` row as `POST /hil/override` with the same
content, validated at the door, quarantined when bad (the rest of the request stored),
owned by their agent, idempotent, replayable, and seen by `lessons cluster`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.export.request import AGENT_REJECTED, validate_request
from ingest.export.validate import quarantine_record
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.replay import replay_quarantine
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED, OVERRIDE_CONFLICT
from ingest.store.rows import TableRows, write_rows
from processors.lessons import cluster, overrides
from schemas.events import ValidatedBatch
from schemas.store import Store
from schemas.tables import LESSON_OVERRIDES
from tests.conftest import RunningReceiver
from tests.otel_emit import (
    Dim,
    Evaluation,
    Item,
    Override,
    export_http,
    export_request,
    record_spans,
)
from tests.ownership_cases import (
    ATTACKER_TOKEN,
    TENANT,
    VICTIM_TOKEN,
    billing,
    send,
    tokens_file,
)
from tests.processors.lessons.support import Clock, call

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

AT = "2026-07-01T00:05:00Z"
# Every column but how the override came and when it was recorded.
CONTENT = tuple(
    c
    for c in LESSON_OVERRIDES.columns
    if c not in ("source", "emission_stream", "emission_seq", "recorded_at")
)


def _rows(
    store: Store, columns: tuple[str, ...] = LESSON_OVERRIDES.columns
) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in store.query(
            f"SELECT {', '.join(columns)} FROM {LESSON_OVERRIDES.qualified} FINAL ORDER BY event_id"
        ).rows
    ]


def _quarantine(store: Store) -> list[tuple[str, str]]:
    rows = store.query(
        "SELECT span_name, reason FROM holonograph.quarantine FINAL ORDER BY reason"
    ).rows
    return [(str(n), str(r)) for n, r in rows]


def _body(**changes: Any) -> dict[str, Any]:
    """The POST /hil/override body with the content of `Override(...)`'s defaults."""
    item = Override("s", 0)
    body = {
        "agentId": item.agent,
        "surfaceId": item.surface,
        "correlationId": item.correlation_id,
        "originalOutput": item.original,
        "correctedOutput": item.corrected,
        "rationale": item.rationale,
        "tags": list(item.tags),
        "runMode": item.run_mode,
        "at": AT,
    }
    body.update(changes)
    return body


def _export(receiver: RunningReceiver, items: list[Item], seed: int = 1) -> None:
    spans = record_spans(items, seed=seed)
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS


def test_an_override_span_stores_the_row_post_hil_override_stores(
    receiver: RunningReceiver,
) -> None:
    store = receiver.store
    at = {"holonograph.timestamp": AT}
    _export(receiver, [Evaluation("strm_o", 0), Override("strm_o", 1, extra=at)])
    ((span_row),) = _rows(store)
    stored = dict(zip(LESSON_OVERRIDES.columns, span_row, strict=True))
    assert stored["source"] == "otlp"
    assert (stored["emission_stream"], stored["emission_seq"]) == ("strm_o", 1)
    assert json.loads(stored["corrected_output"]) == {"answer": "Let me look up your refund."}
    assert stored["event_id"].startswith("ovr_")  # no event id: a digest of the content
    # Its arrival counts on its stream like every holonograph span's.
    receipts = store.query(
        "SELECT emission_seq, event_id, quarantined FROM holonograph.emission_receipts"
        " ORDER BY emission_seq"
    ).rows
    assert [tuple(r) for r in receipts] == [
        (0, "evt_strm_o_0", False),
        (1, stored["event_id"], False),
    ]

    # The same content over POST /hil/override is the same override: nothing new...
    answer = call(store, overrides.JOB, _body(), Clock()).to_json()
    assert (answer["eventId"], answer["created"]) == (stored["event_id"], False)
    assert _rows(store) == [span_row]
    # ...and for another tenant, the same row but for the tenant and how it came.
    call(store, overrides.JOB, _body(), Clock(), tenant="globex")
    content = tuple(c for c in CONTENT if c != "tenant_id")
    by_tenant = store.query(
        f"SELECT tenant_id, source, {', '.join(content)} FROM {LESSON_OVERRIDES.qualified}"
        " FINAL ORDER BY tenant_id"
    ).rows
    assert [(t, s) for t, s, *_ in by_tenant] == [("default", "otlp"), ("globex", "http")]
    assert by_tenant[0][2:] == by_tenant[1][2:]


def test_a_bad_override_span_is_quarantined_and_the_evaluations_beside_it_are_stored(
    receiver: RunningReceiver,
) -> None:
    store = receiver.store
    bad = Override("strm_b", 1, tags=["fix_tier=prompt", "bad\ttag"])
    no_output = Override(
        "strm_b", 3, correlation_id="corr_001",
        extra={"holonograph.override.corrected_output_json": None},
    )  # fmt: skip
    typo = Override("strm_b", 4, extra={"holonograph.override.rationle": "typo"})
    items: list[Item] = [Evaluation("strm_b", 0), bad, Evaluation("strm_b", 2), no_output, typo]
    rejected, message = send(receiver.grpc_endpoint, items, "", seed=2)
    assert rejected == 3
    assert "holonograph.override.tags: item 1: String should match pattern" in message
    assert _quarantine(store) == [
        ("holonograph.override", "holonograph.override.corrected_output: missing"
         " (or holonograph.override.corrected_output_json)"),
        ("holonograph.override", "holonograph.override.rationle: not an attribute of"
         " holonograph.override"),
        ("holonograph.override", "holonograph.override.tags: item 1: String should match pattern"
         " '^[^\\x00-\\x1f]+$'"),
    ]  # fmt: skip
    assert _rows(store) == []
    events = store.query("SELECT event_id FROM holonograph.evaluation_events ORDER BY 1").rows
    assert [e for (e,) in events] == ["evt_strm_b_0", "evt_strm_b_2"]
    # The rejected spans arrived: their ordinals are no gap.
    receipts = store.query(
        "SELECT emission_seq, quarantined FROM holonograph.emission_receipts ORDER BY 1"
    ).rows
    assert [tuple(r) for r in receipts] == [
        (0, False), (1, True), (2, False), (3, True), (4, True),
    ]  # fmt: skip


@pytest.fixture
def owned_receiver(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    running = RunningReceiver(store, auth_tokens_file=tokens_file(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


def test_an_override_is_its_agents_and_another_agents_token_is_refused(
    owned_receiver: RunningReceiver,
) -> None:
    store = owned_receiver.store
    endpoint = owned_receiver.grpc_endpoint
    mine = Override("victim", 1, event_id="ovr_victim")
    assert send(endpoint, [billing("victim", 0, event_id="evt_victim"), mine], VICTIM_TOKEN, 1) == (
        0,
        "",
    )
    before = _rows(store)
    # The attacker's token may not write billing-triage's overrides at all...
    rejected, message = send(endpoint, [Override("attack", 0)], ATTACKER_TOKEN, seed=2)
    assert rejected == 1 and AGENT_REJECTED in message
    # ...nor reuse an override's, or an evaluation's, event id for its own agent.
    forged = [
        Override("attack", 1, agent="other-agent", event_id="ovr_victim"),
        Override("attack", 2, agent="other-agent", event_id="evt_victim", correlation_id="c2"),
    ]
    rejected, message = send(endpoint, forged, ATTACKER_TOKEN, seed=3)
    assert rejected == 2
    assert f"{EVENT_OWNED}: 'ovr_victim' belongs to agent 'billing-triage'" in message
    assert f"{EVENT_OWNED}: 'evt_victim' belongs to agent 'billing-triage'" in message
    assert _rows(store) == before
    tenants = store.query(f"SELECT DISTINCT tenant_id FROM {LESSON_OVERRIDES.qualified}").rows
    assert tenants == [(TENANT,)]


def test_post_hil_override_keeps_the_same_ownership_rules(receiver: RunningReceiver) -> None:
    """The other way in: an evaluation's id is its agent's, and an override written over
    HTTP claims its id, so a span of another agent cannot take it."""
    store = receiver.store
    _export(receiver, [Evaluation("s", 0, event_id="evt_1", extra={"holonograph.agent.id": "a"})])
    with pytest.raises(overrides.ConflictingOverride, match="belongs to agent 'a'"):
        call(store, overrides.JOB, _body(eventId="evt_1"), Clock())
    call(store, overrides.JOB, _body(eventId="ovr_h"), Clock())
    taken = Override("t", 0, agent="intruder", event_id="ovr_h", correlation_id="c9")
    rejected, message = send(receiver.grpc_endpoint, [taken], "", seed=5)
    assert rejected == 1
    assert f"{EVENT_OWNED}: 'ovr_h' belongs to agent 'billing-triage'" in message
    assert [r[1] for r in _rows(store)] == ["ovr_h"]


def test_a_resend_stores_nothing_new_and_other_content_under_its_id_is_refused(
    receiver: RunningReceiver,
) -> None:
    store = receiver.store
    _export(receiver, [Override("strm_r", 0, event_id="ovr_1")], seed=1)
    first = _rows(store)
    # A retry: other span ids, the same ordinal, in a later request (and twice in one).
    _export(receiver, [Override("strm_r", 0, event_id="ovr_1")] * 2, seed=2)
    assert _rows(store) == first
    assert _quarantine(store) == []
    changed = Override("strm_r", 1, event_id="ovr_1", rationale="Another reason.")
    rejected, message = send(receiver.grpc_endpoint, [changed], "", seed=3)
    assert rejected == 1 and f"{OVERRIDE_CONFLICT}: 'ovr_1'" in message
    assert _rows(store) == first


def test_lessons_cluster_sees_overrides_that_came_as_spans(receiver: RunningReceiver) -> None:
    items: list[Item] = [
        Override(
            "strm_c", n, correlation_id=f"corr_{n:03d}",
            extra={"holonograph.timestamp": f"2026-07-01T00:0{n}:00Z"},
        )
        for n in range(3)
    ]  # fmt: skip
    _export(receiver, items)
    window = {"surfaceId": "classify-intent", "since": "2026-07-01T00:00:00Z"}
    shown = call(
        receiver.store, cluster.JOB, {**window, "until": "2026-07-02T00:00:00Z"}, Clock()
    ).to_json()
    assert shown["eventCount"] == 3
    (found,) = shown["clusters"]
    assert sorted(found["memberIds"]) == sorted(r[1] for r in _rows(receiver.store))
    assert "fix_tier=tool-input-schema" in found["tags"]


async def test_an_override_span_quarantined_before_this_build_replays_into_the_store(
    store: ClickHouseStore,
) -> None:
    """What a receiver without the span quarantined (an unknown span name) is stored by
    replay now, under its first receipt."""
    spans = record_spans([Override("strm_q", 0, event_id="ovr_old")], seed=4)
    request = export_request(spans)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    resource = {"service.name": "billing-triage-agent"}
    from ingest.export.decode import attributes

    record = quarantine_record(
        span, attributes(span.attributes), resource,
        "span name 'holonograph.override' is not in the wire contract", "receiver",
    )  # fmt: skip
    rows = TableRows()
    rows.add(
        ValidatedBatch(tenant_id="default", quarantined=(record,)),
        "rcpt_old",
        dt.datetime(2026, 7, 1, tzinfo=dt.UTC),
    )
    write_rows(store, rows)
    handoff = EmbeddedHandoff(store, max_inflight_bytes=1 << 20)
    report = await replay_quarantine(store, handoff)
    await handoff.close()
    assert (report.replayed, report.still_rejected) == (1, 0)
    assert [r[1] for r in _rows(store)] == ["ovr_old"]
    # Replaying again changes nothing.
    again = EmbeddedHandoff(store, max_inflight_bytes=1 << 20)
    await replay_quarantine(store, again)
    await again.close()
    assert len(_rows(store)) == 1


def test_the_reference_path_reads_override_spans(store: ClickHouseStore) -> None:
    """A request of evaluations and an override is validated by the reference path
    (the hot path leaves every span it does not know to it)."""
    items: list[Item] = [Evaluation("s", 0, dims=[Dim("tool_use", passed=False)]), Override("s", 1)]
    batch = validate_request(export_request(record_spans(items)))
    assert (len(batch.events), len(batch.overrides), batch.quarantined) == (1, 1, ())
