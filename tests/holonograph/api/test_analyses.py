"""Drift and variance over the Guide's HTTP API, through one live `serve` with TLS and
bearer tokens (one server for the module, test_api.py's helpers): each endpoint's body
is the CLI's --json for the same request (and validates against its document type);
no token is 401, a token without the scope 403; another tenant's readings and events
are never visible; refusals are the envelope with 400, 404 or 409."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter

from holonograph.api.endpoints import ENDPOINTS
from holonograph.cli import cli
from testkit.backends import migrated_store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells
from tests.holonograph.api.test_api import GLOBEX, READER, SDK, Served, live_serve

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SURFACE = "classify-intent"
WINDOW = {"since": "2026-06-01", "until": "2026-06-08"}
FLAGS = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-08T00:00:00Z"]
# What differs between two runs of the same request: the id and time of that run.
PER_RUN = ("runId", "eventId", "createdAt")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("api-analyses")
    data_dir = root / "data"
    acme = SurfaceSpec(
        SURFACE,
        buckets=168,
        events=(100, 250),
        tau=0.01,
        changes=(Change(80, -0.1, ("light source",)),),
    )  # as tests/e2e drift
    globex = SurfaceSpec("globex-surface", buckets=24, events=(20, 30))
    with migrated_store(data_dir) as store:
        at = dt.datetime(2026, 6, 6)
        write_cells(store, generate(acme, seed=1), ingested_at=at, tenant_id="acme")
        write_cells(store, generate(globex, seed=2), ingested_at=at, tenant_id="globex")
    with live_serve(root, data_dir) as live:
        yield live


def _documented(path: str, body: Any) -> None:
    job = next(e.job for e in ENDPOINTS if e.path == path)
    TypeAdapter(job.document).validate_python(body)


def _same_run(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in PER_RUN}


def _query(served: Served, sql: str) -> list[dict[str, Any]]:
    done = CliRunner().invoke(cli, ["query", sql, "--data-dir", str(served.data_dir), "--json"])
    assert done.exit_code == 0, done.output
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_attribute_answers_drifts_json_and_records_the_run(served: Served) -> None:
    body = {"surfaceId": SURFACE, **WINDOW, "changePointDeltaThreshold": 0.02}
    answer = served.call("/lens/attribute", {**body, "persist": False}, token=READER)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-holonograph-finding"] == "true"
    report = answer.json()
    (point,) = report["changePoints"]
    assert point["source"] == "light source"
    assert report["parameters"]["changePointDeltaThreshold"] == 0.02
    assert report["since"] == "2026-06-01T00:00:00Z" and report["tenantId"] == "acme"
    cli_report = served.cli("drift", "--surface", SURFACE, *FLAGS, "--delta-threshold", "0.02",
                            "--no-save")  # fmt: skip
    assert _same_run(report) == _same_run(cli_report)
    _documented("/lens/attribute", report)

    recorded = served.call("/lens/attribute", body)
    assert recorded.status_code == 200, recorded.text
    runs = _query(served, "SELECT DISTINCT run_id, tenant_id FROM holonograph.drift_change_points")
    assert {"run_id": recorded.json()["runId"], "tenant_id": "acme"} in runs
    assert report["runId"] not in {r["run_id"] for r in runs}  # persist false: no record

    quiet = served.call("/lens/attribute", {**body, "changePointDeltaThreshold": 0.5,
                                            "persist": False})  # fmt: skip
    assert quiet.headers["x-holonograph-finding"] == "false"
    assert {p["source"] for p in quiet.json()["changePoints"]} <= {"noise"}


def test_variance_endpoints_answer_the_clis_json(served: Served) -> None:
    body = {"surfaceId": SURFACE, "dimensionId": "correctness", **WINDOW}
    reading = served.call("/lens/decomposeVariance", body, token=READER)
    assert reading.status_code == 200, reading.text
    assert reading.json()["eventId"].startswith("evt_") and reading.json()["buckets"] == 168
    assert reading.json()["tenantId"] == "acme"
    cli_reading = served.cli("variance", "decompose", "--surface", SURFACE, "--dimension",
                             "correctness", *FLAGS)  # fmt: skip
    assert _same_run(reading.json()) == _same_run(cli_reading)
    _documented("/lens/decomposeVariance", reading.json())

    target = {"targetEventId": reading.json()["eventId"]}
    verdict = served.call("/lens/decomposition/evaluate", target, token=READER)
    assert verdict.status_code == 200, verdict.text
    finding = "false" if verdict.json()["verdict"] == "viable" else "true"
    assert verdict.headers["x-holonograph-finding"] == finding
    cli_verdict = served.cli("variance", "evaluate", "--target-event-id", target["targetEventId"])
    assert _same_run(verdict.json()) == _same_run(cli_verdict)
    _documented("/lens/decomposition/evaluate", verdict.json())
    sql = "SELECT kind, count() AS n FROM holonograph.analysis_events WHERE target_event_id = '{}'"
    kinds = _query(served, sql.format(target["targetEventId"]) + " GROUP BY kind")
    assert kinds == [{"kind": "variance-evaluate", "n": 2}]

    pin = {**target, "status": "pin", "approverId": "brian", "pinnedLabel": "baseline"}
    pinned = served.call("/lens/decomposition/lifecycle", pin)
    assert pinned.status_code == 200, pinned.text
    assert pinned.headers["x-holonograph-finding"] == "false"
    cli_pinned = served.cli("variance", "lifecycle", "--target-event-id", target["targetEventId"],
                            "--status", "pin", "--approver-id", "brian",
                            "--pinned-label", "baseline")  # fmt: skip
    assert _same_run(pinned.json()) == _same_run(cli_pinned)
    assert pinned.json()["targetEventId"] == target["targetEventId"]
    _documented("/lens/decomposition/lifecycle", pinned.json())


def test_lifecycle_refusals_are_400_404_and_409(served: Served) -> None:
    body = {"surfaceId": SURFACE, "dimensionId": "correctness", **WINDOW}
    target = {"targetEventId": served.call("/lens/decomposeVariance", body).json()["eventId"]}
    missing = served.call("/lens/decomposition/lifecycle",
                          {**target, "status": "supersede", "approverId": "brian"})  # fmt: skip
    assert (missing.status_code, missing.json()["code"]) == (400, "invalid_lifecycle")
    assert "supersededBy" in missing.json()["error"]
    nobody = {"targetEventId": "evt_none", "status": "lock", "approverId": "b"}
    unknown = served.call("/lens/decomposition/lifecycle", nobody)
    assert (unknown.status_code, unknown.json()["code"]) == (404, "reading_not_found")
    discard = {**target, "status": "discard", "approverId": "brian"}
    assert served.call("/lens/decomposition/lifecycle", discard).status_code == 200
    again = served.call("/lens/decomposition/lifecycle", discard)
    assert (again.status_code, again.json()["code"]) == (409, "lifecycle_final")
    nothing = served.call("/lens/decomposition/evaluate", {"targetEventId": "evt_none"})
    assert (nothing.status_code, nothing.json()["code"]) == (404, "reading_not_found")
    backwards = served.call("/lens/attribute", {"surfaceId": SURFACE, "since": "2026-06-05",
                                                "until": "2026-06-01"})  # fmt: skip
    assert (backwards.status_code, backwards.json()["code"]) == (400, "invalid_request")


def test_no_token_is_401_and_a_token_without_the_scope_403(served: Served) -> None:
    attribute = {"surfaceId": SURFACE, **WINDOW, "persist": False}
    assert served.call("/lens/attribute", attribute, token=None).status_code == 401
    for path, body in [
        ("/lens/attribute", attribute),
        ("/lens/decomposeVariance", {"surfaceId": SURFACE, "dimensionId": "correctness",
                                     **WINDOW}),
        ("/lens/decomposition/evaluate", {"targetEventId": "evt_x"}),
    ]:  # fmt: skip
        refused = served.call(path, body, token=SDK)  # write and govern, no read
        assert refused.status_code == 403, path
        assert refused.json()["details"]["required"] == ["read"]
    lifecycle = {"targetEventId": "evt_x", "status": "lock", "approverId": "brian"}
    refused = served.call("/lens/decomposition/lifecycle", lifecycle, token=READER)
    assert (refused.status_code, refused.json()["details"]["required"]) == (403, ["govern"])
    # deleting rows is governing: a read token may show its retention, never set it
    shown = served.call("/holonograph/retention", {"action": "show"}, token=READER)
    assert (shown.status_code, shown.json()["tenantDays"]) == (200, None)
    shorten = served.call("/holonograph/retention", {"action": "set", "days": 1}, token=READER)
    assert (shorten.status_code, shorten.json()["details"]["required"]) == (403, ["govern"])
    after = served.call("/holonograph/retention", {"action": "show"}, token=READER)
    assert after.json()["tenantDays"] is None


def test_another_tenants_data_is_never_visible(served: Served) -> None:
    attribute = {"surfaceId": SURFACE, **WINDOW, "persist": False}
    # acme's surface is unknown to globex, and only globex's own names are suggested
    theirs = served.call("/lens/attribute", attribute, token=GLOBEX)
    assert (theirs.status_code, theirs.json()["code"]) == (404, "unknown_surface"), theirs.text
    assert theirs.json()["details"]["known"] == ["globex-surface"]
    body = {"surfaceId": SURFACE, "dimensionId": "correctness", **WINDOW}
    acme = served.call("/lens/decomposeVariance", body).json()["eventId"]
    empty = served.call("/lens/decomposeVariance", body, token=GLOBEX)
    assert (empty.status_code, empty.json()["details"]["known"]) == (404, ["globex-surface"])
    for path, request in [
        ("/lens/decomposition/evaluate", {"targetEventId": acme}),
        ("/lens/decomposition/lifecycle",
         {"targetEventId": acme, "status": "discard", "approverId": "mallory"}),
    ]:  # fmt: skip
        reply = served.call(path, request, token=GLOBEX)
        assert (reply.status_code, reply.json()["code"]) == (404, "reading_not_found"), path
    # acme's reading was not discarded by globex: acme may still pin it
    pin = {"targetEventId": acme, "status": "pin", "approverId": "b", "pinnedLabel": "x"}
    assert served.call("/lens/decomposition/lifecycle", pin).status_code == 200
    forged = served.call("/lens/attribute", {**attribute, "tenant": "acme"}, token=GLOBEX)
    assert (forged.status_code, forged.json()["code"]) == (400, "invalid_request")


def test_a_name_the_tenant_never_had_events_for_is_404_and_stores_nothing(
    served: Served,
) -> None:
    runs = "SELECT count() AS n FROM holonograph.drift_change_points"
    readings = "SELECT count() AS n FROM holonograph.variance_readings"
    before = (_query(served, runs), _query(served, readings))
    misspelt = {"surfaceId": "classify-intnet", **WINDOW}
    for path, body in (
        ("/lens/attribute", misspelt),
        ("/lens/decomposeVariance", {**misspelt, "dimensionId": "correctness"}),
        ("/holonograph/compare", misspelt),
        ("/holonograph/completeness", {"surfaceId": "classify-intnet"}),
    ):
        reply = served.call(path, body, token=READER)
        assert (reply.status_code, reply.json()["code"]) == (404, "unknown_surface"), path
        assert set(reply.json()) == {"error", "code", "details"}
        assert reply.json()["error"].startswith(
            "unknown surface 'classify-intnet'; known: classify-intent"
        )
        assert reply.json()["details"]["known"] == [SURFACE]  # never another tenant's
    dimension = {"surfaceId": SURFACE, "dimensionId": "corectness", **WINDOW}
    reply = served.call("/lens/decomposeVariance", dimension, token=READER)
    assert (reply.status_code, reply.json()["code"]) == (404, "unknown_dimension")
    assert "known: correctness" in reply.json()["error"]
    assert (_query(served, runs), _query(served, readings)) == before


def test_status_answers_the_clis_json_and_only_the_tokens_tenant(served: Served) -> None:
    reply = served.call("/holonograph/status", token=READER, method="GET")
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-holonograph-finding"] == "false"
    body = reply.json()
    assert [t["tenantId"] for t in body["tenants"]] == ["acme"] and body["store"] is None
    (surface,) = body["tenants"][0]["surfaces"]
    assert surface["surfaceId"] == SURFACE and surface["events"] > 0
    cli_status = served.cli("status")
    assert {**body, "asOf": None} == {**cli_status, "asOf": None}
    _documented("/holonograph/status", body)
    assert served.call("/holonograph/status", token=None, method="GET").status_code == 401
