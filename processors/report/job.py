"""The report as a job (processors/jobs.py): `holonograph report`, `POST /holonograph/report`
and a schedule's `job: report` run this one code path.

The report's document (`ReportDocument`) is everything the page shows, as JSON: the CLI's
--json and the HTTP body. The page itself (`html.render`) is drawn from the same report:
the CLI writes it to --out, the HTTP API answers it to `Accept: text/html`.

Left out of the request, the window is the day that ended at the run's midnight UTC (a
nightly schedule reports yesterday) and stream status is judged at the run's time.
"""

from __future__ import annotations

import contextvars
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from pydantic import ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict

from processors.conformance.record import SuiteRun, summary
from processors.jobs import Job, JobError, JobRequest, never_a_finding, saves_nothing
from processors.quarantine.job import QuarantineDocument
from processors.report.gather import (
    DriftRunAge,
    LessonsState,
    ReportData,
    ReportRequest,
    SurfaceSection,
    gather,
    steps,
    surfaces_in_window,
)
from processors.report.headline import headline
from processors.series.cells import SelectionError
from schemas.analysis import Role, SeriesRead
from schemas.changes import ChangeEvent
from schemas.compare import CompareReport
from schemas.completeness import CompletenessReport
from schemas.events import Provenance
from schemas.store import Store
from schemas.times import Clock
from schemas.utctime import UtcTime

DEFAULT_DAYS = 1


class Progress(Protocol):
    """Who watches a report being gathered (the CLI's bar on a terminal): told how many
    steps there are, then each step as it starts."""

    def begin(self, total: int) -> None: ...

    def step(self, label: str) -> None: ...


# The caller's progress for the report it runs (the runner passes a request, a store and
# a clock, no callback): the CLI sets it around its run; HTTP and schedules leave it.
PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "report_progress", default=None
)


class ReportJobRequest(JobRequest):
    """`holonograph report` and `POST /holonograph/report`: one window of the token's (or
    `--tenant`'s) tenant; `surfaceId` left out: every surface with events in it."""

    # A surface the tenant never had events for is refused (`processors.names`), never
    # a page of zeros for a misspelt --surface.
    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface"}

    since: UtcTime | None = Field(
        None, description="Window start, inclusive (default: a day before until)."
    )
    until: UtcTime | None = Field(
        None, description="Window end, exclusive (default: the run's midnight UTC)."
    )
    surface_id: str | None = Field(
        None, min_length=1, description="One surface (default: every surface with events)."
    )
    as_of: UtcTime | None = Field(None, description="Judge stream status at T (default: now).")
    provenances: tuple[Provenance | Literal["any"], ...] = Field(
        ("production-state",), description="Only these provenances; 'any' reads every one."
    )
    role: Role = Field(
        "primary", description="The pass-rate series of a multiplexed surface (primary, observer"
        " or all)."
    )  # fmt: skip
    light_source: str = Field("", description="Only events that answered for this light source.")

    @model_validator(mode="after")
    def _window(self) -> ReportJobRequest:
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValueError("until must be after since")
        return self

    def analysis(self, now: dt.datetime) -> ReportRequest:
        """What `gather` reads for this request at run time `now`."""
        until = self.until or now.astimezone(dt.UTC).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        since = self.since or until - dt.timedelta(days=DEFAULT_DAYS)
        try:
            return ReportRequest(
                since=since,
                until=until,
                as_of=self.as_of or now,
                surface_id=self.surface_id,
                tenant_id=self.tenant,
                provenances=() if "any" in self.provenances else tuple(self.provenances),
                role=self.role,
                light_source=self.light_source,
            )
        except ValueError as err:
            raise JobError(str(err).replace("--", "")) from None


Request = ReportJobRequest


