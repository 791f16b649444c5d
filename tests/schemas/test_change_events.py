"""Migration 0008 and `schemas.changelog`: every governance change the store records
lands in `change_events` whoever wrote it (contract versions per surface with what
they retired and what superseded it, fixture approvals and rejections, variance
lifecycle decisions, recorded topology scans), rows written before the migration are
backfilled as the views would have written them, a crash at any step converges, and
each tenant reads only its own changes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from processors.analysis_events import record_event
from processors.conformance.approve import approve, reject
from processors.variance.verdict import lifecycle
from schemas.changelog import (
    ChangeConflict,
    ChangeQuery,
    list_changes,
    mark_availability,
    record_change,
    unavailability,
)
from schemas.changes import AvailabilityMark, ChangeEvent, ChangeRecord
from schemas.conformance import ApprovalRequest, RejectionRequest
from schemas.contracts import Contract, removed_items
from schemas.migrations import MigrationError, apply_migrations, backfill, load_migrations
from schemas.registry import register
from schemas.store import Store
from schemas.tables import VARIANCE_READINGS
from tests.schemas.test_migration_tenancy import Crash, CrashingStore

pytestmark = pytest.mark.clickhouse

ROOT = Path(__file__).resolve().parents[2]
DAY = dt.timedelta(days=1)
T0 = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
BEFORE_0008 = [m for m in load_migrations() if m.version < 8]
# 0008 is this file's subject: later migrations are applied by their own tests.
THROUGH_0008 = [m for m in load_migrations() if m.version <= 8]


def contract_versions() -> list[Contract]:
    """v1 as the example; v2 renames a dimension (supersedes), drops a tag and adds a
    surface; v3 retires the first surface."""
    doc: dict[str, Any] = json.loads(
        (ROOT / "docs/examples/contracts/billing-triage.json").read_text()
    )
    first = Contract.model_validate(doc)
    surface = doc["surfaces"][0]
    surface["dimensions"][1] = {
        "id": "schema-valid", "type": "boolean", "supersedes": "schema-conformance"
    }  # fmt: skip
    surface["cohortTags"] = ["customer-tier"]
    doc["surfaces"].append({"id": "route", "dimensions": [{"id": "routed", "type": "boolean"}]})
    second = Contract.model_validate(doc)
    doc["surfaces"] = doc["surfaces"][1:]
    return [first, second, Contract.model_validate(doc)]


def write_governance(store: Store, tenant: str) -> None:
    """One of every governance change, through the writers the commands use."""
    for i, contract in enumerate(contract_versions()):
        register(store, tenant, contract, T0 + i * DAY)
    approval = ApprovalRequest.model_validate_json(
        (ROOT / "docs/examples/conformance/approval.json").read_text()
    )
    ids = iter([f"apv_{tenant}_1", f"apv_{tenant}_2"])
    approve(store, approval, clock=lambda: T0 + 3 * DAY, new_id=lambda: next(ids), tenant_id=tenant)
    rejection = RejectionRequest(
        approver_id="dana", source_surface_id="classify-intent", fixture=approval.fixture,
        comment="not a pattern",
    )  # fmt: skip
    reject(store, rejection, clock=lambda: T0 + 4 * DAY, new_id=lambda: next(ids), tenant_id=tenant)
    store.insert(
        VARIANCE_READINGS.qualified,
        [[tenant, f"evt_reading_{tenant}", "classify-intent", "correctness", T0]],
        VARIANCE_READINGS.pick("tenant_id", "event_id", "surface_id", "dimension_id", "created_at"),
    )
    lifecycle(store, f"evt_reading_{tenant}", "pin", "brian", T0 + 5 * DAY, "Q3", tenant_id=tenant)
    scan = {"agentId": "billing-triage", "since": "2026-06-01T00:00:00Z",
            "until": "2026-06-06T00:00:00Z", "contractVersionId": "cv_x",
            "coverage": {"declared": 4, "observed": 3, "ratio": 0.75}}  # fmt: skip
    record_event(
        store, f"scan_{tenant}", "topology-scan", "", "", T0 + 6 * DAY, json.dumps(scan),
        tenant_id=tenant, verdict="fail",
    )  # fmt: skip


def changes(store: Store, tenant: str | None, **query: Any) -> list[ChangeEvent]:
    return list_changes(store, ChangeQuery(tenant_id=tenant, **query))


def shape(events: list[ChangeEvent]) -> list[tuple[Any, ...]]:
    return [(e.kind, e.surface_id, e.agent_id, e.artifact_id, e.at, e.actor) for e in events]


def test_every_governance_change_lands_once_per_tenant(store: ClickHouseStore) -> None:
    write_governance(store, "acme")
    found = changes(store, "acme")
    versions = [e.artifact_version for e in found if e.kind == "contract"]
    assert shape(found) == [
        ("contract", "classify-intent", "billing-triage", "billing-triage", T0, None),
        ("contract", "classify-intent", "billing-triage", "billing-triage", T0 + DAY, None),
        ("contract", "route", "billing-triage", "billing-triage", T0 + DAY, None),
        ("contract", "classify-intent", "billing-triage", "billing-triage", T0 + 2 * DAY, None),
        ("fixture", "classify-intent", None, "refund-requires-lookup", T0 + 3 * DAY, "brian"),
        ("fixture", "classify-intent", None, "refund-requires-lookup", T0 + 4 * DAY, "dana"),
        ("variance-lifecycle", "classify-intent", None, "evt_reading_acme", T0 + 5 * DAY, "brian"),
        ("topology-scan", None, "billing-triage", "scan_acme", T0 + 6 * DAY, None),
    ]
    first, second, route, retired = found[:4]
    assert first.details["state"] == "registered" and first.details["previousVersionId"] == ""
    assert second.details == {
        "state": "changed", "previousVersionId": versions[0], "retired": ["tag:fix_tier"],
        "supersededBy": {"dimension:schema-conformance": "dimension:schema-valid"},
        "surfaceSupersededBy": "",
    }  # fmt: skip
    assert route.details["state"] == "registered" and route.artifact_version == versions[1]
    assert retired.details["state"] == "retired" and retired.description.endswith("retired")
    assert [e.details.get("action") for e in found[4:6]] == ["approved", "rejected"]
    assert [e.artifact_version for e in found[4:6]] == ["1", "2"]
    assert found[6].details == {
        "status": "pin", "dimensionId": "correctness", "pinnedLabel": "Q3", "supersededBy": ""
    }  # fmt: skip
    assert found[7].details["verdict"] == "fail" and found[7].artifact_version == "cv_x"
    assert {e.layer for e in found} == {"lens", None}
    assert changes(store, "globex") == []


def test_the_retired_items_agree_with_the_registry(store: ClickHouseStore) -> None:
    """The view's `retired` and `supersededBy` are the registry's `removed[]`."""
    first, second, _ = contract_versions()
    write_governance(store, "acme")
    (row,) = [e for e in changes(store, "acme") if e.at == T0 + DAY and e.surface_id != "route"]
    removed = removed_items(first, second)
    assert row.details["retired"] == [
        f"{r.altitude}:{r.id}" for r in removed if r.superseded_by is None
    ]
    assert row.details["supersededBy"] == {
        f"{r.altitude}:{r.id}": f"{r.superseded_by.altitude}:{r.superseded_by.id}"
        for r in removed
        if r.superseded_by is not None
    }


def test_tenants_are_apart_in_the_changes(store: ClickHouseStore) -> None:
    write_governance(store, "acme")
    record_change(store, "globex", ChangeRecord(
        surface_id="classify-intent", kind="deploy", at=T0, description="globex deploy"
    ), T0)  # fmt: skip
    assert all(e.tenant_id == "acme" for e in changes(store, "acme"))
    (only,) = changes(store, "globex")
    assert only.description == "globex deploy"
    assert len(changes(store, None)) == len(changes(store, "acme")) + 1


def _backfilled(store: ClickHouseStore) -> list[tuple[Any, ...]]:
    """Every row but its id (a lifecycle decision's event id is random), the id's prefix
    kept."""
    return store.query(
        "SELECT tenant_id, origin, splitByChar(':', change_id)[1], agent_id, surface_id, kind,"
        " artifact_id, artifact_version, at, ends_at, actor, description, details, recorded_at"
        " FROM holonograph.change_events FINAL ORDER BY ALL"
    ).rows


def test_rows_before_the_migration_are_backfilled_as_the_views_write_them(
    store: ClickHouseStore,
) -> None:
    write_governance(store, "acme")
    through_views = _backfilled(store)
    assert len(through_views) == 8
    store.command("DROP DATABASE holonograph SYNC")
    apply_migrations(store, BEFORE_0008)
    write_governance(store, "acme")
    assert [m.version for m in apply_migrations(store, THROUGH_0008)] == [8]
    assert _backfilled(store) == through_views


def test_rerunning_after_a_crash_at_any_step_converges(store: ClickHouseStore) -> None:
    def old() -> None:
        store.command("DROP DATABASE IF EXISTS holonograph SYNC")
        apply_migrations(store, BEFORE_0008)
        write_governance(store, "acme")

    old()
    counting = CrashingStore(store)
    apply_migrations(counting, THROUGH_0008)
    expected = _backfilled(store)
    assert counting.writes >= 11  # table, view, four views, four backfills, the record
    for at in range(counting.writes):
        old()
        with pytest.raises(Crash):
            apply_migrations(CrashingStore(store, at), THROUGH_0008)
        apply_migrations(store, THROUGH_0008)
        assert _backfilled(store) == expected, f"crash before write {at}"
        assert store.query("SELECT count() FROM holonograph.change_events FINAL").scalar() == 8


def test_an_operator_id_is_idempotent_and_refuses_other_content(store: ClickHouseStore) -> None:
    record = ChangeRecord(
        agent_id="billing-triage", kind="deploy", at=T0, description="v1.4.2", id="deploy-142",
        actor="ci",
    )  # fmt: skip
    first, created = record_change(store, "acme", record, T0 + DAY)
    again, created_again = record_change(
        store, "acme", record.model_copy(update={"actor": "someone"}), T0 + 2 * DAY
    )
    assert (created, created_again) == (True, False) and again == first
    with pytest.raises(ChangeConflict, match="deploy-142 is already recorded"):
        record_change(store, "acme", record.model_copy(update={"description": "v2"}), T0)
    _, other_tenant = record_change(store, "globex", record, T0)
    assert other_tenant
    assert [e.description for e in changes(store, "acme")] == ["v1.4.2"]


def test_availability_marks_become_intervals(store: ClickHouseStore) -> None:
    def mark(**fields: Any) -> ChangeEvent:
        return mark_availability(
            store, "acme", AvailabilityMark.model_validate(fields), T0 + 9 * DAY
        )[0]

    paired = mark(mode="paired", lightSourceId="openai/gpt-5", unreachableFrom=T0,
                  unreachableUntil=T0 + DAY, reason="vendor-outage")  # fmt: skip
    down = mark(mode="single", lightSourceId="acme/m", transition="unavailable", at=T0 + 2 * DAY)
    mark(mode="single", lightSourceId="acme/m", transition="available", at=T0 + 3 * DAY)
    still = mark(mode="single", surfaceId="route", transition="unavailable", at=T0 + 4 * DAY)
    assert paired.ends_at == T0 + DAY and paired.details["reason"] == "vendor-outage"
    marks = changes(store, "acme", kinds=("availability",))
    intervals = [(u.start, u.end, u.subject, u.reason) for u in unavailability(marks)]
    assert intervals == [
        (T0, T0 + DAY, "openai/gpt-5", "vendor-outage"),
        (T0 + 2 * DAY, T0 + 3 * DAY, "acme/m", ""),
        (T0 + 4 * DAY, None, "surface route", ""),
    ]
    assert (down.transition, still.transition, paired.transition) == (
        "unavailable", "unavailable", None
    )  # fmt: skip


def test_marks_and_requests_are_validated_at_the_door() -> None:
    bad = [
        ({"mode": "paired", "lightSourceId": "x", "unreachableFrom": T0,
          "unreachableUntil": T0}, "unreachableUntil must be after"),
        ({"mode": "single", "lightSourceId": "x"}, "needs its transition"),
        ({"mode": "single", "transition": "unavailable"}, "name the lightSourceId"),
        ({"mode": "single", "lightSourceId": "x", "transition": "available",
          "at": "1850-01-01T00:00:00Z"}, "outside the times the store holds"),
    ]  # fmt: skip
    for body, message in bad:
        with pytest.raises(ValueError, match=message):
            AvailabilityMark.model_validate(body)
    with pytest.raises(ValueError, match="name the surfaceId or the agentId"):
        ChangeRecord.model_validate({"kind": "deploy", "at": T0, "description": "x"})
    with pytest.raises(ValueError, match="timezone"):
        ChangeRecord.model_validate(
            {"agentId": "a", "kind": "deploy", "at": "2026-06-01T00:00:00", "description": "x"}
        )


def test_a_backfill_needs_a_materialized_view_to_a_table(store: ClickHouseStore) -> None:
    for name in ("holonograph.contract_texts", "holonograph.nowhere"):
        with pytest.raises(MigrationError, match="no materialized view TO a table"):
            backfill(store, name)
