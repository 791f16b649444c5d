"""`--tenant` on the analyses over a store holding two tenants with the same surface,
the same event ids and the same stream names: each answer is one tenant's, and
without `--tenant` every analysis refuses (exit 2) and names the tenants."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells
from tests.processors.conformance.support import event, insert_events

pytestmark = pytest.mark.clickhouse

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples" / "conformance"
DRIFT = ["--surface", "classify-intent", "--since", "2026-06-01T00:00:00Z",
         "--until", "2026-06-03T00:00:00Z"]  # fmt: skip
WINDOW = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]
REFUND = {"user_message": ["I want a refund"], "response_text": ["Done."]}


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tenants")
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        specs = {
            "acme": SurfaceSpec("classify-intent", buckets=48, events=(40, 60),
                                changes=(Change(24, -0.2, ("light source",)),)),
            "globex": SurfaceSpec("classify-intent", buckets=48, events=(10, 20), base=0.5),
        }  # fmt: skip
        for tenant, spec in specs.items():
            write_cells(store, generate(spec, seed=3), dt.datetime(2026, 7, 1), tenant_id=tenant)
        tools = {"acme": ["refund_lookup"], "globex": []}
        for tenant, used in tools.items():
            insert_events(store, [event("evt_c1", {**REFUND, "tool_invocations": used})],
                          tenant_id=tenant)  # fmt: skip
    finally:
        store.close()
    return path


def run(store_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--store", f"chdb://{store_dir}"])


def as_json(result: Result) -> Any:
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def scalar(store_dir: Path, sql: str) -> Any:
    store = open_store(f"chdb://{store_dir}")
    try:
        return store.query(sql).scalar()
    finally:
        store.close()


@pytest.mark.parametrize(
    "command",
    [
        ["completeness"],
        ["drift", *DRIFT],
        ["variance", "decompose", *DRIFT, "--dimension", "correctness"],
        ["variance", "evaluate", "--target-event-id", "evt_x"],
        ["variance", "lifecycle", "--target-event-id", "evt_x", "--status", "lock",
         "--approver-id", "ana"],
        ["conformance", "check", "--surface", "classify-intent", *WINDOW],
        ["conformance", "list"],
        ["conformance", "results"],
        ["conformance", "approve", str(EXAMPLES / "approval.json")],
        ["conformance", "suite", "run", str(EXAMPLES / "suite.yaml")],
    ],
)  # fmt: skip
def test_without_tenant_a_store_of_several_tenants_is_refused(
    two_tenants: Path, command: list[str]
) -> None:
    written = (
        "SELECT (SELECT count() FROM holonograph.analysis_events)"
        " + (SELECT count() FROM holonograph.conformance_fixtures)"
        " + (SELECT count() FROM holonograph.conformance_results)"
    )
    before = scalar(two_tenants, written)
    result = run(two_tenants, *command)
    assert result.exit_code == 2, result.output
    assert "the store holds 2 tenants (acme, globex): name one with --tenant" in result.output
    assert scalar(two_tenants, written) == before


def test_an_empty_tenant_is_refused(two_tenants: Path) -> None:
    result = run(two_tenants, "completeness", "--tenant", " ")
    assert result.exit_code == 2
    assert "a tenant id cannot be empty" in result.output


def _events(store_dir: Path, tenant: str) -> int:
    return int(
        scalar(
            store_dir,
            "SELECT count() FROM holonograph.evaluation_events FINAL"
            f" WHERE tenant_id = '{tenant}' AND surface_id = 'classify-intent'"
            " AND timestamp < '2026-06-03'",
        )
    )


def test_completeness_reads_one_tenant(two_tenants: Path) -> None:
    for tenant in ("acme", "globex"):
        report = as_json(run(two_tenants, "completeness", "--tenant", tenant, "--json"))
        assert report["tenant"] == tenant
        assert {s["tenantId"] for s in report["streams"]} == {tenant}
        assert report["totals"]["delivered"] == _events(two_tenants, tenant)


def test_drift_and_variance_read_and_record_one_tenant(two_tenants: Path) -> None:
    acme, globex = _events(two_tenants, "acme"), _events(two_tenants, "globex")
    assert acme != globex
    report = as_json(run(two_tenants, "drift", *DRIFT, "--tenant", "acme", "--json"))
    assert (report["tenantId"], report["eventCount"]) == ("acme", acme)
    recorded = scalar(
        two_tenants,
        "SELECT groupUniqArray(tenant_id) FROM holonograph.analysis_events"
        f" WHERE event_id = '{report['runId']}'",
    )
    assert recorded == ["acme"]

    reading = as_json(
        run(two_tenants, "variance", "decompose", *DRIFT, "--dimension", "correctness",
            "--tenant", "globex", "--json")
    )  # fmt: skip
    assert (reading["tenantId"], reading["events"]) == ("globex", globex)
    elsewhere = run(two_tenants, "variance", "evaluate", "--target-event-id",
                    reading["eventId"], "--tenant", "acme")  # fmt: skip
    assert elsewhere.exit_code == 2
    assert "no variance reading" in elsewhere.output
    evaluated = run(two_tenants, "variance", "evaluate", "--target-event-id",
                    reading["eventId"], "--tenant", "globex", "--json")  # fmt: skip
    assert as_json(evaluated)["targetEventId"] == reading["eventId"]


def test_conformance_fixtures_and_checks_belong_to_a_tenant(two_tenants: Path) -> None:
    fixture = ["--fixture-id", "refund-requires-lookup", *WINDOW]
    approved = run(two_tenants, "conformance", "approve", str(EXAMPLES / "approval.json"),
                   "--tenant", "acme", "--json")  # fmt: skip
    assert as_json(approved)[0]["tenantId"] == "acme"
    assert as_json(run(two_tenants, "conformance", "list", "--tenant", "globex", "--json")) == []
    unapproved = run(two_tenants, "conformance", "check", *fixture, "--tenant", "globex")
    assert unapproved.exit_code == 2
    assert "no approved fixture 'refund-requires-lookup' is live" in unapproved.output

    checked = as_json(run(two_tenants, "conformance", "check", *fixture, "--tenant", "acme",
                          "--json"))  # fmt: skip
    assert (checked["tenantId"], checked["verdict"], checked["eventsChecked"]) == (
        "acme",
        "pass",
        1,
    )
    run(
        two_tenants, "conformance", "approve", str(EXAMPLES / "approval.json"), "--tenant", "globex"
    )
    failed = run(two_tenants, "conformance", "check", *fixture, "--tenant", "globex", "--json")
    assert failed.exit_code == 1
    assert as_json(failed)["failingEventIds"] == ["evt_c1"]
    history = as_json(run(two_tenants, "conformance", "results", "--tenant", "acme", "--json"))
    assert [(r["tenantId"], r["verdict"]) for r in history] == [("acme", "pass")]