@dataclass(frozen=True)
class Report:
    """What the report read (`gather`): the page is drawn from it, its JSON is
    `to_json()`."""

    data: ReportData

    def to_json(self) -> dict[str, Any]:
        data = self.data
        r = data.request
        return {
            "tenantId": r.tenant_id,
            "since": r.since,
            "until": r.until,
            "asOf": data.generated_at,
            "surfaceId": r.surface_id,
            "provenances": list(r.provenances),
            "role": r.role,
            "lightSource": r.light_source,
            "headline": headline(data),
            "completeness": data.completeness.model_dump(by_alias=True),
            "rejections": data.rejections.to_json(),
            "harnessConformance": [_harness(r) for r in data.harness],
            "surfaces": [_surface(s) for s in data.surfaces],
        }


def _harness(run: SuiteRun) -> dict[str, Any]:
    return {
        "suiteId": run.suite_id,
        "revision": run.suite_revision,
        "runId": run.run_id,
        "ranAt": run.ran_at,
        "status": run.status,
        "executor": run.executor,
        "cells": summary(run.cells),
        "failing": [
            {
                "combinationId": c.combination_id,
                "scenarioId": c.scenario_id,
                "passRate": c.pass_rate,
                "failureClasses": c.failure_classes,
                "regressions": list(c.regressions),
            }
            for c in run.cells
            if c.status == "failed"
        ],
    }


def _surface(section: SurfaceSection) -> dict[str, Any]:
    return {
        "surfaceId": section.surface_id,
        "selection": section.selection.to_json() if section.selection else None,
        "series": {
            dimension: [
                {
                    "hour": p.hour,
                    "graded": p.graded,
                    "passes": p.passes,
                    "passRate": p.pass_rate,
                    "completenessLowerBound": p.completeness_lower_bound,
                }
                for p in points
            ]
            for dimension, points in section.series.items()
        },
        "scores": {
            dimension: [
                {
                    "hour": p.hour,
                    "scored": p.scored,
                    "meanScore": p.mean_score,
                    "completenessLowerBound": p.completeness_lower_bound,
                }
                for p in points
            ]
            for dimension, points in section.scores.items()
        },
        "changePoints": [
            {
                "dimensionId": m.dimension_id,
                "kind": m.kind,
                "at": m.at,
                "until": m.until,
                "source": m.source,
                "reason": m.reason,
                "confident": m.confident,
                "effect": m.effect,
            }
            for m in section.marks
        ],
        "driftRun": _drift_run(section.drift_run) if section.drift_run else None,
        "changes": [c.model_dump(by_alias=True) for c in section.changes],
        "verdicts": [
            {
                "dimensionId": v.dimension_id,
                "verdict": v.verdict,
                "createdAt": v.created_at,
                "since": v.since,
                "until": v.until,
            }
            for v in section.verdicts
        ],
        "comparison": section.comparison.to_json() if section.comparison else None,
        "lessons": _lessons(section.lessons) if section.lessons else None,
    }


def _drift_run(age: DriftRunAge) -> dict[str, Any]:
    return {
        "runId": age.run_id,
        "runAt": age.run_at,
        "newestArrival": age.newest_arrival,
        "stale": age.stale,
        "behindSeconds": age.behind_seconds,
    }


def _lessons(state: LessonsState) -> dict[str, Any]:
    return {
        "overrides": state.overrides,
        "openClusters": state.open_clusters,
        "draftsAtGate": state.drafts_at_gate,
        "approvedUnpublished": state.approved_unpublished,
        "published": [
            {
                "artifactId": p.artifact_id,
                "version": p.version,
                "kind": p.kind,
                "publishedAt": p.published_at,
            }
            for p in state.published
        ],
    }


# --- the document (the OpenAPI response schema is generated from it)

_FORBID = ConfigDict(extra="forbid")


@with_config(_FORBID)
class HourDocument(TypedDict):
    hour: dt.datetime
    graded: int
    passes: int
    passRate: float
    completenessLowerBound: float | None


@with_config(_FORBID)
class ScoreHourDocument(TypedDict):
    hour: dt.datetime
    scored: int  # outcomes with a score in the hour
    meanScore: float
    completenessLowerBound: float | None


