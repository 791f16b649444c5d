"""Drift attribution job: change points of a surface's outcome series, each labelled with
the layer it came from, plus the windows where labels should not be trusted.

Pipeline: cells aggregated in ClickHouse (`series.cells`: on a multiplexed surface the
primary's series by default, an observer's on request, never a blend unless asked) ->
change points calibrated on the series itself (`changepoint`) -> attribution from
recorded layer values and the change events recorded for the surface (`attribution`,
`recorded`; the observers on the same calls as the control of a silent vendor change,
`corroborate.observer_control`) -> brackets (sparse buckets, delivery loss, buckets
whose events carry no emission ordinals so loss there cannot be measured, availability,
confounded, unattributed, cohort mix; each change point lists those its window
overlaps) -> a report shaped like the Guide's
`POST /lens/attribute`, persisted to `drift_change_points` and `analysis_events`.

The job (`processors.jobs`): `Request` is the Guide's attribution request (`surfaceId`,
`since`, `until`, `bucket`, `changePointDeltaThreshold`) plus the filters and the
method's knobs; `run` analyses read-only, `persist` records the run unless `persist` is
false; a change point attributed to anything but noise is a finding.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

import numpy as np
from pydantic import Field, model_validator

from processors.drift.attribution import Corroborate, attribute
from processors.drift.corroborate import (
    CorroborationConfig,
    alias_corroborator,
    observer_control,
    with_observers,
)
from processors.drift.evidence import AttributionConfig
from processors.drift.persist import persist_drift
from processors.drift.recorded import Cite, availability_brackets, fetch_recorded, no_citations
from processors.jobs import Job, JobError
from processors.series import changepoint as cp
from processors.series.cells import (
    BUCKETS,
    SelectionError,
    Series,
    SeriesQuery,
    bucket_grid,
    build_series,
    dimension_kinds,
    event_count,
    fetch_cells,
    fetch_paired_calls,
    read_selection,
)
from processors.series.cycle import PERIODS, Cycle, fit_cycle, sums_without
from processors.series.delivery import (
    Unmeasured,
    fetch_loss_windows,
    fetch_without_ordinals,
)
from processors.series.freshness import read_freshness, stale_note
from processors.series.request import SeriesRequest
from schemas.analysis import (
    BracketedWindow,
    Bucket,
    ChangePoint,
    CycleRemoved,
    DeliveryLossCheck,
    DimensionSummary,
    DriftParameters,
    DriftReport,
    Effect,
    NoiseModel,
    ObserverControl,
    Role,
    SeriesRead,
    TimeWindow,
)
from schemas.completeness import UNKNOWN_WITHOUT_ORDINALS, WindowsFreshness
from schemas.retention import retention_reach
from schemas.store import Store
from schemas.tables import CHANGE_EVENTS, COMPLETENESS_WINDOWS
from schemas.times import Clock
from schemas.utctime import UtcTime


@dataclass(frozen=True)
class DriftRequest:
    """Inputs of one run (the Guide's request plus the filters and the method's knobs)."""

    surface_id: str
    since: dt.datetime
    until: dt.datetime
    bucket: str = "hour"
    dimension_id: str | None = None
    delta_threshold: float = 0.0
    run_modes: tuple[str, ...] = ()
    provenances: tuple[str, ...] = ("production-state",)
    alpha: float = 0.02
    permutations: int = 199
    min_segment: int = 3
    sparse_min_events: int = 30
    seed: int = 0
    corroboration_neighbourhood: int = 72
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    tenant_id: str | None = None  # None: every tenant in the store
    role: Role = "primary"  # which series of a multiplexed surface (`series.cells`)
    light_source: str = ""

    def __post_init__(self) -> None:
        if self.bucket not in BUCKETS:
            raise ValueError(f"bucket must be one of {sorted(BUCKETS)}")
        if self.until <= self.since:
            raise ValueError("until must be after since")
        if not 0.0 < self.alpha < 0.5:
            raise ValueError("alpha must be in (0, 0.5)")

    def query(self) -> SeriesQuery:
        return SeriesQuery(
            self.surface_id,
            self.since,
            self.until,
            self.bucket,
            self.dimension_id,
            self.provenances,
            self.run_modes,
            self.tenant_id,
            self.role,
            self.light_source,
        )

    def parameters(self) -> DriftParameters:
        return DriftParameters(
            bucket=self.bucket,  # type: ignore[arg-type]
            change_point_delta_threshold=self.delta_threshold,
            run_modes=list(self.run_modes),
            provenances=list(self.provenances),
            alpha=self.alpha,
            permutations=self.permutations,
            min_segment_buckets=self.min_segment,
            sparse_min_events=self.sparse_min_events,
            seed=self.seed,
        )

    def corroboration(self) -> CorroborationConfig:
        return CorroborationConfig(
            seed=self.seed,
            neighbourhood=self.corroboration_neighbourhood,
            slack=self.attribution.slack,
            min_segment=self.min_segment,
        )

    def detect_config(self) -> cp.DetectConfig:
        return cp.DetectConfig(
            alpha=self.alpha, n_perm=self.permutations, min_size=self.min_segment
        )


@dataclass(frozen=True)
class DimensionTrace:
    """What the plot needs of one dimension: the series and its fitted levels."""

    series: Series
    levels: np.ndarray
    tau2: float
    unit_variance: float
    noise: cp.NoiseModel = field(default_factory=lambda: cp.NoiseModel(0.0))
    cycle: Cycle | None = None


@dataclass(frozen=True)
class DriftRun:
    report: DriftReport
    traces: dict[str, DimensionTrace]


def run_drift(store: Store, request: DriftRequest, run_id: str | None = None) -> DriftReport:
    """Analyse every (or the requested) dimension of the surface over the window."""
    return analyse(store, request, run_id).report


def analyse(store: Store, request: DriftRequest, run_id: str | None = None) -> DriftRun:
    """`run_drift` plus the per-dimension series behind the report (for plotting).
    SelectionError when the series asked for is several (`read_selection`)."""
    query = request.query()
    selection = read_selection(store, query)
    grid = bucket_grid(request.since, request.until, request.bucket)
    attribution = dataclasses.replace(request.attribution, delta_threshold=request.delta_threshold)
    corroborate = alias_corroborator(store, query, request.corroboration())
    points: list[ChangePoint] = []
    brackets: list[BracketedWindow] = []
    summaries: list[DimensionSummary] = []
    notes: list[str] = []
    traces: dict[str, DimensionTrace] = {}
    recorded = fetch_recorded(store, query)
    cite: Cite = no_citations
    if recorded is None:
        notes.append(f"change events not read: {CHANGE_EVENTS.qualified} is not in the store")
    else:
        cite = recorded.cite
        brackets += availability_brackets(recorded, query)
    for dimension_id, binary in dimension_kinds(store, query).items():
        series = build_series(grid, fetch_cells(store, query, dimension_id, binary), binary)
        brackets += sparse_brackets(series, request.sparse_min_events, dimension_id)
        checks = corroborate
        if request.role == "primary" and selection.observers:  # the same calls' observers
            checks = with_observers(
                corroborate, paired_control(store, request, selection, dimension_id, binary)
            )
        found, trace = analyse_dimension(series, dimension_id, request, attribution, checks, cite)
        if trace is not None:
            traces[dimension_id] = trace
        points += [p for p, _ in found]
        brackets += [b for _, b in found if b is not None]
        summary = summarise(series, dimension_id, found, request, trace)
        summaries.append(summary)
        if not summary.tested:
            notes.append(too_short_note(summary, request))
    loss_brackets, freshness = delivery_brackets(store, query, notes)
    brackets += loss_brackets
    events = event_count(store, query)
    unmeasured = fetch_without_ordinals(store, query)
    brackets += unmeasurable_brackets(unmeasured)
    delivery = delivery_check(events, unmeasured)
    if delivery.measurable != "all":
        notes.append(f"delivery-loss: {delivery.detail}")
    notes += selection_notes(selection)
    if not summaries:
        notes.append("no outcomes recorded for this surface, window and filter")
    points = [with_brackets(p, brackets) for p in points]
    report = DriftReport(
        run_id=run_id or f"drift_{uuid.uuid4().hex}",
        tenant_id=request.tenant_id,
        surface_id=request.surface_id,
        dimension_id=request.dimension_id,
        since=request.since,
        until=request.until,
        event_count=events,
        change_points=sorted(points, key=lambda p: (p.timestamp, p.dimension_id)),
        bracketed_windows=sorted(brackets, key=lambda b: (b.from_, b.reason)),
        dimensions=summaries,
        parameters=request.parameters(),
        notes=notes,
        series=selection,
        delivery_loss=delivery,
        freshness=freshness,
    )
    return DriftRun(report, traces)


def unmeasurable_brackets(unmeasured: list[Unmeasured]) -> list[BracketedWindow]:
    """Each run of buckets holding events without emission ordinals: loss there cannot
    be measured, so no `delivery-loss` window can clear it."""
    return [
        BracketedWindow.of(
            u.start,
            u.end,
            "delivery-unmeasurable",
            f"{u.without_ordinals} of {u.events} event(s) carry no emission ordinals:"
            " delivery loss cannot be measured for them",
        )
        for u in unmeasured
    ]


def delivery_check(events: int, unmeasured: list[Unmeasured]) -> DeliveryLossCheck:
    """Whether delivery loss is measurable for the events read: all, part or none."""
    without = sum(u.without_ordinals for u in unmeasured)
    share = without / events if events else 0.0
    if without == 0:
        return DeliveryLossCheck(
            measurable="all", events=events, without_ordinals=0, share_without_ordinals=0.0
        )
    return DeliveryLossCheck(
        measurable="none" if without >= events else "part",
        events=events,
        without_ordinals=without,
        share_without_ordinals=share,
        status=UNKNOWN_WITHOUT_ORDINALS,
        detail=f"cannot be measured for {without} of {events} event(s) ({share:.1%}):"
        " they carry no emission ordinals (OpenTelemetry GenAI evaluations), so no"
        " stream accounts for them",
    )


def with_brackets(point: ChangePoint, brackets: list[BracketedWindow]) -> ChangePoint:
    """The point with the reasons of the bracketed windows its window overlaps (its own
    dimension's or the whole surface's)."""
    reasons = sorted(
        {
            b.reason
            for b in brackets
            if b.dimension_id in ("", point.dimension_id)
            and _utc(b.from_) < _utc(point.window.to)
            and _utc(point.window.from_) < _utc(b.to)
        }
    )
    return point.model_copy(update={"brackets": reasons}) if reasons else point


def _utc(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def paired_control(
    store: Store, request: DriftRequest, selection: SeriesRead, dimension_id: str, binary: bool
) -> Callable[[int, int, float], ObserverControl | None]:
    """The observer control of one dimension, its paired calls read from the store the
    first time a change point needs it (most series have none to explain)."""
    built: list[Callable[[int, int, float], ObserverControl | None]] = []

    def check(lo: int, hi: int, delta: float) -> ObserverControl | None:
        if not built:
            calls = fetch_paired_calls(store, request.query(), dimension_id, binary)
            built.append(
                observer_control(
                    calls, selection.observers, request.corroboration(), PERIODS[request.bucket]
                )
            )
        return built[0](lo, hi, delta)

    return check


def selection_notes(selection: SeriesRead) -> list[str]:
    """What an operator reading a multiplexed surface's series should know."""
    if not selection.multiplexed:
        return []
    if selection.role == "all":
        return [
            "series: every event of a multiplexed surface, primary and observers blended"
            " (--role primary or --role observer reads one vendor's series)"
        ]
    observers = ", ".join(selection.observers) or "none"
    return [
        f"series: role {selection.role}"
        + (f", light source {selection.light_source}" if selection.light_source else "")
        + f" of a multiplexed surface ({selection.left_out} other event(s) left out;"
        f" observers: {observers})"
    ]


