"""Identity owned by the agent, against a live embedded `serve` with bearer tokens: a
token of the same tenant cannot replace another agent's event by reusing its id, nor
write on another token's stream (a forged sentinel claiming loss, a final sentinel,
events, even invalid spans); each is rejected in `partial_success` with its reason,
quarantined, and the victim's rows and completeness stay as they were. The owner
itself still re-sends (the latest version wins)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.handoff.embedded import EmbeddedHandoff
from ingest.replay import NOT_REPLAYED_OWNER, replay_quarantine
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED
from tests.conftest import RunningReceiver
from tests.ingest.edge.test_auth import http_call
from tests.ingest.helpers import accept_run_mode_alias
from tests.otel_emit import Dim, Item, Sentinel, export_request, record_spans
from tests.ownership_cases import (
    ATTACKER_TOKEN,
    FORGERIES,
    OPERATOR_TOKEN,
    VICTIM,
    VICTIM_EVENT,
    VICTIM_TOKEN,
    Forgery,
    HotPathSpy,
    billing,
    other,
    quarantined,
    send,
    tokens_file,
    victim_view,
)

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture
def owned_receiver(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    running = RunningReceiver(store, auth_tokens_file=tokens_file(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


# Every forgery over gRPC; the cross-agent overwrite and the forged sentinel over HTTP too.
OVER_HTTP = ("reuse-the-event-id-on-its-own-stream", "forged-sentinel-claiming-998-dropped")
CASES = [pytest.param(f, "grpc", id=f"{f.name}-grpc") for f in FORGERIES] + [
    pytest.param(f, "http", id=f"{f.name}-http") for f in FORGERIES if f.name in OVER_HTTP
]


@pytest.mark.parametrize(("forgery", "transport"), CASES)
def test_a_forgery_is_rejected_with_its_reason_and_changes_nothing(
    owned_receiver: RunningReceiver,
    forgery: Forgery,
    transport: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = owned_receiver.store
    endpoint = owned_receiver.grpc_endpoint if transport == "grpc" else owned_receiver.http_endpoint
    spy = HotPathSpy(monkeypatch)
    assert send(endpoint, VICTIM, VICTIM_TOKEN, seed=1)[0] == 0
    before = victim_view(store)
    assert before["grades"] == [(VICTIM_EVENT, "correctness", True)]
    assert before["stream"][:5] == ("open", 2, 0, 0, False)

    rejected, message = send(endpoint, forgery.items, forgery.token, seed=2)
    # both took the hot path, but for an invalid span, which the reference rejects
    assert spy.taken == [True, not forgery.door_rejected]
    assert rejected == len(forgery.items)
    assert forgery.reason in message
    assert victim_view(store) == before
    (row,) = quarantined(store)
    assert row[1].startswith(forgery.reason)
    if forgery.door_rejected:  # and it does not count as the victim's arrival either
        assert f"; {STREAM_OWNED}: 'victim'" in row[1]


def test_the_owner_resends_its_event_and_the_latest_version_wins(
    owned_receiver: RunningReceiver,
) -> None:
    store = owned_receiver.store
    send(owned_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, seed=1)
    resend = [billing("victim", 0, event_id=VICTIM_EVENT, dims=[Dim("correctness", passed=False)])]
    payload = export_request(record_spans(resend, seed=3)).SerializeToString()
    answer = http_call(owned_receiver.http_endpoint, payload, VICTIM_TOKEN)
    assert answer.status_code == 200
    assert (
        PB2ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans == 0
    )
    assert victim_view(store)["grades"] == [(VICTIM_EVENT, "correctness", False)]
    assert quarantined(store) == []


def test_a_token_that_may_write_every_agent_of_the_opener_continues_its_stream(
    owned_receiver: RunningReceiver,
) -> None:
    store = owned_receiver.store
    send(owned_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, seed=1)
    final = [Sentinel("victim", 3, final=True)]
    assert send(owned_receiver.grpc_endpoint, final, OPERATOR_TOKEN, seed=4)[0] == 0
    assert victim_view(store)["stream"][:5] == ("closed-complete", 3, 0, 0, True)


def test_ids_and_streams_are_claimed_per_tenant_by_their_first_writer(
    owned_receiver: RunningReceiver,
) -> None:
    store = owned_receiver.store
    send(owned_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, seed=1)
    send(owned_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, seed=1)  # a retry claims nothing new
    events = store.query(
        "SELECT tenant_id, event_id, argMin(agent_id, _block_number)"
        " FROM holonograph.event_owners GROUP BY tenant_id, event_id ORDER BY event_id"
    ).rows
    assert events == [("acme", VICTIM_EVENT, "billing-triage"),
                      ("acme", "evt_victim_1", "billing-triage")]  # fmt: skip
    streams = store.query(
        "SELECT tenant_id, emission_stream, any_agent, agents FROM holonograph.stream_owners"
    ).rows
    assert streams == [("acme", "victim", False, ["billing-triage"])]


def test_the_embedded_path_checks_ownership_with_one_lookup_per_commit(
    owned_receiver: RunningReceiver,
) -> None:
    """Many spans in one request cost one query on the owner tables, not one per span."""
    faulty = owned_receiver.faulty
    items: list[Item] = [billing("bulk", seq) for seq in range(200)]
    assert send(owned_receiver.grpc_endpoint, items, VICTIM_TOKEN, seed=5)[0] == 0
    lookups = [q for q in faulty.queries if "holonograph.event_owners" in q]
    assert len(lookups) == 1
    # the new stream is claimed before the rows; the rows claim their ids themselves
    claims = [c for c in faulty.insert_calls if c[0].endswith("_owners")]
    assert claims == [("holonograph.stream_owners", 1)]
    claimed = owned_receiver.store.query(
        "SELECT count() FROM holonograph.event_owners WHERE startsWith(event_id, 'evt_bulk')"
    ).scalar()
    assert claimed == 200


async def test_replay_leaves_ownership_rejections_rejected(
    owned_receiver: RunningReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay runs without the token: it cannot vouch for it, so a span rejected for
    ownership stays rejected even once the reason it was quarantined for is fixed; and a
    replayed span passes the same check as any write (an invalid span that reused the
    victim's event id, quarantined for being invalid, is rejected for ownership once
    the fix makes it valid)."""
    store = owned_receiver.store
    await asyncio.to_thread(send, owned_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, 1)
    invalid, reuse = (f for f in FORGERIES if f.name in (
        "invalid-span-on-the-victims-stream", "reuse-the-event-id-on-its-own-stream"))  # fmt: skip
    invalid_reuse = [other("attacker", 1, event_id=VICTIM_EVENT, run_mode="staging")]
    sent = [(invalid.items, invalid.token), (reuse.items, reuse.token),
            (invalid_reuse, ATTACKER_TOKEN)]  # fmt: skip
    for seed, (items, token) in enumerate(sent, start=2):
        await asyncio.to_thread(send, owned_receiver.grpc_endpoint, items, token, seed)
    before = victim_view(store)
    accept_run_mode_alias(monkeypatch, "staging")  # the fix
    handoff = EmbeddedHandoff(store, max_inflight_bytes=1 << 30)
    try:
        report = await replay_quarantine(store, handoff)
    finally:
        await handoff.close()
    owned = (
        f"{EVENT_OWNED}: {VICTIM_EVENT!r} belongs to agent 'billing-triage';"
        " a span naming agent 'other-agent' cannot replace it"
    )
    assert report.reasons == {NOT_REPLAYED_OWNER: 1, "original span not kept": 1, owned: 1}
    assert (report.replayed, report.still_rejected) == (0, 2)
    assert victim_view(store) == before
