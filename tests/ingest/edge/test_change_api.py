"""Change events over the receiver's HTTP port, with bearer auth: every operator kind
recorded and read back in its token's tenant only, a token restricted to agents acts
only as one of them, the run-mode header is required fail-closed, ids are idempotent,
availability marks answer the Guide's shape, every error is the Guide's envelope, and
a receiver without a store answers 501."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from ingest.edge.auth import Authenticator
from ingest.edge.change_api import ChangeApi, add_change_routes
from ingest.store.clickhouse import ClickHouseStore
from schemas.changes import OPERATOR_KINDS
from tests.conftest import RunningReceiver
from tests.ingest.edge.test_contract_api import ACME, GLOBEX, envelope, headers

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]
AT = "2026-06-10T12:00:00Z"


@pytest.fixture
def api(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    tokens = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(ACME.encode()).hexdigest()
    tokens.write_text(
        "tokens:\n"
        f'  - name: deploy-bot\n    tenant: acme\n    token_sha256: "{digest}"\n    agents: "*"\n'
        f'  - tenant: globex\n    token: "{GLOBEX}"\n    agents: ["reporting"]\n'
    )
    tokens.chmod(0o600)
    running = RunningReceiver(store, auth_tokens_file=tokens)
    yield running
    running.stop()


def post(receiver: RunningReceiver, path: str, body: Any, **options: Any) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(
        f"{receiver.http_endpoint}/holonograph/{path}",
        data=data,
        headers={"Content-Type": "application/json", **headers(**options)},
        timeout=30,
    )


def listed(receiver: RunningReceiver, params: Any = None, **options: Any) -> requests.Response:
    return requests.get(
        f"{receiver.http_endpoint}/holonograph/changes",
        params=params or {},
        headers=headers(**options),
        timeout=30,
    )


def test_every_kind_recorded_and_read_back_in_its_tenant(api: RunningReceiver) -> None:
    for kind in OPERATOR_KINDS:
        done = post(api, "changes", {"surfaceId": "classify-intent", "kind": kind, "at": AT,
                                     "description": f"{kind} over http"})  # fmt: skip
        assert done.status_code == 200, done.text
        body = done.json()
        assert (body["tenantId"], body["kind"], body["created"]) == ("acme", kind, True)
        assert body["actor"] == "deploy-bot"  # the token's name, when the body names none
    theirs = post(api, "changes", {"agentId": "reporting", "kind": "deploy", "at": AT,
                                   "description": "globex deploy"}, token=GLOBEX)  # fmt: skip
    assert theirs.status_code == 200, theirs.text
    mark = {"mode": "single", "agentId": "reporting", "lightSourceId": "globex/model",
            "transition": "unavailable", "at": AT}  # fmt: skip
    assert post(api, "availability", mark, token=GLOBEX).status_code == 200
    acme = listed(api).json()
    assert acme["tenantId"] == "acme"
    assert sorted(c["kind"] for c in acme["changes"]) == sorted(OPERATOR_KINDS)
    assert {c["tenantId"] for c in acme["changes"]} == {"acme"}
    globex = listed(api, {"agentId": "reporting"}, token=GLOBEX).json()["changes"]
    assert sorted(c["kind"] for c in globex) == ["availability", "deploy"]
    assert {c["tenantId"] for c in globex} == {"globex"}
    only = listed(api, [("kind", "vendor"), ("kind", "model")]).json()["changes"]
    assert sorted(c["kind"] for c in only) == ["model", "vendor"]


def test_a_restricted_token_acts_only_as_its_agents(api: RunningReceiver) -> None:
    change = {"kind": "deploy", "at": AT, "description": "x"}
    unnamed = post(api, "changes", {**change, "surfaceId": "s"}, token=GLOBEX)
    assert envelope(unnamed) == (403, "agent_required", {"agents": ["reporting"]})
    other = post(api, "changes", {**change, "agentId": "billing"}, token=GLOBEX)
    assert envelope(other) == (403, "agent_not_allowed", {"agentId": "billing"})
    mark = {"mode": "single", "lightSourceId": "acme/m", "transition": "unavailable"}
    assert envelope(post(api, "availability", mark, token=GLOBEX))[1] == "agent_required"
    assert envelope(listed(api, token=GLOBEX))[1] == "agent_required"
    assert post(api, "changes", {**change, "agentId": "reporting"}, token=GLOBEX).ok
    assert listed(api, {"agentId": "reporting"}, token=GLOBEX).ok


def test_ids_are_idempotent_and_conflicts_refused(api: RunningReceiver) -> None:
    change = {"agentId": "billing", "kind": "config", "at": AT, "description": "flag on",
              "id": "cfg-7"}  # fmt: skip
    first, again = post(api, "changes", change), post(api, "changes", change)
    assert (first.json()["created"], again.json()["created"]) == (True, False)
    assert again.json()["changeId"] == "cfg-7"
    conflict = post(api, "changes", {**change, "description": "flag off"})
    status, code, details = envelope(conflict)
    assert (status, code, details) == (409, "change_conflict", {"id": "cfg-7"})
    assert len(listed(api).json()["changes"]) == 1


def test_availability_marks_answer_the_guides_shape(api: RunningReceiver) -> None:
    paired = post(api, "availability", {
        "mode": "paired", "lightSourceId": "openai/gpt-5", "unreachableFrom": AT,
        "unreachableUntil": "2026-06-10T14:00:00Z", "reason": "vendor-outage",
    })  # fmt: skip
    assert paired.status_code == 200, paired.text
    body = paired.json()
    assert body["eventIds"] == [body["changeId"]] and body["kind"] == "availability"
    assert body["pairing"] == {"pairingId": body["changeId"], "unreachableFrom": AT,
                               "unreachableUntil": "2026-06-10T14:00:00Z"}  # fmt: skip
    single = post(api, "availability", {"mode": "single", "surfaceId": "classify-intent",
                                        "transition": "unavailable"})  # fmt: skip
    assert single.status_code == 200 and single.json()["pairing"] is None
    # No time given: the receiver's clock says when (the Guide's "just became unavailable").
    assert single.json()["at"].endswith("Z")
    marks = listed(api, {"kind": "availability"}).json()["changes"]
    assert len(marks) == 2


def test_every_error_is_the_guides_envelope(api: RunningReceiver) -> None:
    change = {"surfaceId": "s", "kind": "deploy", "at": AT, "description": "x"}
    assert envelope(post(api, "changes", change, run_mode=None))[:2] == (400, "run_mode_missing")
    assert envelope(post(api, "changes", change, run_mode="prod"))[:2] == (400, "run_mode_unknown")
    status, code, _ = envelope(post(api, "changes", change, token=None))
    assert (status, code) == (401, "unauthenticated")
    bad = post(api, "changes", {**change, "kind": "rollback", "at": "yesterday"})
    status, code, details = envelope(bad)
    assert (status, code) == (400, "invalid_change") and len(details["problems"]) == 2
    assert envelope(post(api, "changes", b"{"))[:2] == (400, "invalid_json")
    huge = post(api, "changes", {**change, "description": "x" * 70_000})
    assert envelope(huge)[:2] == (413, "payload_too_large")
    assert envelope(listed(api, {"kind": "rollback"}))[:2] == (400, "kind_unknown")
    assert envelope(listed(api, {"since": "yesterday"}))[:2] == (400, "invalid_time")
    naive = listed(api, {"until": "2026-06-10T12:00:00"})  # no offset: which zone?
    assert envelope(naive)[:2] == (400, "invalid_time") and "no UTC offset" in naive.json()["error"]
    assert listed(api).json()["changes"] == []


def test_since_and_until_take_the_guides_dates_as_every_endpoint_does(
    api: RunningReceiver,
) -> None:
    change = {"surfaceId": "s", "kind": "deploy", "at": AT, "description": "x"}
    assert post(api, "changes", change).status_code == 200
    day = listed(api, {"since": "2026-06-10", "until": "2026-06-11"}).json()["changes"]
    assert [c["at"] for c in day] == [AT]  # a date is midnight UTC
    assert listed(api, {"since": "2026-06-11"}).json()["changes"] == []
    assert listed(api, {"until": "2026-06-10"}).json()["changes"] == []


def test_a_receiver_without_a_store_answers_501() -> None:
    async def call() -> tuple[int, dict[str, Any]]:
        application = web.Application()
        add_change_routes(application, ChangeApi(Authenticator(None), None))
        async with TestClient(TestServer(application)) as client:
            answer = await client.post(
                "/holonograph/changes",
                json={"surfaceId": "s", "kind": "deploy", "at": AT, "description": "x"},
                headers={"x-holonograph-run-mode": "production"},
            )
            return answer.status, await answer.json()

    status, body = asyncio.run(call())
    assert status == 501 and body["code"] == "not_wired"
    assert "holonograph change record --store URL" in body["error"]