def delivery_brackets(
    store: Store, query: SeriesQuery, notes: list[str]
) -> tuple[list[BracketedWindow], WindowsFreshness | None]:
    """The stored delivery-loss windows as brackets, and whether those windows had seen
    every event of the range (a note when not: never a silently unbracketed answer)."""
    loss = fetch_loss_windows(store, query)
    if loss is None:
        notes.append(
            f"delivery-loss not checked: {COMPLETENESS_WINDOWS.qualified} is not in the store"
        )
        return [], None
    freshness = read_freshness(store, query)
    note = stale_note(freshness)
    if note:
        notes.append(note)
    brackets = [
        BracketedWindow.of(
            w.start, w.end, "delivery-loss", f"completeness lower bound {w.completeness:.3f}"
        )
        for w in loss
    ]
    return brackets, freshness


_Found = list[tuple[ChangePoint, BracketedWindow | None]]


def min_buckets(request: DriftRequest) -> int:
    """Buckets with outcomes a series needs before a change point can be tested: two
    segments of `min_segment` each."""
    return 2 * request.min_segment


def too_short_note(summary: DimensionSummary, request: DriftRequest) -> str:
    return (
        f"{summary.dimension_id}: too short to test for change points"
        f" ({summary.buckets} {request.bucket} bucket(s) with outcomes,"
        f" {min_buckets(request)} needed): widen --since/--until"
        + (" or use --bucket hour" if request.bucket == "day" else "")
    )


