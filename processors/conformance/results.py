"""Recorded conformance checks over time: `GET /lens/conformance/results` and the
web UI's conformance page. Every persisted check result (`conformance_results`, written
by `POST /lens/conformance/check` with `persist` and by `holonograph conformance check`),
newest first, of one surface or fixture, checked within [since, until) or judging events
of [judgedSince, judgedUntil): the history a live check cannot give, since it judges
today's fixture version on old events.
`holonograph conformance results` reads the same rows (`check.list_results`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from processors.conformance.check import WindowDocument, count_results, list_results
from processors.jobs import Job, JobRequest, never_a_finding, saves_nothing
from schemas.conformance import Enforceability, Verdict
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.times import Clock
from schemas.utctime import UtcTime


class ResultsRequest(JobRequest):
    """Which recorded checks: a surface's or a fixture's (or every one), checked in a
    window, newest first."""

    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface"}

    surface_id: str | None = Field(None, min_length=1, description="Only this surface's.")
    fixture_id: str | None = Field(None, min_length=1, description="Only this fixture's.")
    since: UtcTime | None = Field(None, description="Checked at or after T (inclusive).")
    until: UtcTime | None = Field(None, description="Checked before T (exclusive).")
    judged_since: UtcTime | None = Field(
        None, description="Only checks whose events' window ends after T."
    )
    judged_until: UtcTime | None = Field(
        None, description="Only checks whose events' window starts before T."
    )
    limit: int = Field(100, ge=1, le=10_000, description="Newest results listed [100].")
    offset: int = Field(0, ge=0, description="Skip this many newest results (paging).")


Request = ResultsRequest


@with_config(ConfigDict(extra="forbid"))
class ResultDocument(TypedDict):
    checkId: str
    tenantId: str
    fixtureId: str
    fixtureVersion: int | None  # None: an inline fixture
    fixtureDigest: str
    ruleId: str
    surfaceId: str
    enforceability: Enforceability
    verdict: Verdict
    eventsChecked: int
    counts: dict[Verdict, int]
    evaluableShare: float | None
    window: WindowDocument  # the events' window the check judged
    runModes: list[str] | None
    checkedAt: dt.datetime
    failingEventIds: list[str]


@with_config(ConfigDict(extra="forbid"))
class ResultsDocument(TypedDict):
    results: list[ResultDocument]  # newest first, `offset` on
    count: int  # listed here
    total: int  # in the selection, every page
    offset: int


@dataclass(frozen=True)
class ResultsReport:
    results: list[dict[str, Any]]
    total: int
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "results": self.results,
            "count": len(self.results),
            "total": self.total,
            "offset": self.offset,
        }


Report = ResultsReport


def run(store: Store, request: ResultsRequest, clock: Clock) -> ResultsReport:
    """The tenant's recorded results of the selection, a page of them (read-only)."""
    tenant = request.tenant or DEFAULT_TENANT
    rows = list_results(
        store, surface_id=request.surface_id, fixture_id=request.fixture_id,
        since=request.since, until=request.until, tenant_id=tenant,
        judged_since=request.judged_since, judged_until=request.judged_until,
        limit=request.limit, offset=request.offset,
    )  # fmt: skip
    total = count_results(
        store, surface_id=request.surface_id, fixture_id=request.fixture_id,
        since=request.since, until=request.until, tenant_id=tenant,
        judged_since=request.judged_since, judged_until=request.judged_until,
    )  # fmt: skip
    return ResultsReport(rows, total, request.offset)


persist = saves_nothing
finding = never_a_finding  # a history is information; `check` is the gate

JOB = Job("conformance.results", Request, ResultsDocument, run, persist, finding)
