"""Arrivals per minute: the events the store received (by `ingested_at`) and the spans
fail-closed validation rejected (by `received_at`) in each of the last `minutes` whole
minutes up to now, every minute listed (a quiet minute is a zero, never a gap).
GET /holonograph/activity runs this job; the web UI's overview polls it for the ingest
rate and the rejections per minute.

Counted in ClickHouse over the deduplicated events (`FINAL`: a re-sent event counts
once, at its latest receipt), so the totals add up to what `status` counts over the
same minutes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobRequest, never_a_finding, saves_nothing
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS, QUARANTINE
from schemas.times import Clock, from_store_time, to_store_time

_MINUTE = dt.timedelta(minutes=1)


class ActivityRequest(JobRequest):
    """The last `minutes` whole minutes, the current one included."""

    minutes: int = Field(60, ge=1, le=1440, description="Minutes listed, up to now [60].")


Request = ActivityRequest


@with_config(ConfigDict(extra="forbid"))
class MinuteDocument(TypedDict):
    minute: dt.datetime  # the minute's start, UTC
    events: int  # events received in it
    rejections: int  # spans rejected in it


@with_config(ConfigDict(extra="forbid"))
class ActivityDocument(TypedDict):
    tenantId: str | None
    asOf: dt.datetime
    since: dt.datetime  # the first minute's start
    until: dt.datetime  # the end of the current minute
    events: int
    rejections: int
    perMinute: list[MinuteDocument]  # oldest first, one per minute


@dataclass(frozen=True)
class ActivityReport:
    document: ActivityDocument

    def to_json(self) -> dict[str, Any]:
        return dict(self.document)


Report = ActivityReport


def _per_minute(
    store: Store, table: str, column: str, since: dt.datetime, tenant: str | None
) -> dict[dt.datetime, int]:
    final = " FINAL" if table == EVALUATION_EVENTS.qualified else ""
    where = f"{column} >= {{since:DateTime64(3)}}"
    params: dict[str, Any] = {"since": to_store_time(since)}
    if tenant is not None:
        where += " AND tenant_id = {tenant:String}"
        params["tenant"] = tenant
    rows = store.query(
        f"SELECT toStartOfMinute({column}) AS minute, count() FROM {table}{final}"
        f" WHERE {where} GROUP BY minute",
        params,
    ).rows
    return {from_store_time(minute): int(n) for minute, n in rows}


def run(store: Store, request: ActivityRequest, clock: Clock) -> ActivityReport:
    """The per-minute counts up to `clock()` (read-only)."""
    now = clock()
    current = now.astimezone(dt.UTC).replace(second=0, microsecond=0)
    since = current - (request.minutes - 1) * _MINUTE
    events = _per_minute(store, EVALUATION_EVENTS.qualified, "ingested_at", since, request.tenant)
    rejected = _per_minute(store, QUARANTINE.qualified, "received_at", since, request.tenant)
    minutes = [since + i * _MINUTE for i in range(request.minutes)]
    per_minute = [
        MinuteDocument(minute=m, events=events.get(m, 0), rejections=rejected.get(m, 0))
        for m in minutes
    ]
    return ActivityReport(
        ActivityDocument(
            tenantId=request.tenant,
            asOf=now,
            since=since,
            until=current + _MINUTE,
            events=sum(m["events"] for m in per_minute),
            rejections=sum(m["rejections"] for m in per_minute),
            perMinute=per_minute,
        )
    )


persist = saves_nothing
finding = never_a_finding  # a quiet minute is information, not a failure

JOB = Job("activity", Request, ActivityDocument, run, persist, finding)
