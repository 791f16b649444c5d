"""The approval gate: nothing runs as a check until a named approver committed it.

Each approval or rejection is an immutable record in `conformance_fixtures` with the
approver, the time, the source surface and the fixture's canonical JSON. Editing a
fixture and approving it again appends the next version; approving the content that is
already live is a no-op that returns the live record. A fixture is live while its
newest record is an approval; a rejection (which needs a comment) retires it.
Fixtures belong to a tenant: ids, versions and live records are per tenant, and a
tenant's checks run only its own fixtures.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from processors.conformance.suite import FixtureLookup, ResolvedFixture
from processors.jobs import Job, JobRequest, never_a_finding
from schemas.conformance import ApprovalRequest, Enforceability, Fixture, RejectionRequest
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import CONFORMANCE_FIXTURES
from schemas.times import Clock, from_store_time, utc_now

Action = Literal["approved", "rejected"]


def new_record_id() -> str:
    return f"apv_{uuid.uuid4().hex}"


def canonical_json(fixture: Fixture) -> str:
    """Key-sorted compact JSON: equal fixtures have equal text and digest."""
    return json.dumps(fixture.to_json(), sort_keys=True, separators=(",", ":"))


def fixture_digest(fixture: Fixture) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(fixture).encode()).hexdigest()


@dataclass(frozen=True)
class FixtureRecord:
    record_id: str
    fixture_id: str
    version: int
    action: Action
    surface_id: str
    source_surface_id: str
    rule_id: str
    enforceability: str
    approver_id: str
    comment: str
    fixture: Fixture
    fixture_digest: str
    recorded_at: dt.datetime
    tenant_id: str = DEFAULT_TENANT

    @property
    def live(self) -> bool:
        return self.action == "approved"

    def to_json(self) -> dict[str, Any]:
        return {
            "tenantId": self.tenant_id,
            "eventId": self.record_id,
            "fixtureId": self.fixture_id,
            "version": self.version,
            "action": self.action,
            "surfaceId": self.surface_id,
            "sourceSurfaceId": self.source_surface_id,
            "ruleId": self.rule_id,
            "enforceability": self.enforceability,
            "approverId": self.approver_id,
            "comment": self.comment or None,
            "recordedAt": self.recorded_at,
            "fixtureDigest": self.fixture_digest,
            "fixture": self.fixture.to_json(),
        }


@dataclass(frozen=True)
class Outcome:
    """An approval or rejection: the record in force and whether this call wrote it."""

    record: FixtureRecord
    created: bool

    def to_json(self) -> dict[str, Any]:
        return {"created": self.created, **self.record.to_json()}


def _record(row: dict[str, Any]) -> FixtureRecord:
    recorded = from_store_time(row["recorded_at"])
    return FixtureRecord(
        tenant_id=row["tenant_id"],
        record_id=row["record_id"],
        fixture_id=row["fixture_id"],
        version=int(row["version"]),
        action=row["action"],
        surface_id=row["surface_id"],
        source_surface_id=row["source_surface_id"],
        rule_id=row["rule_id"],
        enforceability=row["enforceability"],
        approver_id=row["approver_id"],
        comment=row["comment"],
        fixture=Fixture.model_validate_json(row["fixture"]),
        fixture_digest=row["fixture_digest"],
        recorded_at=recorded,
    )


def _select(
    store: Store, tenant_id: str, where: str, parameters: dict[str, Any]
) -> list[FixtureRecord]:
    sql = (
        f"SELECT {CONFORMANCE_FIXTURES.column_list()} FROM {CONFORMANCE_FIXTURES.qualified} FINAL"
        f" WHERE tenant_id = {{tenant:String}} AND {where}"
        " ORDER BY fixture_id, version, recorded_at, record_id"
    )
    rows = store.query(sql, {**parameters, "tenant": tenant_id}).dicts()
    return [_record(row) for row in rows]


def history(store: Store, fixture_id: str, tenant_id: str = DEFAULT_TENANT) -> list[FixtureRecord]:
    """Every record of one fixture of a tenant, oldest version first."""
    return _select(store, tenant_id, "fixture_id = {fixture_id:String}", {"fixture_id": fixture_id})


def _latest_per_fixture(records: list[FixtureRecord]) -> list[FixtureRecord]:
    latest: dict[str, FixtureRecord] = {}
    for record in records:  # ordered by version, so the last one wins
        latest[record.fixture_id] = record
    return list(latest.values())


def list_fixtures(
    store: Store,
    surface_id: str | None = None,
    *,
    all_versions: bool = False,
    tenant_id: str = DEFAULT_TENANT,
) -> list[FixtureRecord]:
    """The newest record per fixture (or every version) of a tenant, optionally for
    one surface."""
    if surface_id is None:
        records = _select(store, tenant_id, "1", {})
    else:
        records = _select(
            store, tenant_id, "surface_id = {surface_id:String}", {"surface_id": surface_id}
        )
    return records if all_versions else _latest_per_fixture(records)


def live_fixture(
    store: Store, fixture_id: str, tenant_id: str = DEFAULT_TENANT
) -> FixtureRecord | None:
    records = history(store, fixture_id, tenant_id)
    return records[-1] if records and records[-1].live else None


def approved_version(
    store: Store, fixture_id: str, version: int | None, tenant_id: str = DEFAULT_TENANT
) -> FixtureRecord:
    """The live approved version of a tenant's fixture, or its `version` if that one
    was approved; `LookupError` saying why there is none."""
    records = history(store, fixture_id, tenant_id)
    if not records:
        raise LookupError(f"approved fixture {fixture_id} is not in the store")
    if version is None:
        latest = records[-1]
        if not latest.live:
            raise LookupError(
                f"approved fixture {fixture_id}: its latest version {latest.version} was"
                f" {latest.action}, so no version is live (pin an approved one)"
            )
        return latest
    for record in reversed(records):
        if record.version == version and record.action == "approved":
            return record
    raise LookupError(f"approved fixture {fixture_id}: version {version} was never approved")


def store_fixture_lookup(store: Store, tenant_id: str = DEFAULT_TENANT) -> FixtureLookup:
    """`approvedFixtures` of a harness suite, answered from this store's fixtures of
    the tenant."""

    def lookup(fixture_id: str, version: int | None) -> ResolvedFixture:
        record = approved_version(store, fixture_id, version, tenant_id)
        return ResolvedFixture(record.fixture, record.version, record.fixture_digest)

    return lookup


def live_fixtures(
    store: Store, surface_id: str, tenant_id: str = DEFAULT_TENANT
) -> list[FixtureRecord]:
    """The approved version of every live fixture of a tenant's surface: what checks run."""
    return [r for r in list_fixtures(store, surface_id, tenant_id=tenant_id) if r.live]


