"""The lessons pipeline over HTTP, through one live `serve` with TLS and bearer tokens:
overrides in (the token must own the agent; a re-send writes nothing; bad input is the
envelope with every problem), clusters (the CLI's --json, byte for byte), a fixture
draft that passes on its seed, the gate (reject needs a comment; publish before
approval 409), publication with its change event, a rerun; scopes and tenants apart."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from holonograph.cli import cli
from testkit.backends import migrated_store
from tests.holonograph.cli.test_serve import ServeProcess
from tests.ingest.certs import CertificateAuthority
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


class Served:
    def __init__(self, data_dir: Path, url: str, ca_file: Path) -> None:
        self.data_dir, self.url, self.ca_file = data_dir, url, ca_file

    def call(self, path: str, body: Any, token: str = OPS) -> requests.Response:
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "x-holonograph-run-mode": "production",
        }
        return requests.post(
            self.url + path, data=json.dumps(body), headers=headers, verify=str(self.ca_file),
            timeout=60,
        )  # fmt: skip

    def ok(self, path: str, body: Any, token: str = OPS) -> Any:
        reply = self.call(path, body, token)
        assert reply.status_code == 200, reply.text
        return reply.json()

    def cli(self, *args: str) -> Any:
        where = ["--data-dir", str(self.data_dir), "--tenant", "acme", "--json"]
        result = CliRunner().invoke(cli, [*args, *where])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)


@contextlib.contextmanager
def live_serve(root: Path) -> Iterator[Served]:
    data_dir = root / "data"
    with migrated_store(data_dir) as store:
        calls = [(f"evt_{n:03d}", f"corr_{n:03d}", {"tool_use": False}, {"tool_invocations": []})
                 for n in range(4)]  # fmt: skip
        calls.append(
            ("evt_seed", "corr_seed", {"tool_use": True}, {"tool_invocations": ["refund_lookup"]})
        )
        insert_calls(store, calls, tenant="acme")
    ca = CertificateAuthority()
    ca.issue("receiver").write(root / "server.pem", root / "server.key")
    (root / "ca.pem").write_bytes(ca.cert_pem)
    tokens = root / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        + _entry("acme-sdk", "acme", SDK, f"[{AGENT}]", "[write]")
        + _entry("acme-other", "acme", OTHER, "[other-agent]", "[write]")
        + _entry("acme-reader", "acme", READER, '"*"', "[read]")
        + _entry("acme-ops", "acme", OPS, '"*"', "[read, govern]")
        + _entry("globex", "globex", GLOBEX, '"*"', "[write, read, govern]")
    )
    tokens.chmod(0o600)
    server = ServeProcess(
        data_dir,
        "--tls-cert-file", str(root / "server.pem"), "--tls-key-file", str(root / "server.key"),
        "--auth-tokens-file", str(tokens),
    )  # fmt: skip
    try:
        line = next(line for line in server.lines if line.startswith("OTLP/HTTP"))
        match = re.search(r"(https://127\.0\.0\.1:\d+)/v1/traces", line)
        assert match, server.lines
        yield Served(data_dir, match[1], root / "ca.pem")
    finally:
        code, stderr = server.stop()
        assert code == 0, stderr


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
        first = served.ok("/hil/override", override_body(n), SDK)
        assert first["created"] and first["eventId"].startswith("ovr_")
    resent = served.ok("/hil/override", override_body(0), SDK)
    assert not resent["created"]
    assert _envelope(served.call("/hil/override", override_body(5), OTHER)) == (
        403, "agent_not_allowed",
    )  # fmt: skip
    bad = served.call("/hil/override", override_body(6, tags="no", surfaceId="a b"), SDK)
    assert _envelope(bad) == (400, "invalid_request")
    assert {p.split(":")[0] for p in bad.json()["details"]["problems"]} == {"surfaceId", "tags"}
    conflict = served.call(
        "/hil/override", override_body(0, eventId=first["eventId"], rationale="other"), SDK
    )
    assert _envelope(conflict) == (409, "event_id_conflict")
    assert _envelope(served.call("/hil/override", override_body(7), READER)) == (
        403, "insufficient_scope",
    )  # fmt: skip
    # Clusters: the CLI's --json for the same request; recording needs govern.
    clustered = served.ok("/lessons/cluster", WINDOW, READER)
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
    refused = served.call("/lessons/cluster", {**WINDOW, "record": True}, READER)
    assert _envelope(refused) == (403, "insufficient_scope")
    recorded = served.ok("/lessons/cluster", {**WINDOW, "record": True})
    (cluster,) = recorded["clusters"]
    assert cluster["clusterId"] == clustered["clusters"][0]["clusterId"]
    # A fixture draft from the Guide's inline cluster document, passing on its seed.
    body = {"kind": "fixture", "cluster": cluster, "seedEventId": "evt_seed"}
    drafted = served.ok("/lessons/draft", body)
    assert drafted["enqueued"] and drafted["draft"]["content"]["seedCheck"]["verdict"] == "pass"
    draft_id = drafted["draftId"]
    by_id = served.ok("/lessons/draft", {"kind": "fixture", "clusterId": cluster["clusterId"],
                                         "seedEventId": "evt_seed"})  # fmt: skip
    assert by_id["draftId"] == draft_id and not by_id["created"]
    # The gate.
    early = served.call("/lessons/publish", {"draftId": draft_id})
    assert _envelope(early) == (409, "not_approved")
    no_comment = served.call("/hil/reject", {"draftId": draft_id, "approverId": "brian"})
    assert _envelope(no_comment) == (400, "invalid_request")
    writer = served.call("/hil/approve", {"draftId": draft_id, "approverId": "x"}, SDK)
    assert _envelope(writer) == (403, "insufficient_scope")
    assert _envelope(
        served.call("/hil/approve", {"draftId": draft_id, "approverId": "mallory"}, GLOBEX)
    ) == (404, "draft_not_found")
    approved = served.ok("/hil/approve", {"draftId": draft_id, "approverId": "brian"})
    assert approved["status"] == "approved"
    assert [h["action"] for h in approved["history"]] == ["drafted", "approved"]
    published = served.ok("/lessons/publish", {"draftId": draft_id})
    fixture_id = published["artifact"]["artifactId"]
    assert published["changeEvent"]["kind"] == "fixture"
    assert published["changeEvent"]["actor"] == "brian"
    # The published fixture is live: it re-runs over the surface's events.
    days = {"since": WINDOW["since"], "until": WINDOW["until"]}
    rerun = served.call("/fixtures/rerun", {"fixtureId": fixture_id, **days}, READER)
    assert rerun.status_code == 200 and rerun.headers["x-holonograph-finding"] == "true"
    assert rerun.json()["expected"] == [{"kind": "tool-invoked", "tool": "refund_lookup"}]
    assert rerun.json()["actual"]["counts"]["fail"] == 4
    assert rerun.json()["actual"]["counts"]["pass"] == 1
    elsewhere = served.call("/fixtures/rerun", {"fixtureId": fixture_id, **days}, GLOBEX)
    assert _envelope(elsewhere) == (404, "fixture_not_found")
