"""The lessons pipeline over HTTP, through one live `serve` with TLS and bearer tokens:
overrides in (the token must own the agent; a re-send writes nothing; bad input is the
envelope with every problem), clusters (the CLI's --json, byte for byte), a fixture
draft that passes on its seed, the gate (reject needs a comment; publish before
approval 409), publication with its change event, a rerun; scopes and tenants apart."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.backends import migrated_store
from tests.holonograph.api.test_api import Served, serve_with_tokens
from tests.processors.lessons.support import AGENT, SURFACE, insert_calls, override_body

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SDK = "tok-acme-sdk-lessons-1"  # write, agent billing-triage only
OTHER = "tok-acme-other-lessons-2"  # write, another agent
READER = "tok-acme-reader-lessons-3"  # read
OPS = "tok-acme-ops-lessons-4"  # read, govern
GLOBEX = "tok-globex-lessons-5"  # every scope, another tenant
WINDOW = {"surfaceId": SURFACE, "since": "2026-07-01", "until": "2026-07-02"}


def _entry(name: str, tenant: str, token: str, agents: str, scopes: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return (
        f'  - name: {name}\n    tenant: {tenant}\n    token_sha256: "{digest}"\n'
        f"    agents: {agents}\n    scopes: {scopes}\n"
    )


def post(served: Served, path: str, body: Any, token: str = OPS) -> requests.Response:
    return served.call(path, body, token)


def ok(served: Served, path: str, body: Any, token: str = OPS) -> Any:
    reply = post(served, path, body, token)
    assert reply.status_code == 200, reply.text
    return reply.json()


@contextlib.contextmanager
def live_serve(root: Path) -> Iterator[Served]:
    data_dir = root / "data"
    with migrated_store(data_dir) as store:
        calls = [(f"evt_{n:03d}", f"corr_{n:03d}", {"tool_use": False}, {"tool_invocations": []})
                 for n in range(4)]  # fmt: skip
        seed = (
            "evt_seed",
            "corr_seed",
            {"tool_use": True},
            {"tool_invocations": ["refund_lookup"]},
        )
        insert_calls(store, [*calls, seed], tenant="acme")
    tokens = (
        "tokens:\n"
        + _entry("acme-sdk", "acme", SDK, f"[{AGENT}]", "[write]")
        + _entry("acme-other", "acme", OTHER, "[other-agent]", "[write]")
        + _entry("acme-reader", "acme", READER, '"*"', "[read]")
        + _entry("acme-ops", "acme", OPS, '"*"', "[read, govern]")
        + _entry("globex", "globex", GLOBEX, '"*"', "[write, read, govern]")
    )
    with serve_with_tokens(root, data_dir, tokens) as live:
        yield live


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with live_serve(tmp_path_factory.mktemp("lessons-api")) as live:
        yield live


def _envelope(reply: requests.Response) -> tuple[int, str]:
    body = reply.json()
    assert set(body) == {"error", "code", "details"}, body
    return reply.status_code, body["code"]


def test_the_loop_over_http(served: Served) -> None:
    # Overrides: the SDK's token owns the agent; another agent's token is refused.
    for n in range(4):
        first = ok(served, "/hil/override", override_body(n), SDK)
        assert first["created"] and first["eventId"].startswith("ovr_")
    resent = ok(served, "/hil/override", override_body(0), SDK)
    assert not resent["created"]
    assert _envelope(post(served, "/hil/override", override_body(5), OTHER)) == (
        403, "agent_not_allowed",
    )  # fmt: skip
    bad = post(served, "/hil/override", override_body(6, tags="no", surfaceId="a b"), SDK)
    assert _envelope(bad) == (400, "invalid_request")
    assert {p.split(":")[0] for p in bad.json()["details"]["problems"]} == {"surfaceId", "tags"}
    conflict = post(
        served, "/hil/override", override_body(0, eventId=first["eventId"], rationale="other"), SDK
    )
    assert _envelope(conflict) == (409, "event_id_conflict")
    assert _envelope(post(served, "/hil/override", override_body(7), READER)) == (
        403, "insufficient_scope",
    )  # fmt: skip
    # Clusters: the CLI's --json for the same request; recording needs govern.
    clustered = ok(served, "/lessons/cluster", WINDOW, READER)
    assert clustered["eventCount"] == 4 and len(clustered["clusters"]) == 1
    flags = [
        "--surface",
        SURFACE,
        "--since",
        "2026-07-01T00:00:00Z",
        "--until",
        "2026-07-02T00:00:00Z",
    ]
    assert served.cli("lessons", "cluster", *flags) == clustered
    # Another tenant never had the surface: not an empty answer, an unknown name.
    other_tenant = post(served, "/lessons/cluster", WINDOW, GLOBEX)
    assert _envelope(other_tenant) == (404, "unknown_surface")
    assert other_tenant.json()["details"]["known"] == []
    refused = post(served, "/lessons/cluster", {**WINDOW, "record": True}, READER)
    assert _envelope(refused) == (403, "insufficient_scope")
    recorded = ok(served, "/lessons/cluster", {**WINDOW, "record": True})
    (cluster,) = recorded["clusters"]
    assert cluster["clusterId"] == clustered["clusters"][0]["clusterId"]
    # A fixture draft from the Guide's inline cluster document, passing on its seed.
    body = {"kind": "fixture", "cluster": cluster, "seedEventId": "evt_seed"}
    drafted = ok(served, "/lessons/draft", body)
    assert drafted["enqueued"] and drafted["draft"]["content"]["seedCheck"]["verdict"] == "pass"
    draft_id = drafted["draftId"]
    by_id = ok(served, "/lessons/draft", {"kind": "fixture", "clusterId": cluster["clusterId"],
                                         "seedEventId": "evt_seed"})  # fmt: skip
    assert by_id["draftId"] == draft_id and not by_id["created"]
    # The gate.
    early = post(served, "/lessons/publish", {"draftId": draft_id})
    assert _envelope(early) == (409, "not_approved")
    no_comment = post(served, "/hil/reject", {"draftId": draft_id, "approverId": "brian"})
    assert _envelope(no_comment) == (400, "invalid_request")
    writer = post(served, "/hil/approve", {"draftId": draft_id, "approverId": "x"}, SDK)
    assert _envelope(writer) == (403, "insufficient_scope")
    assert _envelope(
        post(served, "/hil/approve", {"draftId": draft_id, "approverId": "mallory"}, GLOBEX)
    ) == (404, "draft_not_found")
    approved = ok(served, "/hil/approve", {"draftId": draft_id, "approverId": "brian"})
    assert approved["status"] == "approved"
    assert [h["action"] for h in approved["history"]] == ["drafted", "approved"]
    published = ok(served, "/lessons/publish", {"draftId": draft_id})
    fixture_id = published["artifact"]["artifactId"]
    assert published["changeEvent"]["kind"] == "fixture"
    assert published["changeEvent"]["actor"] == "brian"
    # The published fixture is live: it re-runs over the surface's events.
    days = {"since": WINDOW["since"], "until": WINDOW["until"]}
    rerun = post(served, "/fixtures/rerun", {"fixtureId": fixture_id, **days}, READER)
    assert rerun.status_code == 200 and rerun.headers["x-holonograph-finding"] == "true"
    assert rerun.json()["expected"] == [{"kind": "tool-invoked", "tool": "refund_lookup"}]
    assert rerun.json()["actual"]["counts"]["fail"] == 4
    assert rerun.json()["actual"]["counts"]["pass"] == 1
    elsewhere = post(served, "/fixtures/rerun", {"fixtureId": fixture_id, **days}, GLOBEX)
    assert _envelope(elsewhere) == (404, "fixture_not_found")