def analyse_dimension(
    series: Series,
    dimension_id: str,
    request: DriftRequest,
    attribution: AttributionConfig,
    corroborate: Corroborate,
    cite: Cite = no_citations,
) -> tuple[_Found, DimensionTrace | None]:
    if len(series.index) < min_buckets(request):
        return [], None
    buckets, cycle = detection_series(series, request.bucket)
    detection = cp.detect(buckets, request.detect_config(), seed=request.seed)
    trace = DimensionTrace(
        series, detection.levels, detection.tau2, detection.unit_variance, detection.noise, cycle
    )
    inflation = float(np.sqrt(1.0 + np.mean(buckets.n) * detection.tau2 / detection.unit_variance))
    found: _Found = []
    for raw in detection.change_points:
        point, bracket = attribute(
            series, raw, dimension_id, inflation, corroborate, attribution, cite
        )
        window = None
        if bracket is not None:
            start, end, reason, why = bracket
            window = BracketedWindow.of(start, end, reason, why, dimension_id)
        found.append((point, window))
    return merge_rollouts(found), trace


def detection_series(series: Series, bucket: str) -> tuple[cp.BucketSeries, Cycle | None]:
    """The buckets change points are sought in: with the daily / weekly cycle taken out
    (`series.cycle`) when the window spans enough cycles."""
    cycle = fit_cycle(series.n, series.y, PERIODS.get(bucket, 0))
    if cycle is None:
        return series.bucket_series(), None
    y, yy = sums_without(cycle, series.n, series.y, series.yy)
    i = series.index
    return cp.BucketSeries(series.n[i], y[i], None if series.binary else yy[i]), cycle


