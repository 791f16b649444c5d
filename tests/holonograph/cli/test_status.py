"""`holonograph status` on a seeded store: exact counts per tenant, surface and
dimension, last arrival, rejections, the store's size, and schedule health (a schedule
whose latest run failed is a finding: exit 1)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from holonograph.schedule.records import RunRecord, write_run
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import QUARANTINE
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

pytestmark = pytest.mark.clickhouse

NOW = dt.datetime(2026, 6, 3, tzinfo=dt.UTC)
FIRE = dt.datetime(2026, 6, 2, 9, tzinfo=dt.UTC)


def _seed(path: Path, *, failed_schedule: bool) -> dict[str, Any]:
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        acme = multiplex.seed(store, MultiplexSpec(calls=30, fallbacks=0, tenant_id="acme"), 1)
        globex = multiplex.seed(
            store, MultiplexSpec(surface_id="answer-question", calls=8, tenant_id="globex"), 2
        )
        rejected_at = dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)
        store.insert(
            QUARANTINE.qualified,
            [["acme", f"q{i}", rejected_at, "declared type score, the outcome has no score"]
             for i in range(3)],
            QUARANTINE.pick("tenant_id", "quarantine_id", "received_at", "reason"),
        )  # fmt: skip
        for hour, status in ((0, "ok"), (1, "failed" if failed_schedule else "finding")):
            fire = FIRE + dt.timedelta(hours=hour)
            error = "store unavailable" if status == "failed" else ""
            run = RunRecord("acme", "nightly-drift", fire, "drift", f"run-{hour}", "me", fire,
                            fire, status, status == "finding", error)  # fmt: skip
            write_run(store, run)
    finally:
        store.close()
    return {"acme": acme, "globex": globex}


def _status(path: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["status", "--data-dir", str(path), *args], obj={"clock": lambda: NOW}
    )


def test_status_is_exact_on_a_seeded_store(tmp_path: Path) -> None:
    seeded = _seed(tmp_path / "store", failed_schedule=False)
    done = _status(tmp_path / "store", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["asOf"] == "2026-06-03T00:00:00Z" and doc["tenant"] is None
    assert [t["tenantId"] for t in doc["tenants"]] == ["acme", "globex"]
    acme, globex = doc["tenants"]
    events = seeded["acme"].stored_events
    graded = sum(1 for call in seeded["acme"].calls for o in call.outcomes if o.passed is not None)
    assert acme["events"] == events and acme["quarantined"] == 3 and acme["streams"] == 3
    assert acme["lastRejectionAt"] == "2026-06-01T12:00:00Z"
    (surface,) = acme["surfaces"]
    assert surface["surfaceId"] == "classify-intent" and surface["events"] == events
    assert surface["dimensions"] == [
        {"dimensionId": "correctness", "outcomes": graded},
        {"dimensionId": "helpfulness", "outcomes": graded},
    ]
    spec = seeded["acme"].spec
    arrival = spec.start + (spec.calls + spec.fallbacks + 1) * spec.spacing
    assert (
        surface["lastArrivalAt"]
        == acme["lastArrivalAt"]
        == arrival.isoformat().replace("+00:00", "Z")
    )
    assert surface["firstEventAt"] == "2026-06-01T00:00:00Z"
    assert globex["events"] == seeded["globex"].stored_events and globex["quarantined"] == 0
    assert globex["lastRejectionAt"] is None
    assert doc["store"]["bytesOnDisk"] > 0 and doc["store"]["rows"] > events
    (schedule,) = doc["schedules"]
    assert schedule == {
        "tenantId": "acme", "schedule": "nightly-drift", "job": "drift", "runs": 2,
        "failed": 0, "lastFireTime": "2026-06-02T10:00:00Z", "lastStatus": "finding",
        "lastError": "", "lastSuccessAt": "2026-06-02T10:00:00Z", "delivery": "none",
        "healthy": True,
    }  # fmt: skip

    text = _status(tmp_path / "store")
    assert text.exit_code == 0, text.output
    assert f"tenant acme: {events} events on 1 surface(s), 3 stream(s), 3 rejected" in text.stdout
    assert f"correctness ({graded}), helpfulness ({graded})" in text.stdout

    one = _status(tmp_path / "store", "--tenant", "globex", "--json")
    assert one.exit_code == 0, one.output
    only = json.loads(one.stdout)
    assert [t["tenantId"] for t in only["tenants"]] == ["globex"]
    assert only["store"] is None and only["schedules"] == []  # nothing of acme's


def test_a_failed_schedule_is_a_finding(tmp_path: Path) -> None:
    _seed(tmp_path / "store", failed_schedule=True)
    done = _status(tmp_path / "store")
    assert done.exit_code == 1, done.output
    assert "UNHEALTHY" in done.stdout and "store unavailable" in done.stdout


def test_an_empty_store_says_nothing_has_arrived(tmp_path: Path) -> None:
    store = open_store(f"chdb://{tmp_path / 'store'}")
    apply_migrations(store)
    store.close()
    done = _status(tmp_path / "store")
    assert done.exit_code == 0, done.output
    assert "no tenant has sent anything yet" in done.stdout
