"""`holonograph lessons overrides`: a surface's stored overrides over a window, each
with the evaluation events of its call (by correlation id)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, JsonValue, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobRequest, never_a_finding, saves_nothing
from processors.lessons.common import check_window
from processors.lessons.overrides import in_window
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.overrides import Override
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import Clock
from schemas.utctime import UtcTime

MAX_LIST = 1000


class OverridesRequest(JobRequest):
    """A surface's overrides over [since, until), oldest first."""

    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface"}

    surface_id: Id = Field(description="The surface.")
    since: UtcTime = Field(description="Window start, inclusive.")
    until: UtcTime = Field(description="Window end, exclusive.")
    limit: int = Field(100, ge=1, le=MAX_LIST, description="At most this many overrides.")


@dataclass(frozen=True)
class Listing:
    surface_id: str
    since: dt.datetime
    until: dt.datetime
    overrides: tuple[Override, ...]
    correlated: dict[str, list[str]]  # correlation id -> evaluation event ids

    def to_json(self) -> dict[str, Any]:
        return {
            "surfaceId": self.surface_id,
            "since": self.since,
            "until": self.until,
            "count": len(self.overrides),
            "overrides": [
                o.to_json() | {"evaluationEventIds": self.correlated.get(o.correlation_id, [])}
                for o in self.overrides
            ],
        }


def correlated_events(
    store: Store, tenant: str, surface_id: str, correlation_ids: list[str]
) -> dict[str, list[str]]:
    """The evaluation events of each call (by correlation id) on the surface."""
    if not correlation_ids:
        return {}
    sql = (
        f"SELECT correlation_id, groupUniqArray(100)(event_id) AS ids"
        f" FROM {EVALUATION_EVENTS.qualified}"
        " WHERE tenant_id = {tenant:String} AND surface_id = {surface:String}"
        " AND correlation_id IN {ids:Array(String)} GROUP BY correlation_id"
    )
    rows = store.query(sql, {"tenant": tenant, "surface": surface_id, "ids": correlation_ids})
    return {cid: sorted(ids) for cid, ids in rows.rows}


def run_listing(store: Store, request: OverridesRequest, clock: Clock) -> Listing:
    check_window(request.since, request.until)
    tenant = request.tenant or DEFAULT_TENANT
    found = in_window(
        store, tenant, request.surface_id, request.since, request.until, request.limit
    )
    cids = sorted({o.correlation_id for o in found})
    return Listing(
        request.surface_id, request.since, request.until, tuple(found),
        correlated_events(store, tenant, request.surface_id, cids),
    )  # fmt: skip


Request = OverridesRequest
Report = Listing
run = run_listing
persist = saves_nothing


finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class ListingDocument(TypedDict):
    surfaceId: str
    since: dt.datetime
    until: dt.datetime
    count: int
    overrides: list[dict[str, JsonValue]]


JOB = Job("lessons.overrides", Request, ListingDocument, run, persist, finding)
