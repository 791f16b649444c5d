"""`POST /holonograph/contract` and `GET /holonograph/contract` on the receiver's HTTP
port, with bearer auth: a token's tenant owns what it registers, a token restricted
to agents registers only those, the run-mode header is required fail-closed, every
error is the Guide's envelope, and a registration is enforced by ingest at once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.otel_emit import Dim, Evaluation, export_http, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "contracts" / "billing-triage.json"
ACME = "tok-acme-0123456789"
GLOBEX = "tok-globex-9876543210"  # may write agent "reporting" only


@pytest.fixture
def api(store: ClickHouseStore, tmp_path: Path) -> Iterator[RunningReceiver]:
    tokens = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(ACME.encode()).hexdigest()
    tokens.write_text(
        "tokens:\n"
        f'  - tenant: acme\n    token_sha256: "{digest}"\n    agents: "*"\n'
        f'  - tenant: globex\n    token: "{GLOBEX}"\n    agents: ["reporting"]\n'
    )
    tokens.chmod(0o600)
    running = RunningReceiver(store, auth_tokens_file=tokens)
    yield running
    running.stop()


def headers(token: str | None = ACME, run_mode: str | None = "production") -> dict[str, str]:
    found = {"Authorization": f"Bearer {token}"} if token else {}
    return found | ({"x-holonograph-run-mode": run_mode} if run_mode is not None else {})


def post(receiver: RunningReceiver, body: Any, **options: Any) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(
        f"{receiver.http_endpoint}/holonograph/contract",
        data=data,
        headers={"Content-Type": "application/json", **headers(**options)},
        timeout=30,
    )


def get(receiver: RunningReceiver, agent: str | None, **options: Any) -> requests.Response:
    params = {"agentId": agent} if agent else {}
    return requests.get(
        f"{receiver.http_endpoint}/holonograph/contract",
        params=params,
        headers=headers(**options),
        timeout=30,
    )


def example() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return document


def envelope(response: requests.Response) -> tuple[int, str, dict[str, Any]]:
    body = response.json()
    assert set(body) == {"error", "code", "details"} and body["error"]
    return response.status_code, body["code"], body["details"]


def contracts_stored(store: ClickHouseStore) -> list[tuple[str, str]]:
    return [
        (str(t), str(a))
        for t, a in store.query(
            "SELECT tenant_id, agent_id FROM holonograph.contracts FINAL ORDER BY tenant_id"
        ).rows
    ]


def test_register_replace_and_read_back_over_http(
    api: RunningReceiver, store: ClickHouseStore
) -> None:
    first = post(api, example())
    assert first.status_code == 200, first.text
    v1 = first.json()
    assert (v1["agentId"], v1["created"], v1["previousVersionId"]) == ("billing-triage", True, None)
    assert v1["surfaces"][0]["dimensionCount"] == 2
    document = example()
    document["surfaces"][0]["dimensions"][1] = {
        "id": "schema-valid", "type": "boolean", "supersedes": "schema-conformance"
    }  # fmt: skip
    v2 = post(api, document).json()
    assert v2["previousVersionId"] == v1["versionId"]
    assert v2["removed"] == [
        {"altitude": "dimension", "surfaceId": "classify-intent", "id": "schema-conformance",
         "supersededBy": {"altitude": "dimension", "id": "schema-valid"}}
    ]  # fmt: skip
    read = get(api, "billing-triage")
    assert read.status_code == 200 and read.json() == {
        k: v for k, v in v2.items() if k != "created"
    }
    old = get(api, "billing-triage", run_mode="eval").json()
    assert old["versionId"] == v2["versionId"]
    assert contracts_stored(store) == [("acme", "billing-triage")] * 2

    # ingest enforces the new version at once: `schema-conformance` is undeclared now
    spans = record_spans(
        [Evaluation("strm_h", 0, dims=[Dim("schema-conformance", passed=True)],
                    extra={"holonograph.agent.id": "billing-triage"})]
    )  # fmt: skip
    export = export_http(api.http_endpoint, spans, headers={"Authorization": f"Bearer {ACME}"})
    assert export is SpanExportResult.SUCCESS
    row = store.query(
        "SELECT contract_version_id, contract_findings FROM holonograph.evaluation_events FINAL"
    ).rows
    assert row == [(v2["versionId"], ["undeclared-dimension:schema-conformance"])]


def test_auth_run_mode_and_errors_answer_the_envelope(
    api: RunningReceiver, store: ClickHouseStore
) -> None:
    assert envelope(post(api, example(), token=None))[:2] == (401, "unauthenticated")
    assert envelope(post(api, example(), token="tok-nobody"))[:2] == (401, "unauthenticated")
    assert envelope(get(api, "billing-triage", token=None))[:2] == (401, "unauthenticated")
    missing = envelope(post(api, example(), run_mode=None))
    assert missing[:2] == (400, "run_mode_missing") and "production" in missing[2]["allowed"]
    unknown = envelope(post(api, example(), run_mode="prod"))
    assert unknown[:2] == (400, "run_mode_unknown") and unknown[2]["value"] == "prod"
    assert envelope(get(api, "billing-triage", run_mode=None))[:2] == (400, "run_mode_missing")

    bad = example()
    bad["surfaces"][0]["dimensions"][0]["type"] = "percent"
    bad["surfaces"][0]["color"] = "red"
    status, code, details = envelope(post(api, bad))
    assert (status, code) == (400, "invalid_contract")
    assert details["problems"] == [
        "surfaces.0.dimensions.0.type: Input should be 'score' or 'boolean'",
        "surfaces.0.color: Extra inputs are not permitted",
    ]
    assert envelope(post(api, b"{not json"))[:2] == (400, "invalid_json")
    # globex may register only agent "reporting"
    assert envelope(post(api, example(), token=GLOBEX))[:2] == (403, "agent_not_allowed")
    assert envelope(get(api, "billing-triage", token=GLOBEX))[:2] == (403, "agent_not_allowed")
    assert envelope(get(api, None))[:2] == (400, "agent_id_missing")
    assert envelope(get(api, "billing-triage"))[:2] == (404, "not_found")
    assert contracts_stored(store) == []

    reporting = example() | {"agentId": "reporting"}
    assert post(api, reporting, token=GLOBEX).status_code == 200
    # tenants apart: acme does not see globex's contract of the same agent id
    assert envelope(get(api, "reporting"))[:2] == (404, "not_found")
    assert get(api, "reporting", token=GLOBEX).json()["agentId"] == "reporting"
    assert contracts_stored(store) == [("globex", "reporting")]
