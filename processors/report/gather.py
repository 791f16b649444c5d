"""Everything the report shows, read from the store: the same analyses the commands
run (`compare`, `completeness`, `quarantine`, `changes`) plus the stored drift runs and
variance verdicts, and hourly pass rates aggregated in ClickHouse."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from processors.compare.job import CompareRequest, compare
from processors.completeness.job import Selection, read_report
from processors.conformance.record import SuiteRun, latest_runs
from processors.quarantine import QuarantineReport, QuarantineSelection, read_quarantine
from processors.series.cells import SELECTION_FILTER, SERIES_FILTER, SeriesQuery, read_selection
from processors.series.freshness import newest_arrival
from schemas.analysis import ROLES, Role, SeriesRead
from schemas.changelog import ChangeQuery, list_changes
from schemas.changes import ChangeEvent
from schemas.compare import CompareReport
from schemas.completeness import CompletenessReport
from schemas.migrations import table_exists
from schemas.placement import placed_in
from schemas.store import Store
from schemas.tables import (
    ANALYSIS_EVENTS,
    CHANGE_EVENTS,
    DRIFT_CHANGE_POINTS,
    EVALUATION_DIMENSIONS,
    HARNESS_CONFORMANCE_RESULTS,
    LESSON_ARTIFACTS,
    LESSON_CLUSTERS,
    LESSON_DRAFTS,
    LESSON_OVERRIDES,
    VARIANCE_READINGS,
)
from schemas.times import from_store_time, to_store_time

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportRequest:
    """One window of one tenant (None: every tenant); `surface_id` None: every surface
    with events in the window. `as_of` is when stream status is judged (live or dead)."""

    since: dt.datetime
    until: dt.datetime
    as_of: dt.datetime
    surface_id: str | None = None
    tenant_id: str | None = None
    provenances: tuple[str, ...] = ("production-state",)
    role: Role = "primary"  # the pass-rate series of a multiplexed surface (`series.cells`)
    light_source: str = ""

    def __post_init__(self) -> None:
        if self.until <= self.since:
            raise ValueError("--until must be after --since")
        if self.role not in ROLES:
            raise ValueError(f"--role must be one of {', '.join(ROLES)}")


@dataclass(frozen=True)
class HourPoint:
    hour: dt.datetime
    graded: int
    passes: int
    completeness_lower_bound: float | None

    @property
    def pass_rate(self) -> float:
        return self.passes / self.graded


@dataclass(frozen=True)
class ScoreHour:
    """One hour of a scored dimension: how many outcomes carried a score, their mean,
    and the surface's completeness lower bound in that hour."""

    hour: dt.datetime
    scored: int
    mean_score: float
    completeness_lower_bound: float | None


@dataclass(frozen=True)
class ChangeMark:
    dimension_id: str
    kind: str  # change_point | bracketed_window
    at: dt.datetime
    until: dt.datetime
    source: str
    reason: str
    confident: bool
    effect: float | None


@dataclass(frozen=True)
class Verdict:
    """A variance verdict, and the window of the reading it judged (None: the reading
    is not in the store)."""

    dimension_id: str
    verdict: str
    created_at: dt.datetime
    since: dt.datetime | None = None
    until: dt.datetime | None = None


@dataclass(frozen=True)
class DriftRunAge:
    """The latest stored drift run of the surface's series, and whether events of the
    window arrived after it ran (`behind_seconds` later: its change points and brackets
    do not count them; rerun `holonograph drift`)."""

    run_id: str
    run_at: dt.datetime
    newest_arrival: dt.datetime | None

    @property
    def behind_seconds(self) -> float | None:
        if self.newest_arrival is None or self.newest_arrival <= self.run_at:
            return None
        return round((self.newest_arrival - self.run_at).total_seconds(), 3)

    @property
    def stale(self) -> bool:
        return self.behind_seconds is not None


@dataclass(frozen=True)
class Published:
    artifact_id: str
    version: int
    kind: str
    published_at: dt.datetime


@dataclass(frozen=True)
class LessonsState:
    """The lessons pipeline on one surface (docs/lessons.md): overrides received in the
    window, clusterings recorded in it whose cluster nothing was published from, drafts
    whose latest gate record before `until` is `drafted` (waiting for a name at the gate)
    or `approved` (not yet published), and artifacts published in the window."""

    overrides: int
    open_clusters: int
    drafts_at_gate: int
    approved_unpublished: int
    published: list[Published]