def _transition_key(point: ChangePoint) -> tuple[object, ...] | None:
    if not point.confident or point.source == "noise" or not point.layer_changes:
        return None
    return (point.source, point.effect.delta > 0, *[
        (c.column, c.changed_at) for c in point.layer_changes if c.layer == point.source
    ])  # fmt: skip


def merge_rollouts(found: _Found) -> _Found:
    """A gradual rollout can look like a staircase of steps; consecutive points that the
    evidence ties to the same recorded layer switch (same column, same switch time, same
    direction) are one change: their windows and shifts are combined."""
    out: _Found = []
    for point, bracket in sorted(found, key=lambda f: f[0].timestamp):
        key = _transition_key(point)
        if out and key is not None and key == _transition_key(out[-1][0]):
            prev = out[-1][0]
            strongest = max(prev, point, key=lambda p: p.test_statistic)
            half = float(np.hypot(prev.effect.ci_high - prev.effect.delta,
                                  point.effect.ci_high - point.effect.delta))  # fmt: skip
            delta = prev.effect.delta + point.effect.delta
            merged = strongest.model_copy(
                update={
                    "timestamp": min(prev.timestamp, point.timestamp),
                    "window": TimeWindow.of(prev.window.from_, point.window.to),
                    "effect": Effect(before=prev.effect.before, after=point.effect.after,
                                     delta=delta, ci_low=delta - half, ci_high=delta + half),
                    "reason": strongest.reason + " (rollout seen as several steps, merged)",
                }
            )  # fmt: skip
            out[-1] = (merged, out[-1][1])
            continue
        out.append((point, bracket))
    return out


