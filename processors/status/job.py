"""What the collector knows, in one read: per tenant its surfaces, their dimensions,
event counts and last arrival, its streams and rejections; the store's size on disk;
and each schedule's health from its recorded runs. `holonograph status` and
GET /holonograph/status run this job; the names it lists are the ones an analysis
accepts (`processors.names`).

Every count is aggregated in ClickHouse over the deduplicated rows (`FINAL`), so the
numbers are the ones the analyses read. The store's size is the whole store's and is
shown only to a view of every tenant: one tenant's view never learns how much the
others stored.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from processors.jobs import Job, JobRequest, saves_nothing
from processors.tenants import store_tenants
from schemas.store import Store
from schemas.tables import (
    DATABASE,
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    QUARANTINE,
    SCHEDULE_RUNS,
)
from schemas.times import Clock, from_store_time


class _Document(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class DimensionStatus(_Document):
    dimension_id: str
    outcomes: int


class SurfaceStatus(_Document):
    surface_id: str
    events: int
    first_event_at: dt.datetime
    last_event_at: dt.datetime
    last_arrival_at: dt.datetime
    dimensions: list[DimensionStatus]
    agents: list[str]  # the agents whose events carry the surface, by name


class TenantStatus(_Document):
    tenant_id: str
    events: int
    last_arrival_at: dt.datetime | None
    streams: int
    quarantined: int
    last_rejection_at: dt.datetime | None
    surfaces: list[SurfaceStatus]


class ScheduleStatus(_Document):
    """A schedule's health from its recorded runs: the latest run's state and when the
    last one that did not fail ran."""

    tenant_id: str
    schedule: str
    job: str
    runs: int
    failed: int
    last_fire_time: dt.datetime
    last_status: str
    last_error: str
    last_success_at: dt.datetime | None
    delivery: str
    healthy: bool


class StoreSize(_Document):
    bytes_on_disk: int
    rows: int
    tables: int


class StatusDocument(_Document):
    as_of: dt.datetime
    tenant: str | None
    tenants: list[TenantStatus]
    store: StoreSize | None
    schedules: list[ScheduleStatus]


class StatusRequest(JobRequest):
    """`holonograph status` and GET /holonograph/status take nothing but the tenant (the
    token's over HTTP; on the CLI `--tenant`, else every tenant)."""


Request = StatusRequest


@dataclass(frozen=True)
class StatusReport:
    document: StatusDocument

    def to_json(self) -> dict[str, Any]:
        return self.document.model_dump(by_alias=True)


Report = StatusReport


def _tenant_clause(tenant: str | None) -> str:
    return "tenant_id = {tenant:String}" if tenant is not None else "1"


def _tenant_params(tenant: str | None) -> dict[str, Any]:
    """Bound only when the clause names it (the store refuses an unused parameter)."""
    return {"tenant": tenant} if tenant is not None else {}


def _surfaces(store: Store, tenant: str | None) -> dict[str, list[SurfaceStatus]]:
    where, params = _tenant_clause(tenant), _tenant_params(tenant)
    dimensions: dict[tuple[str, str], list[DimensionStatus]] = {}
    for tenant_id, surface, dimension, outcomes in store.query(
        f"SELECT tenant_id, surface_id, dimension_id, count()"
        f" FROM {EVALUATION_DIMENSIONS.qualified} FINAL WHERE {where}"
        " GROUP BY tenant_id, surface_id, dimension_id"
        " ORDER BY tenant_id, surface_id, dimension_id",
        params,
    ).rows:
        dimensions.setdefault((tenant_id, surface), []).append(
            DimensionStatus(dimension_id=dimension, outcomes=outcomes)
        )
    surfaces: dict[str, list[SurfaceStatus]] = {}
    for tenant_id, surface, events, first, last, arrival, agents in store.query(
        "SELECT tenant_id, surface_id, count(), min(timestamp), max(timestamp),"
        " max(ingested_at), arraySort(groupUniqArrayIf(agent_id, agent_id != ''))"
        f" FROM {EVALUATION_EVENTS.qualified} FINAL WHERE {where}"
        " GROUP BY tenant_id, surface_id ORDER BY tenant_id, surface_id",
        params,
    ).rows:
        surfaces.setdefault(tenant_id, []).append(
            SurfaceStatus(
                surface_id=surface,
                events=events,
                first_event_at=from_store_time(first),
                last_event_at=from_store_time(last),
                last_arrival_at=from_store_time(arrival),
                dimensions=dimensions.get((tenant_id, surface), []),
                agents=list(agents),
            )
        )
    return surfaces


def _per_tenant(store: Store, sql: str, tenant: str | None) -> dict[str, tuple[Any, ...]]:
    rows = store.query(sql.format(where=_tenant_clause(tenant)), _tenant_params(tenant)).rows
    return {str(row[0]): tuple(row[1:]) for row in rows}


def _tenants(store: Store, tenant: str | None) -> list[TenantStatus]:
    surfaces = _surfaces(store, tenant)
    streams = _per_tenant(
        store,
        f"SELECT tenant_id, uniqExact(emission_stream) FROM {EMISSION_RECEIPTS.qualified}"
        " WHERE {where} GROUP BY tenant_id",
        tenant,
    )
    rejected = _per_tenant(
        store,
        f"SELECT tenant_id, count(), max(received_at) FROM {QUARANTINE.qualified}"
        " WHERE {where} GROUP BY tenant_id",
        tenant,
    )
    names = [tenant] if tenant is not None else store_tenants(store)
    out = []
    for name in names:
        own = surfaces.get(name, [])
        quarantined, last_rejection = rejected.get(name, (0, None))
        out.append(
            TenantStatus(
                tenant_id=name,
                events=sum(s.events for s in own),
                last_arrival_at=max((s.last_arrival_at for s in own), default=None),
                streams=streams.get(name, (0,))[0],
                quarantined=quarantined,
                last_rejection_at=from_store_time(last_rejection) if quarantined else None,
                surfaces=own,
            )
        )
    return out


def _store_size(store: Store) -> StoreSize:
    bytes_on_disk, rows, tables = store.query(
        "SELECT sum(bytes_on_disk), sum(rows), uniqExact(table) FROM system.parts"
        " WHERE database = {db:String} AND active",
        {"db": DATABASE},
    ).rows[0]
    return StoreSize(bytes_on_disk=bytes_on_disk, rows=rows, tables=tables)


def _schedules(store: Store, tenant: str | None) -> list[ScheduleStatus]:
    rows = store.query(
        "SELECT tenant_id, schedule, argMax(job, fire_time), count(),"
        " countIf(status = 'failed'), max(fire_time), argMax(status, fire_time),"
        " argMax(error, fire_time), maxIf(fire_time, status != 'failed'),"
        " countIf(status != 'failed'), argMax(delivery, fire_time)"
        f" FROM {SCHEDULE_RUNS.qualified} FINAL WHERE {_tenant_clause(tenant)}"
        " GROUP BY tenant_id, schedule ORDER BY tenant_id, schedule",
        _tenant_params(tenant),
    ).rows
    out = []
    for tenant_id, schedule, job, runs, failed, last, status, error, ok_at, ok_n, delivery in rows:
        out.append(
            ScheduleStatus(
                tenant_id=tenant_id,
                schedule=schedule,
                job=job,
                runs=runs,
                failed=failed,
                last_fire_time=from_store_time(last),
                last_status=status,
                last_error=error,
                last_success_at=from_store_time(ok_at) if ok_n else None,
                delivery=delivery,
                healthy=status != "failed" and delivery != "failed",
            )
        )
    return out


def run(store: Store, request: StatusRequest, clock: Clock) -> StatusReport:
    """The store as it is now (read-only)."""
    tenant = request.tenant
    return StatusReport(
        StatusDocument(
            as_of=clock(),
            tenant=tenant,
            tenants=_tenants(store, tenant),
            store=_store_size(store) if tenant is None else None,
            schedules=_schedules(store, tenant),
        )
    )


def finding(report: StatusReport) -> bool:
    """A schedule whose latest run failed, or whose alert could not be delivered."""
    return any(not s.healthy for s in report.document.schedules)


persist = saves_nothing

JOB = Job("status", Request, StatusDocument, run, persist, finding)