@dataclass
class SurfaceSection:
    surface_id: str
    series: dict[str, list[HourPoint]] = field(default_factory=dict)  # pass/fail dimensions
    scores: dict[str, list[ScoreHour]] = field(default_factory=dict)  # scored dimensions
    marks: list[ChangeMark] = field(default_factory=list)
    drift_run: DriftRunAge | None = None  # None: no drift run stored for the series
    changes: list[ChangeEvent] = field(default_factory=list)  # recorded change events
    verdicts: list[Verdict] = field(default_factory=list)
    comparison: CompareReport | None = None
    selection: SeriesRead | None = None  # which events the pass-rate series took
    lessons: LessonsState | None = None  # None: a store not migrated to 0012


@dataclass
class ReportData:
    request: ReportRequest
    generated_at: dt.datetime
    surfaces: list[SurfaceSection]
    completeness: CompletenessReport
    rejections: QuarantineReport
    harness: list[SuiteRun] = field(default_factory=list)  # latest run per suite


def steps(request: ReportRequest, surfaces: list[str]) -> int:
    """How many progress steps `gather` reports: six per surface and three more."""
    return 6 * len(surfaces) + 3


def surfaces_in_window(store: Store, request: ReportRequest) -> list[str]:
    """The surfaces to report: the one asked for, else every one with events."""
    if request.surface_id is not None:
        return [request.surface_id]
    rows = store.query(
        f"SELECT DISTINCT surface_id FROM {EVALUATION_DIMENSIONS.qualified} FINAL"
        " WHERE ({tenant:String} = '' OR tenant_id = {tenant:String})"
        " AND timestamp >= {since:DateTime64(3, 'UTC')}"
        " AND timestamp < {until:DateTime64(3, 'UTC')}"
        f" AND {placed_in(surface=None)}"
        " ORDER BY surface_id",
        {
            "tenant": request.tenant_id or "",
            "since": to_store_time(request.since),
            "until": to_store_time(request.until),
        },
    ).rows
    return [str(r[0]) for r in rows]


def gather(
    store: Store, request: ReportRequest, surfaces: list[str], progress: Progress
) -> ReportData:
    """Reads every section; `progress` is called once per step with what comes next.
    SelectionError when a surface's series asked for is several observers."""
    progress("delivery completeness")
    completeness = read_report(
        store,
        request.as_of,
        Selection(
            tenant=request.tenant_id,
            surface=request.surface_id,
            since=request.since,
            until=request.until,
        ),
        "hour",
    )
    progress("rejected spans")
    rejections = read_quarantine(
        store,
        QuarantineSelection(
            tenant=request.tenant_id, since=request.since, until=request.until, limit=10
        ),
    )
    progress("harness conformance")
    harness = []
    if table_exists(store, HARNESS_CONFORMANCE_RESULTS):  # a store not migrated to 0019: none
        harness = latest_runs(store, request.since, request.until, request.tenant_id)
    bounds = {
        (w.surface_id, w.bucket_start): w.completeness_lower_bound
        for w in completeness.windows
        if w.scope == "surface"
    }
    sections = []
    recorded = table_exists(store, CHANGE_EVENTS)  # a server not migrated to 0008: none
    lessons = table_exists(store, LESSON_ARTIFACTS)  # nor to 0012
    for surface_id in surfaces:
        section = SurfaceSection(surface_id)
        progress(f"{surface_id}: pass rates")
        section.selection = read_selection(store, _series_query(request, surface_id))
        section.series, section.scores = _hourly(store, request, surface_id, bounds)
        progress(f"{surface_id}: change points")
        section.marks = _marks(store, request, surface_id)
        section.drift_run = _drift_run(store, request, surface_id)
        progress(f"{surface_id}: recorded changes")
        if recorded:
            section.changes = list_changes(
                store, ChangeQuery(request.tenant_id, request.since, request.until, surface_id)
            )
        progress(f"{surface_id}: variance verdicts")
        section.verdicts = _verdicts(store, request, surface_id)
        progress(f"{surface_id}: vendor comparison")
        section.comparison = compare(
            store,
            CompareRequest(
                surface_id=surface_id,
                since=request.since,
                until=request.until,
                provenances=request.provenances,
                tenant_id=request.tenant_id,
            ),
        )
        progress(f"{surface_id}: lessons")
        if lessons:
            section.lessons = _lessons(store, request, surface_id)
        sections.append(section)
    return ReportData(
        request=request,
        generated_at=request.as_of,
        surfaces=sections,
        completeness=completeness,
        rejections=rejections,
        harness=harness,
    )


def _series_query(request: ReportRequest, surface_id: str) -> SeriesQuery:
    return SeriesQuery(
        surface_id=surface_id,
        since=request.since,
        until=request.until,
        provenances=request.provenances,
        tenant_id=request.tenant_id,
        role=request.role,
        light_source=request.light_source,
    )