def summarise(
    series: Series,
    dimension_id: str,
    found: _Found,
    request: DriftRequest,
    trace: DimensionTrace | None = None,
) -> DimensionSummary:
    buckets = series.bucket_series()
    tau2 = cp.estimate_tau2(buckets) if len(buckets) >= 3 else 0.0
    return DimensionSummary(
        noise_model=noise_summary(trace.noise) if trace is not None else None,
        cycle=cycle_summary(trace.cycle) if trace is not None else None,
        dimension_id=dimension_id,
        outcome="passed" if series.binary else "score",
        buckets=len(buckets),
        events=int(series.n.sum()),
        overdispersion_tau=float(np.sqrt(tau2)),
        change_points=len(found),
        tested=len(buckets) >= min_buckets(request),
    )


def noise_summary(noise: cp.NoiseModel) -> NoiseModel:
    correlated = noise.correlated
    return NoiseModel(
        kind="ar1" if correlated else "independent",
        spread=float(np.sqrt(noise.spread2)),
        rho=noise.rho if correlated else 0.0,
        long_run_sd=float(np.sqrt(noise.long_run_variance if correlated else noise.spread2)),
        null="simulated" if correlated else "permutation",
    )


def cycle_summary(cycle: Cycle | None) -> CycleRemoved | None:
    if cycle is None:
        return None
    return CycleRemoved(period_buckets=cycle.period, peak_to_trough=cycle.peak_to_trough)


