"""`POST /fixtures/rerun`, `holonograph fixtures rerun`: run a live fixture over its
parent surface's stored events and answer the actual result beside the `expected[]`
assertions it carries (the Guide's chapter 12). Read-only: the result is not recorded
(`conformance check` records one)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, JsonValue, with_config
from typing_extensions import TypedDict

from processors.conformance.check import CheckResult, check_stored
from processors.jobs import Job, JobError, JobRequest, saves_nothing
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.times import Clock
from schemas.utctime import UtcTime


class RerunRequest(JobRequest):
    """The Guide's POST /fixtures/rerun body."""

    fixture_id: Id = Field(description="A live (approved or published) fixture.")
    since: UtcTime | None = Field(None, description="Window start (default until - 24h).")
    until: UtcTime | None = Field(None, description="Window end, exclusive (default now).")


@dataclass(frozen=True)
class Rerun:
    result: CheckResult

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "fixtureId": r.fixture.fixture_id,
            "version": r.fixture_version,
            "surfaceId": r.surface_id,
            "since": r.window.since,
            "until": r.window.until,
            "expected": [
                a.model_dump(mode="json", by_alias=True, exclude_none=True)
                for a in r.fixture.checks()
            ],
            "when": [
                a.model_dump(mode="json", by_alias=True, exclude_none=True)
                for a in r.fixture.when or []
            ],
            "actual": {
                "verdict": r.verdict,
                "eventsChecked": r.events_checked,
                "counts": dict(r.counts),
                "evaluableShare": r.evaluable_share,
                "failingEventIds": list(r.failing_event_ids),
            },
        }


Request = RerunRequest
Report = Rerun


def run(store: Store, request: Request, clock: Clock) -> Rerun:
    try:
        result = check_stored(
            store, request.fixture_id, since=request.since, until=request.until,
            persist=False, page_size=0, clock=clock, tenant_id=request.tenant or DEFAULT_TENANT,
        )  # fmt: skip
    except ValueError as err:
        raise JobError(str(err), "invalid_window") from None
    return Rerun(result)


def finding(report: Rerun) -> bool:
    """A regression: the fixture fails on some of its surface's events."""
    return report.result.verdict == "fail"


persist = saves_nothing


@with_config(ConfigDict(extra="forbid"))
class RerunDocument(TypedDict):
    fixtureId: str
    version: int
    surfaceId: str
    since: dt.datetime
    until: dt.datetime
    expected: list[dict[str, JsonValue]]
    when: list[dict[str, JsonValue]]
    actual: dict[str, JsonValue]


JOB = Job("fixtures.rerun", Request, RerunDocument, run, persist, finding)