def _hourly(
    store: Store,
    request: ReportRequest,
    surface_id: str,
    bounds: dict[tuple[str, dt.datetime], float],
) -> tuple[dict[str, list[HourPoint]], dict[str, list[ScoreHour]]]:
    """Per hour of each dimension: the pass rate of the graded outcomes, and the mean
    score of those that carry one, from the same events (series, selection), in one
    read of the window."""
    query = _series_query(request, surface_id)
    rows = store.query(
        f"""
        SELECT dimension_id, toStartOfHour(timestamp) AS hour,
               countIf(passed IS NOT NULL) AS graded, countIf(passed) AS passes,
               countIf(score IS NOT NULL) AS scored, avgIf(score, score IS NOT NULL)
        FROM {EVALUATION_DIMENSIONS.qualified} FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER}
              AND (passed IS NOT NULL OR score IS NOT NULL)
        GROUP BY dimension_id, hour ORDER BY dimension_id, hour
        """,
        query.params(),
    ).rows
    series: dict[str, list[HourPoint]] = {}
    scores: dict[str, list[ScoreHour]] = {}
    for dimension_id, hour, graded, passes, scored, mean_score in rows:
        start = from_store_time(hour)
        bound = bounds.get((surface_id, start))
        if graded:
            series.setdefault(str(dimension_id), []).append(
                HourPoint(start, int(graded), int(passes), bound)
            )
        if scored:
            scores.setdefault(str(dimension_id), []).append(
                ScoreHour(start, int(scored), float(mean_score), bound)
            )
    return series, scores


def _marks(store: Store, request: ReportRequest, surface_id: str) -> list[ChangeMark]:
    """Change points and bracketed windows of the latest drift run over this surface
    and series (role, light source; a run stored before series selection counts as the
    primary's) that overlap the window."""
    rows = store.query(
        f"""
        SELECT dimension_id, toString(kind), ifNull(change_time, window_from), window_to,
               source, reason, confident, effect
        FROM {DRIFT_CHANGE_POINTS.qualified} FINAL
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND surface_id = {{surface:String}}
          AND run_id = (
              SELECT argMax(run_id, run_at) FROM {DRIFT_CHANGE_POINTS.qualified} FINAL
              WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
                AND surface_id = {{surface:String}}
                AND run_id IN (
                    SELECT event_id FROM {ANALYSIS_EVENTS.qualified} FINAL
                    WHERE kind = 'drift-run' AND surface_id = {{surface:String}}
                      AND ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
                      AND if(JSONExtractString(payload, 'series', 'role') = '', 'primary',
                             JSONExtractString(payload, 'series', 'role')) = {{role:String}}
                      AND JSONExtractString(payload, 'series', 'lightSource')
                          = {{light_source:String}}))
          AND window_to > {{since:DateTime64(3, 'UTC')}}
          AND window_from < {{until:DateTime64(3, 'UTC')}}
        ORDER BY 3, dimension_id
        """,
        {
            "tenant": request.tenant_id or "",
            "surface": surface_id,
            "since": to_store_time(request.since),
            "until": to_store_time(request.until),
            "role": request.role,
            "light_source": request.light_source,
        },
    ).rows
    return [
        ChangeMark(
            dimension_id=str(d),
            kind=str(k),
            at=from_store_time(at),
            until=from_store_time(to),
            source=str(s),
            reason=str(r),
            confident=bool(c),
            effect=None if e is None else float(e),
        )
        for d, k, at, to, s, r, c, e in rows
    ]


def _drift_run(store: Store, request: ReportRequest, surface_id: str) -> DriftRunAge | None:
    """The latest drift run recorded for the surface and series, against the newest
    arrival among the window's events."""
    rows = store.query(
        f"""
        SELECT event_id, created_at FROM {ANALYSIS_EVENTS.qualified} FINAL
        WHERE kind = 'drift-run' AND surface_id = {{surface:String}}
          AND ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND if(JSONExtractString(payload, 'series', 'role') = '', 'primary',
                 JSONExtractString(payload, 'series', 'role')) = {{role:String}}
          AND JSONExtractString(payload, 'series', 'lightSource') = {{light_source:String}}
        ORDER BY created_at DESC LIMIT 1
        """,
        {
            "tenant": request.tenant_id or "",
            "surface": surface_id,
            "role": request.role,
            "light_source": request.light_source,
        },
    ).rows
    if not rows:
        return None
    (run_id, run_at), *_ = rows
    arrived = newest_arrival(store, _series_query(request, surface_id), on_streams=False)
    return DriftRunAge(str(run_id), from_store_time(run_at), arrived)