@with_config(_FORBID)
class ChangePointDocument(TypedDict):
    """A change point (`kind` change_point) or bracketed window of the latest stored
    drift run over the surface and series, overlapping the window."""

    dimensionId: str
    kind: str
    at: dt.datetime
    until: dt.datetime
    source: str
    reason: str
    confident: bool
    effect: float | None


@with_config(_FORBID)
class DriftRunDocument(TypedDict):
    """The latest drift run of the series; `stale` when events of the window arrived
    after it ran (`behindSeconds` later): its change points do not count them."""

    runId: str
    runAt: dt.datetime
    newestArrival: dt.datetime | None
    stale: bool
    behindSeconds: float | None


@with_config(_FORBID)
class VerdictDocument(TypedDict):
    """The newest verdict of a dimension whose reading's window overlaps the report's."""

    dimensionId: str
    verdict: str
    createdAt: dt.datetime
    since: dt.datetime | None  # the judged reading's window (None: reading not stored)
    until: dt.datetime | None


@with_config(_FORBID)
class PublishedDocument(TypedDict):
    artifactId: str
    version: int
    kind: str
    publishedAt: dt.datetime


@with_config(_FORBID)
class LessonsDocument(TypedDict):
    """The lessons pipeline on the surface (docs/lessons.md)."""

    overrides: int  # received in the window
    openClusters: int  # recorded in the window, nothing published from them
    draftsAtGate: int  # latest gate record `drafted`
    approvedUnpublished: int  # latest gate record `approved`
    published: list[PublishedDocument]  # artifacts published in the window


@with_config(_FORBID)
class SurfaceDocument(TypedDict):
    surfaceId: str
    selection: SeriesRead | None
    series: dict[str, list[HourDocument]]  # per pass/fail dimension, hourly
    scores: dict[str, list[ScoreHourDocument]]  # per scored dimension, hourly
    changePoints: list[ChangePointDocument]
    driftRun: DriftRunDocument | None  # None: no drift run stored for the series
    changes: list[ChangeEvent]  # recorded changes of the surface in the window
    verdicts: list[VerdictDocument]  # the newest variance verdict per dimension
    comparison: CompareReport | None  # `compare` over the window
    lessons: LessonsDocument | None  # None: a store without the lessons tables


@with_config(_FORBID)
class HarnessCellDocument(TypedDict):
    combinationId: str
    scenarioId: str
    passRate: float | None
    failureClasses: dict[str, int]
    regressions: list[str]


@with_config(_FORBID)
class HarnessRunDocument(TypedDict):
    """The latest harness conformance run of a suite in the window (docs/conformance.md)."""

    suiteId: str
    revision: int
    runId: str
    ranAt: dt.datetime
    status: str
    executor: str
    cells: dict[str, int]  # passed / failed / skipped
    failing: list[HarnessCellDocument]


@with_config(_FORBID)
class ReportDocument(TypedDict):
    tenantId: str | None
    since: dt.datetime
    until: dt.datetime
    asOf: dt.datetime
    surfaceId: str | None
    provenances: list[str]
    role: Role
    lightSource: str
    headline: str  # one sentence: what changed, what is wrong (`report.headline`)
    completeness: CompletenessReport
    rejections: QuarantineDocument
    harnessConformance: list[HarnessRunDocument]
    surfaces: list[SurfaceDocument]


def run(store: Store, request: ReportJobRequest, clock: Clock) -> Report:
    """Every section of the report over the window, read-only."""
    asked = request.analysis(clock())
    progress = PROGRESS.get()
    try:
        surfaces = surfaces_in_window(store, asked)
        if progress is None:
            return Report(gather(store, asked, surfaces, lambda step: None))
        progress.begin(steps(asked, surfaces))
        return Report(gather(store, asked, surfaces, progress.step))
    except SelectionError as err:
        raise JobError(str(err), "series_ambiguous") from None


persist = saves_nothing
finding = never_a_finding  # the sections' own commands say what is a finding

JOB = Job("report", Request, ReportDocument, run, persist, finding)