def plan(
    store: Store,
    fixture: Fixture,
    action: Action,
    approver_id: str,
    source_surface_id: str,
    comment: str,
    clock: Clock,
    new_id: Callable[[], str],
    tenant_id: str,
) -> Outcome:
    """What recording `action` on `fixture` would do (read-only): the record in force
    when it already says so (`created` False), else the next version's record."""
    previous = history(store, fixture.fixture_id, tenant_id)
    digest = fixture_digest(fixture)
    if previous:
        last = previous[-1]
        if last.action == action and last.fixture_digest == digest:
            return Outcome(last, created=False)
    record = FixtureRecord(
        record_id=new_id(),
        fixture_id=fixture.fixture_id,
        version=previous[-1].version + 1 if previous else 1,
        action=action,
        surface_id=fixture.surface_id,
        source_surface_id=source_surface_id,
        rule_id=fixture.rule_id,
        enforceability=fixture.enforceability,
        approver_id=approver_id,
        comment=comment,
        fixture=fixture,
        fixture_digest=digest,
        recorded_at=_to_millisecond(clock().astimezone(dt.UTC)),
        tenant_id=tenant_id,
    )
    return Outcome(record, created=True)


def _to_millisecond(moment: dt.datetime) -> dt.datetime:
    """The store keeps milliseconds: an answer says what a later read will."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def record_outcome(store: Store, report: Outcome) -> Outcome:
    """Write the record `plan` made (nothing when it was already in force)."""
    if report.created:
        record = report.record
        row = [getattr(record, c) for c in CONFORMANCE_FIXTURES.columns[:-3]]
        row += [canonical_json(record.fixture), record.fixture_digest, record.recorded_at]
        store.insert(CONFORMANCE_FIXTURES.qualified, [row], CONFORMANCE_FIXTURES.columns)
    return report


def approve(
    store: Store,
    request: ApprovalRequest,
    *,
    clock: Clock = utc_now,
    new_id: Callable[[], str] = new_record_id,
    tenant_id: str = DEFAULT_TENANT,
) -> Outcome:
    """Commit a fixture as the next version of its id in the tenant (a no-op if
    already live as is)."""
    return record_outcome(store, _approval(store, request, clock, new_id, tenant_id))


def _approval(
    store: Store, request: ApprovalRequest, clock: Clock, new_id: Callable[[], str], tenant: str
) -> Outcome:
    return plan(
        store,
        request.fixture,
        "approved",
        request.approver_id,
        request.source_surface_id,
        request.comment or "",
        clock,
        new_id,
        tenant,
    )


def reject(
    store: Store,
    request: RejectionRequest,
    *,
    clock: Clock = utc_now,
    new_id: Callable[[], str] = new_record_id,
    tenant_id: str = DEFAULT_TENANT,
) -> Outcome:
    """Record that an approver turned a fixture down, with why; retires a live one."""
    outcome = plan(
        store,
        request.fixture,
        "rejected",
        request.approver_id,
        request.source_surface_id,
        request.comment,
        clock,
        new_id,
        tenant_id,
    )
    return record_outcome(store, outcome)


# --- the job (processors.jobs): POST /lens/conformance/fixtures ------------------------


class FixturesRequest(ApprovalRequest, JobRequest):
    """The Guide's POST /lens/conformance/fixtures body: who approves which fixture."""

    def persists(self) -> bool:
        return True


Request = FixturesRequest


Report = Outcome


def run(store: Store, request: Request, clock: Clock) -> Outcome:
    """The approval this request records: the next version, or the record already in
    force with this content (`created` False)."""
    return _approval(store, request, clock, new_record_id, request.tenant or DEFAULT_TENANT)


@with_config(ConfigDict(extra="forbid"))
class OutcomeDocument(TypedDict):
    """`Outcome.to_json()`: the record in force and whether this call wrote it."""

    created: bool
    tenantId: str
    eventId: str
    fixtureId: str
    version: int
    action: Action
    surfaceId: str
    sourceSurfaceId: str
    ruleId: str
    enforceability: Enforceability
    approverId: str
    comment: str | None
    recordedAt: dt.datetime
    fixtureDigest: str
    fixture: Fixture


persist = record_outcome
finding = never_a_finding

JOB = Job(
    "conformance.fixtures", Request, OutcomeDocument, run, persist, finding, owner_tenant=True
)