def _verdicts(store: Store, request: ReportRequest, surface_id: str) -> list[Verdict]:
    """The newest variance verdict of each dimension of the surface whose evaluated
    reading's window overlaps the report's, on a reading of the report's series (one
    stored before series selection counts as the primary's), whenever `evaluate` ran. A
    verdict whose reading is not in the store counts if it was given before `until`."""
    rows = store.query(
        f"""
        SELECT e.dimension_id, e.verdict, e.created_at, r.event_id != '' AS found,
               r.since, r.until
        FROM (
            SELECT tenant_id, dimension_id, verdict, created_at, target_event_id
            FROM {ANALYSIS_EVENTS.qualified} FINAL
            WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
              AND kind = 'variance-evaluate' AND surface_id = {{surface:String}}
        ) AS e
        LEFT JOIN (
            SELECT tenant_id, event_id, since, until, payload
            FROM {VARIANCE_READINGS.qualified} FINAL
            WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
              AND surface_id = {{surface:String}}
        ) AS r ON r.tenant_id = e.tenant_id AND r.event_id = e.target_event_id
        WHERE if(found,
                 r.since < {{until:DateTime64(3, 'UTC')}}
                 AND r.until > {{since:DateTime64(3, 'UTC')}}
                 AND if(JSONExtractString(r.payload, 'series', 'role') = '', 'primary',
                        JSONExtractString(r.payload, 'series', 'role')) = {{role:String}}
                 AND JSONExtractString(r.payload, 'series', 'lightSource')
                     = {{light_source:String}},
                 e.created_at < {{until:DateTime64(3, 'UTC')}})
        ORDER BY e.created_at DESC
        LIMIT 1 BY e.dimension_id
        """,
        {
            "tenant": request.tenant_id or "",
            "surface": surface_id,
            "since": to_store_time(request.since),
            "until": to_store_time(request.until),
            "role": request.role,
            "light_source": request.light_source,
        },
    ).rows
    return sorted(
        (
            Verdict(
                str(d),
                str(v),
                from_store_time(c),
                from_store_time(since) if found else None,
                from_store_time(until) if found else None,
            )
            for d, v, c, found, since, until in rows
        ),
        key=lambda v: v.dimension_id,
    )


def _lessons(store: Store, request: ReportRequest, surface_id: str) -> LessonsState:
    """Counted in ClickHouse, as the lessons dashboard counts them."""
    params = {
        "tenant": request.tenant_id or "",
        "surface": surface_id,
        "since": to_store_time(request.since),
        "until": to_store_time(request.until),
    }
    scope = (
        "({tenant:String} = '' OR tenant_id = {tenant:String}) AND surface_id = {surface:String}"
    )
    window = " >= {since:DateTime64(3, 'UTC')} AND %s < {until:DateTime64(3, 'UTC')}"
    overrides = store.query(
        f"SELECT count() FROM {LESSON_OVERRIDES.qualified} FINAL WHERE {scope}"
        f" AND occurred_at{window % 'occurred_at'}",
        params,
    ).rows[0][0]
    clusters = store.query(
        f"SELECT count() FROM {LESSON_CLUSTERS.qualified} FINAL WHERE {scope}"
        f" AND computed_at{window % 'computed_at'} AND (tenant_id, cluster_id) NOT IN"
        f" (SELECT tenant_id, cluster_id FROM {LESSON_ARTIFACTS.qualified} FINAL"
        f" WHERE {scope} AND published_at < {{until:DateTime64(3, 'UTC')}})",
        params,
    ).rows[0][0]
    statuses = dict(
        store.query(
            "SELECT status, count() FROM (SELECT toString(argMax(action, seq)) AS status"
            f" FROM {LESSON_DRAFTS.qualified} FINAL WHERE {scope}"
            " AND recorded_at < {until:DateTime64(3, 'UTC')} GROUP BY tenant_id, draft_id)"
            " GROUP BY status",
            params,
        ).rows
    )
    published = store.query(
        f"SELECT artifact_id, version, toString(kind), published_at"
        f" FROM {LESSON_ARTIFACTS.qualified} FINAL WHERE {scope}"
        f" AND published_at{window % 'published_at'} ORDER BY published_at, artifact_id",
        params,
    ).rows
    return LessonsState(
        overrides=int(overrides),
        open_clusters=int(clusters),
        drafts_at_gate=int(statuses.get("drafted", 0)),
        approved_unpublished=int(statuses.get("approved", 0)),
        published=[
            Published(str(a), int(v), str(k), from_store_time(at)) for a, v, k, at in published
        ],
    )
