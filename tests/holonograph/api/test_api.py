"""The Guide's HTTP API through one live `serve` with TLS and bearer tokens (one server
for the module): each endpoint's body is the CLI's --json for the same request (and
validates against the document type its OpenAPI schema comes from); no token is 401,
a token without the scope 403 (a token without `scopes` keeps today's rights: no
analyses); another tenant's data is never visible; errors are the Guide's envelope,
the Guide's other paths 501; date-only times are accepted; and the curl examples of
docs/api.md run as written."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from pydantic import TypeAdapter

from holonograph.api.endpoints import ENDPOINTS, NOT_SERVED
from holonograph.cli import cli
from schemas.tables import COMPLETENESS_REFRESHES, EMISSION_RECEIPTS
from testkit.backends import migrated_store
from tests.e2e.kafka.helpers import wait_until
from tests.holonograph.cli.test_serve import ROOT, ServeProcess
from tests.ingest.certs import CertificateAuthority
from tests.processors.conformance.support import event, insert_events

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SDK = "tok-acme-sdk-0001"  # no scopes: write and govern, as before scopes existed
READER = "tok-acme-reader-0002"  # read
OPS = "tok-acme-ops-0003"  # read, govern
GLOBEX = "tok-globex-0004"  # every scope, another tenant
EXAMPLES = ROOT / "docs" / "examples" / "conformance"
APPROVAL = json.loads((EXAMPLES / "approval.json").read_text())
AS_OF = "2026-07-02T00:00:00Z"
# A day, written as the Guide writes it: midnight UTC to midnight UTC.
DAY = {"since": "2026-07-01", "until": "2026-07-02"}
DAY_FLAGS = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]
# What differs between two runs of the same request: the id and time of that run.
PER_RUN = ("checkId", "checkedAt")


def _entry(name: str, tenant: str, token: str, scopes: str = "") -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    line = f'  - name: {name}\n    tenant: {tenant}\n    token_sha256: "{digest}"\n'
    return line + '    agents: "*"\n' + (f"    scopes: {scopes}\n" if scopes else "")


def _receipts(tenant: str, stream: str, seqs: list[int]) -> list[list[Any]]:
    at = dt.datetime(2026, 7, 1, 9, tzinfo=dt.UTC)
    return [
        [tenant, stream, seq, f"{tenant}-{stream}-{seq}", "evaluation", False, False,
         f"evt_{stream}_{seq}", "classify-intent", at, at]
        for seq in seqs
    ]  # fmt: skip


def _seed(data_dir: Path) -> None:
    acme = [
        event("e1", {"user_message": ["I want a refund"], "tool_invocations": ["refund_lookup"]}),
        event("e2", {"user_message": ["refund?"], "tool_invocations": []}),
        event("e3", {"user_message": ["hi"], "tool_invocations": []}),
    ]
    globex = [event("g1", {"user_message": ["refund now"], "tool_invocations": []})]
    columns = EMISSION_RECEIPTS.pick(*EMISSION_RECEIPTS.columns[:11])
    with migrated_store(data_dir) as store:
        insert_events(store, acme, tenant_id="acme")
        insert_events(store, globex, tenant_id="globex")
        store.insert(EMISSION_RECEIPTS.qualified, _receipts("acme", "a-1", [0, 1, 3]), columns)
        store.insert(EMISSION_RECEIPTS.qualified, _receipts("globex", "g-1", [0, 1]), columns)


@dataclass
class Served:
    data_dir: Path
    url: str  # the HTTP API's (the OTLP/HTTP port's unless --api-port)
    ca_file: Path
    otlp_url: str = ""  # the OTLP/HTTP port's

    def call(
        self,
        path: str,
        body: Any = None,
        token: str | None = OPS,
        run_mode: str | None = "production",
        method: str = "POST",
    ) -> requests.Response:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if run_mode is not None:
            headers["x-holonograph-run-mode"] = run_mode
        data = None if body is None else json.dumps(body)
        return requests.request(
            method, self.url + path, data=data, headers=headers, verify=str(self.ca_file),
            timeout=60,
        )  # fmt: skip

    def cli(self, *args: str, store: bool = True) -> Any:
        """The CLI's --json for the same request, as tenant acme (through serve's admin
        endpoint)."""
        where = ["--data-dir", str(self.data_dir), "--tenant", "acme"] if store else []
        result = CliRunner().invoke(cli, [*args, *where, "--json"])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)


@contextlib.contextmanager
def live_serve(root: Path, data_dir: Path, *extra: str) -> Iterator[Served]:
    """`serve` over `data_dir` with TLS (a private CA) and the four tokens above (and
    `extra` flags)."""
    tokens = (
        "tokens:\n"
        + _entry("acme-sdk", "acme", SDK)
        + _entry("acme-reader", "acme", READER, "[read]")
        + _entry("acme-ops", "acme", OPS, "[read, govern]")
        + _entry("globex", "globex", GLOBEX, "[write, read, govern]")
    )
    with serve_with_tokens(root, data_dir, tokens, *extra) as live:
        yield live


@contextlib.contextmanager
def serve_with_tokens(
    root: Path, data_dir: Path, tokens_yaml: str, *extra: str
) -> Iterator[Served]:
    """`serve` over `data_dir` with TLS (a private CA) and the tokens file `tokens_yaml`
    (and `extra` flags)."""
    ca = CertificateAuthority()
    ca.issue("receiver").write(root / "server.pem", root / "server.key")
    (root / "ca.pem").write_bytes(ca.cert_pem)
    tokens = root / "tokens.yaml"
    tokens.write_text(tokens_yaml)
    tokens.chmod(0o600)
    with pytest.MonkeyPatch.context() as env:
        # One refresh of the completeness tables at start, none while the test compares.
        env.setenv("HOLONOGRAPH_STATUS_REFRESH_SECONDS", "3600")
        server = ServeProcess(
            data_dir,
            "--tls-cert-file", str(root / "server.pem"), "--tls-key-file", str(root / "server.key"),
            "--auth-tokens-file", str(tokens), *extra,
        )  # fmt: skip
    try:
        line = next(line for line in server.lines if line.startswith("OTLP/HTTP"))
        match = re.search(r"(https://127\.0\.0\.1:\d+)/v1/traces", line)
        assert match, server.lines
        api = [re.search(r"(https://127\.0\.0\.1:\d+)/openapi.json", line)
               for line in server.lines if line.startswith("HTTP API")]  # fmt: skip
        url = api[0][1] if api and api[0] else match[1]
        # The start's refresh of the completeness tables done before any comparison: an
        # answer read before it and one read after would see different tables.
        wait_until(lambda: _refreshes(data_dir) > 0, 60, "the start's completeness refresh")
        yield Served(data_dir, url, root / "ca.pem", match[1])
    finally:
        code, stderr = server.stop()
        assert code == 0, stderr


def _refreshes(data_dir: Path) -> int:
    """The completeness refreshes recorded, read through the running serve."""
    sql = f"SELECT count() AS n FROM {COMPLETENESS_REFRESHES.qualified}"
    done = CliRunner().invoke(cli, ["query", "--data-dir", str(data_dir), "--json", sql])
    assert done.exit_code == 0, done.output
    return int(json.loads(done.stdout)[0]["n"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("api")
    _seed(root / "data")
    with live_serve(root, root / "data") as live:
        yield live


def _job(path: str) -> Any:
    return next(e.job for e in ENDPOINTS if e.path == path)


def _documented(path: str, body: Any) -> None:
    """The answer is exactly the document type its OpenAPI schema is generated from
    (no field missing, none unknown)."""
    TypeAdapter(_job(path).document).validate_python(body)


def _same_run(document: Any) -> Any:
    if isinstance(document, list):
        return [_same_run(item) for item in document]
    return {k: v for k, v in document.items() if k not in PER_RUN}


def test_each_endpoint_answers_the_clis_json_for_the_same_request(served: Served) -> None:
    surface = {"surfaceId": "classify-intent", "rules": ["Be polite.", "Never say 'refund'."]}
    surface_file = served.data_dir.parent / "surface.json"
    surface_file.write_text(json.dumps(surface))
    derived = served.call("/lens/conformance/derive", surface)
    assert derived.status_code == 200, derived.text
    assert derived.json() == served.cli("conformance", "derive", str(surface_file), store=False)
    _documented("/lens/conformance/derive", derived.json())

    # A fixture of this test's own: approved here first, whatever the other tests did.
    fixture_id = "refund-requires-lookup-each"
    approval = {**APPROVAL, "fixture": {**APPROVAL["fixture"], "fixtureId": fixture_id}}
    approval_file = served.data_dir.parent / "approval-each.json"
    approval_file.write_text(json.dumps(approval))
    approved = served.call("/lens/conformance/fixtures", approval)
    assert approved.status_code == 200, approved.text
    assert approved.json()["created"] and approved.json()["tenantId"] == "acme"
    assert approved.json()["eventId"].startswith("apv_")
    # The CLI approving the same fixture finds it in force: the same record, not created.
    (again,) = served.cli("conformance", "approve", str(approval_file))
    assert again == {**approved.json(), "created": False}
    _documented("/lens/conformance/fixtures", approved.json())

    check = {"fixtureId": fixture_id, **DAY, "persist": False}
    checked = served.call("/lens/conformance/check", check)
    assert checked.status_code == 200, checked.text
    assert checked.headers["x-holonograph-finding"] == "true"  # e2 asked, no lookup
    assert checked.json()["window"] == {"since": "2026-07-01T00:00:00Z",
                                        "until": "2026-07-02T00:00:00Z"}  # fmt: skip
    cli_check = served.cli("conformance", "check", "--fixture-id", fixture_id, *DAY_FLAGS,
                           "--no-persist")  # fmt: skip
    assert _same_run(checked.json()) == _same_run(cli_check)
    assert checked.json()["counts"] == {"fail": 1, "pass": 1, "requires-judge": 0,
                                        "unevaluable": 0, "not-applicable": 1}  # fmt: skip
    surface_check = served.call("/lens/conformance/check", {"surfaceId": "classify-intent",
                                                            **DAY, "persist": False})  # fmt: skip
    assert _same_run(surface_check.json()) == _same_run(
        served.cli("conformance", "check", "--surface", "classify-intent", *DAY_FLAGS,
                   "--no-persist")
    )  # fmt: skip
    _documented("/lens/conformance/check", checked.json())
    _documented("/lens/conformance/check", surface_check.json())

    request = {"asOf": AS_OF, "refreshIntervalSeconds": 3600}
    completeness = served.call("/holonograph/completeness", request, token=READER)
    assert completeness.status_code == 200, completeness.text
    assert completeness.headers["x-holonograph-finding"] == "true"  # seq 2 of a-1 is lost
    assert completeness.json() == served.cli(
        "completeness", "--tenant", "acme", "--as-of", AS_OF, "--refresh-interval", "3600"
    )
    assert [s["stream"] for s in completeness.json()["streams"]] == ["a-1"]
    _documented("/holonograph/completeness", completeness.json())


def test_persisting_over_http_lands_in_the_store_the_cli_reads(served: Served) -> None:
    served.call("/lens/conformance/fixtures", APPROVAL)  # in force already, or now
    checked = served.call("/lens/conformance/check", {"fixtureId": "refund-requires-lookup",
                                                      **DAY})  # fmt: skip
    assert checked.status_code == 200, checked.text
    results = served.cli("conformance", "results", "--fixture-id", "refund-requires-lookup")
    assert checked.json()["checkId"] in {r["checkId"] for r in results}
    assert {r["tenantId"] for r in results} == {"acme"}
    # The same history over HTTP (the web UI's verdicts over time), by the events' window.
    query = "fixtureId=refund-requires-lookup&judgedSince=2026-07-01T00:00:00Z&limit=50"
    history = served.call(f"/lens/conformance/results?{query}", token=READER, method="GET")
    assert history.status_code == 200, history.text
    total = len(results)
    assert history.json() == {"results": results, "count": total, "total": total, "offset": 0}
    _documented("/lens/conformance/results", history.json())
    # Paged by the server: one result a page, the second newest on the second page.
    again = served.call("/lens/conformance/check", {"fixtureId": "refund-requires-lookup",
                                                    **DAY})  # fmt: skip
    assert again.status_code == 200, again.text
    one = query.replace("limit=50", "limit=1")
    pages = [
        served.call(f"/lens/conformance/results?{one}&offset={n}", token=READER, method="GET")
        for n in (0, 1)
    ]
    assert [p.json()["total"] for p in pages] == [total + 1] * 2
    assert [p.json()["results"][0]["checkId"] for p in pages] == [
        again.json()["checkId"],
        results[0]["checkId"],
    ]
    later = served.call("/lens/conformance/results?judgedSince=2026-07-02T00:00:00Z",
                        token=READER, method="GET")  # fmt: skip
    assert checked.json()["checkId"] not in {r["checkId"] for r in later.json()["results"]}
    theirs = served.call(f"/lens/conformance/results?{query}", token=GLOBEX, method="GET")
    assert theirs.status_code == 200 and theirs.json()["results"] == []
    unknown = served.call("/lens/conformance/results?surfaceId=clasify-intent", token=READER,
                          method="GET")  # fmt: skip
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_surface")


def test_no_token_is_401_and_a_token_without_the_scope_403(served: Served) -> None:
    surface = {"surfaceId": "s", "rules": ["Be polite."]}
    missing = served.call("/lens/conformance/derive", surface, token=None)
    assert (missing.status_code, missing.json()["code"]) == (401, "unauthenticated")
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    unknown = served.call("/lens/conformance/derive", surface, token="tok-nobody")
    assert unknown.status_code == 401
    # read cannot govern: approving needs govern
    refused = served.call("/lens/conformance/fixtures", APPROVAL, token=READER)
    assert refused.status_code == 403
    assert refused.json()["code"] == "insufficient_scope"
    assert refused.json()["details"] == {"required": ["govern"], "scopes": ["read"]}
    assert 'error="insufficient_scope"' in refused.headers["WWW-Authenticate"]
    # a refresh of the materialized tables is a write: read alone may not
    refresh = served.call("/holonograph/completeness", {"refresh": True}, token=READER)
    assert (refresh.status_code, refresh.json()["details"]["required"]) == (403, ["govern"])
    # a token without `scopes` keeps what it could do (write, govern), gains no analyses
    legacy = served.call("/lens/conformance/check", {"surfaceId": "classify-intent"}, token=SDK)
    assert legacy.status_code == 403 and legacy.json()["details"]["required"] == ["read"]
    contract = {"agentId": "billing-triage", "surfaces": [{"id": "classify-intent"}]}
    assert served.call("/holonograph/contract", contract, token=SDK).status_code == 200
    assert served.call("/holonograph/contract", contract, token=READER).status_code == 403
    read_back = served.call("/holonograph/contract?agentId=billing-triage", token=READER,
                            method="GET")  # fmt: skip
    assert read_back.status_code == 200, read_back.text


def test_another_tenants_data_is_never_visible(served: Served) -> None:
    served.call("/lens/conformance/fixtures", APPROVAL)  # acme's fixture
    theirs = served.call("/holonograph/completeness", {"asOf": AS_OF}, token=GLOBEX)
    assert theirs.json()["tenant"] == "globex"
    assert [s["stream"] for s in theirs.json()["streams"]] == ["g-1"]
    assert {s["tenantId"] for s in theirs.json()["streams"]} == {"globex"}
    stored = served.call("/lens/conformance/check", {"fixtureId": "refund-requires-lookup",
                                                     **DAY}, token=GLOBEX)  # fmt: skip
    assert (stored.status_code, stored.json()["code"]) == (404, "fixture_not_found")
    surface = served.call("/lens/conformance/check", {"surfaceId": "classify-intent", **DAY},
                          token=GLOBEX)  # fmt: skip
    assert (surface.status_code, surface.json()["code"]) == (404, "no_live_fixture")
    # the same fixture inline sees globex's one event only
    inline = served.call("/lens/conformance/check", {"fixture": APPROVAL["fixture"], **DAY,
                                                     "persist": False}, token=GLOBEX)  # fmt: skip
    assert inline.json()["eventsChecked"] == 1 and inline.json()["tenantId"] == "globex"
    assert [e["eventId"] for e in inline.json()["events"]] == ["g1"]
    # a body cannot name another tenant
    forged = served.call("/holonograph/completeness", {"tenant": "acme"}, token=GLOBEX)
    assert (forged.status_code, forged.json()["code"]) == (400, "invalid_request")


def test_errors_are_the_guides_envelope_and_other_paths_501(served: Served) -> None:
    def envelope(reply: requests.Response) -> tuple[int, str]:
        body = reply.json()
        assert set(body) == {"error", "code", "details"}, body
        return reply.status_code, body["code"]

    surface = {"surfaceId": "s", "rules": ["Be polite."]}
    assert envelope(served.call("/lens/conformance/derive", surface, run_mode=None)) == (
        400, "run_mode_missing",
    )  # fmt: skip
    assert envelope(served.call("/lens/conformance/derive", surface, run_mode="prod")) == (
        400, "run_mode_unknown",
    )  # fmt: skip
    bad = served.call("/lens/conformance/check", {"surface_id": "s", "since": "yesterday",
                                                  "limit": 5000})  # fmt: skip
    assert envelope(bad) == (400, "invalid_request")
    assert len(bad.json()["details"]["problems"]) == 3  # snake_case, a time, the page size
    naive = served.call("/lens/conformance/check", {"surfaceId": "s",
                                                    "since": "2026-07-01T00:00:00"})  # fmt: skip
    assert "has no UTC offset" in naive.json()["details"]["problems"][0]
    empty = served.call(
        "/lens/conformance/check",
        {"surfaceId": "classify-intent", "since": "2026-07-02", "until": "2026-07-01"},
    )
    assert envelope(empty) == (400, "invalid_request") and "empty window" in empty.json()["error"]
    assert envelope(served.call("/lens/conformance/check", [1])) == (400, "invalid_request")
    for absent in NOT_SERVED:
        reply = served.call(absent.path, {}, method=absent.method)
        assert envelope(reply) == (501, "not_implemented"), absent
    assert envelope(served.call("/lens/nowhere", {})) == (404, "not_found")
    wrong = served.call("/lens/conformance/check", method="GET")
    assert envelope(wrong) == (405, "method_not_allowed") and wrong.headers["Allow"] == "POST"
    openapi = requests.get(served.url + "/openapi.json", verify=str(served.ca_file), timeout=30)
    assert openapi.json()["openapi"] == "3.1.0"


def _curl_blocks() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [block for block in blocks if block.lstrip().startswith("curl")]


def test_the_curl_examples_of_docs_api_md_run(served: Served) -> None:
    blocks = _curl_blocks()
    assert len(blocks) >= 5
    env = {
        **os.environ,
        "HOLONOGRAPH_URL": served.url,
        "HOLONOGRAPH_TOKEN": OPS,
        "CURL_CA_BUNDLE": str(served.ca_file),
    }
    for block in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (block, done.stdout, done.stderr)
        answer = json.loads(done.stdout)
        if "--fail-with-body" not in block:  # an example of an error: the envelope
            assert set(answer) == {"error", "code", "details"}, block