def sparse_brackets(series: Series, min_events: int, dimension_id: str) -> list[BracketedWindow]:
    """Runs of buckets with fewer than `min_events` outcomes (empty ones included)."""
    step = (
        BUCKETS["day"]
        if len(series.grid) > 1 and (series.grid[1] - series.grid[0] == BUCKETS["day"])
        else BUCKETS["hour"]
    )
    thin = series.n < min_events
    out = []
    i = 0
    while i < len(thin):
        if not thin[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(thin) and thin[j + 1]:
            j += 1
        events = int(series.n[i : j + 1].sum())
        out.append(
            BracketedWindow.of(
                series.grid[i],
                series.grid[j] + step,
                "sparse",
                f"{j - i + 1} bucket(s) under {min_events} outcomes ({events} in all)",
                dimension_id,
            )
        )
        i = j + 1
    return out


# --- the job (processors.jobs): POST /lens/attribute -------------------------------------


class AttributeRequest(SeriesRequest):
    """The Guide's POST /lens/attribute body, with the CLI's filters and knobs."""

    named_fields: ClassVar[Mapping[str, str]] = {
        "surface_id": "surface",
        "dimension_id": "dimension",
    }

    surface_id: Annotated[str, Field(min_length=1, description="The surface to analyse.")]
    since: UtcTime | None = Field(
        None, description="Window start, inclusive (default: 7 days, or 28 by day, before until)."
    )
    until: UtcTime | None = Field(
        None, description="Window end, exclusive (default: the run's midnight UTC)."
    )
    bucket: Bucket = Field("hour", description="Temporal resolution of the timeline.")
    dimension_id: str | None = Field(None, description="One dimension (default: every one).")
    delta_threshold: float = Field(
        0.0,
        ge=0.0,
        alias="changePointDeltaThreshold",
        description="Minimum practical shift; smaller significant shifts are labelled noise.",
    )
    alpha: float = Field(0.02, gt=0.0, lt=0.5, description="False-alarm rate.")
    permutations: int = Field(199, ge=19, description="Permutations of the change-point test.")
    seed: int = Field(0, description="Seed of the permutations.")
    persist: bool = Field(True, description="Record the run (drift_change_points).")

    @model_validator(mode="after")
    def _window(self) -> AttributeRequest:
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValueError("until must be after since")
        return self

    def persists(self) -> bool:
        return self.persist

    def window(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """[since, until): as given, else ending at `now`'s midnight UTC (a nightly run
        reads the days that ended) over 7 days of hours or 28 of days."""
        until = self.until or now.astimezone(dt.UTC).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        since = self.since or until - dt.timedelta(days=28 if self.bucket == "day" else 7)
        if until <= since:
            raise JobError("until must be after since")
        return since, until

    def analysis(self, now: dt.datetime) -> DriftRequest:
        """The analysis's own parameters for this request and its tenant."""
        since, until = self.window(now)
        return DriftRequest(
            surface_id=self.surface_id,
            since=since,
            until=until,
            bucket=self.bucket,
            dimension_id=self.dimension_id,
            delta_threshold=self.delta_threshold,
            run_modes=self.run_modes,
            provenances=self.provenances_read(),
            alpha=self.alpha,
            permutations=self.permutations,
            seed=self.seed,
            tenant_id=self.tenant,
            role=self.role,
            light_source=self.light_source,
        )


Request = AttributeRequest


@dataclass(frozen=True)
class Report:
    """The drift report, the series behind it (for `--plot`) and when it was run."""

    run: DriftRun
    run_at: dt.datetime

    @property
    def report(self) -> DriftReport:
        return self.run.report

    def to_json(self) -> dict[str, object]:
        return self.run.report.to_json()


def run(store: Store, request: Request, clock: Clock) -> Report:
    """The change points of the surface over the window, each attributed, read-only."""
    try:
        now = clock()
        analysis = request.analysis(now)
        drift = analyse(store, analysis)
        reach = retention_reach(store, request.tenant, analysis.since, now)
        if reach is not None:
            report = drift.report.model_copy(update={"retention": reach})
            drift = dataclasses.replace(drift, report=report)
        return Report(drift, now)
    except SelectionError as err:
        raise JobError(str(err), "series_ambiguous") from None


def persist(store: Store, report: Report) -> Report:
    """The run's change points and brackets in `drift_change_points`, the run itself in
    `analysis_events`."""
    persist_drift(store, report.report, lambda: report.run_at)
    return report


def attributed(report: DriftReport) -> list[ChangePoint]:
    """The findings: change points with a source other than noise."""
    return [p for p in report.change_points if p.source != "noise"]


def finding(report: Report) -> bool:
    """A change point attributed to substrate, light source or lens."""
    return bool(attributed(report.report))


def freshness(store: Store, request: Request, clock: Clock) -> WindowsFreshness:
    """Whether the delivery-loss windows have seen every event this run would read."""
    return read_freshness(store, request.analysis(clock()).query())


JOB = Job("drift", Request, DriftReport, run, persist, finding, freshness=freshness)

__all__ = [
    "JOB",
    "DriftRequest",
    "DriftRun",
    "Report",
    "Request",
    "analyse",
    "finding",
    "persist",
    "persist_drift",
    "run",
    "run_drift",
]
