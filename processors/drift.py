"""Drift attribution job: change points of a surface's outcome series, each labelled with
the layer it came from, plus the windows where labels should not be trusted.

Pipeline: cells aggregated in ClickHouse (`drift_series`) -> change points calibrated on
the series itself (`changepoint`) -> attribution from recorded layer values
(`drift_attribution`) -> brackets (sparse buckets, delivery loss, confounded,
unattributed, cohort mix) -> a report shaped like the Guide's `POST /lens/attribute`,
persisted to `drift_change_points` and `analysis_events`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from processors import changepoint as cp
from processors.drift_attribution import AttributionConfig, Corroborate, attribute
from processors.drift_delivery import fetch_loss_windows
from processors.drift_series import (
    BUCKETS,
    Series,
    SeriesQuery,
    bucket_grid,
    build_series,
    dimension_kinds,
    event_count,
    fetch_alias_series,
    fetch_cells,
)
from schemas.analysis import (
    BracketedWindow,
    ChangePoint,
    Corroboration,
    DimensionSummary,
    DriftParameters,
    DriftReport,
    Effect,
    TimeWindow,
)
from schemas.store import Store


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


@dataclass(frozen=True)
class DriftRun:
    report: DriftReport
    traces: dict[str, DimensionTrace]


def run_drift(store: Store, request: DriftRequest, run_id: str | None = None) -> DriftReport:
    """Analyse every (or the requested) dimension of the surface over the window."""
    return analyse(store, request, run_id).report


def analyse(store: Store, request: DriftRequest, run_id: str | None = None) -> DriftRun:
    """`run_drift` plus the per-dimension series behind the report (for plotting)."""
    query = request.query()
    grid = bucket_grid(request.since, request.until, request.bucket)
    attribution = dataclasses.replace(request.attribution, delta_threshold=request.delta_threshold)
    corroborate = alias_corroborator(store, query, request)
    points: list[ChangePoint] = []
    brackets: list[BracketedWindow] = []
    summaries: list[DimensionSummary] = []
    notes: list[str] = []
    traces: dict[str, DimensionTrace] = {}
    for dimension_id, binary in dimension_kinds(store, query).items():
        series = build_series(grid, fetch_cells(store, query, dimension_id, binary), binary)
        brackets += sparse_brackets(series, request.sparse_min_events, dimension_id)
        found, trace = analyse_dimension(series, dimension_id, request, attribution, corroborate)
        if trace is not None:
            traces[dimension_id] = trace
        points += [p for p, _ in found]
        brackets += [b for _, b in found if b is not None]
        summaries.append(summarise(series, dimension_id, found, request))
    loss = fetch_loss_windows(store, query)
    if loss is None:
        notes.append(
            "delivery-loss not checked: holonograph.completeness_windows is not in the store"
        )
    else:
        brackets += [
            BracketedWindow.of(
                w.start, w.end, "delivery-loss", f"completeness lower bound {w.completeness:.3f}"
            )
            for w in loss
        ]
    if not summaries:
        notes.append("no outcomes recorded for this surface, window and filter")
    report = DriftReport(
        run_id=run_id or f"drift_{uuid.uuid4().hex}",
        surface_id=request.surface_id,
        dimension_id=request.dimension_id,
        since=request.since,
        until=request.until,
        event_count=event_count(store, query),
        change_points=sorted(points, key=lambda p: (p.timestamp, p.dimension_id)),
        bracketed_windows=sorted(brackets, key=lambda b: (b.from_, b.reason)),
        dimensions=summaries,
        parameters=DriftParameters(
            bucket=request.bucket,  # type: ignore[arg-type]
            change_point_delta_threshold=request.delta_threshold,
            run_modes=list(request.run_modes),
            provenances=list(request.provenances),
            alpha=request.alpha,
            permutations=request.permutations,
            min_segment_buckets=request.min_segment,
            sparse_min_events=request.sparse_min_events,
            seed=request.seed,
        ),
        notes=notes,
    )
    return DriftRun(report, traces)


_Found = list[tuple[ChangePoint, BracketedWindow | None]]


def analyse_dimension(
    series: Series,
    dimension_id: str,
    request: DriftRequest,
    attribution: AttributionConfig,
    corroborate: Corroborate,
) -> tuple[_Found, DimensionTrace | None]:
    buckets = series.bucket_series()
    if len(buckets) < 2 * request.min_segment:
        return [], None
    detection = cp.detect(buckets, request.detect_config(), seed=request.seed)
    trace = DimensionTrace(series, detection.levels, detection.tau2, detection.unit_variance)
    inflation = float(np.sqrt(1.0 + np.mean(buckets.n) * detection.tau2 / detection.unit_variance))
    found: _Found = []
    for raw in detection.change_points:
        point, bracket = attribute(series, raw, dimension_id, inflation, corroborate, attribution)
        window = None
        if bracket is not None:
            start, end, reason, why = bracket
            window = BracketedWindow.of(start, end, reason, why, dimension_id)
        found.append((point, window))
    return merge_rollouts(found), trace


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
    series: Series, dimension_id: str, found: _Found, request: DriftRequest
) -> DimensionSummary:
    buckets = series.bucket_series()
    tau2 = cp.estimate_tau2(buckets) if len(buckets) >= 3 else 0.0
    return DimensionSummary(
        dimension_id=dimension_id,
        outcome="passed" if series.binary else "score",
        buckets=len(buckets),
        events=int(series.n.sum()),
        overdispersion_tau=float(np.sqrt(tau2)),
        change_points=len(found),
    )


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


def alias_corroborator(store: Store, query: SeriesQuery, request: DriftRequest) -> Corroborate:
    """A check, per change window, that other surfaces served under the same model alias
    shifted inside the same window (a permutation test local to that window, Bonferroni
    over the surfaces checked)."""
    cache: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    rng = np.random.default_rng(request.seed + 1)

    def check(alias: str, lo: int, hi: int, delta: float) -> Corroboration | None:
        if not alias:
            return None
        if alias not in cache:
            cache[alias] = fetch_alias_series(store, query, alias)
        checked: list[str] = []
        p_values: dict[str, float] = {}
        for surface, (n, k) in sorted(cache[alias].items()):
            p = local_shift_p_value(n, k, lo, hi, request, rng)
            if p is not None:
                checked.append(surface)
                p_values[surface] = p
        level = 0.01 / max(len(checked), 1)
        hits = [s for s in checked if p_values[s] <= level]
        return Corroboration(
            alias=alias, surfaces_checked=checked, corroborating_surfaces=hits, p_values=p_values
        )

    return check


def local_shift_p_value(
    n: np.ndarray,
    k: np.ndarray,
    lo: int,
    hi: int,
    request: DriftRequest,
    rng: np.random.Generator,
    permutations: int = 999,
) -> float | None:
    """p-value of the largest split gain located within [lo, hi] (+ slack) on the rows
    around it; None when there is too little data to say."""
    reach = request.corroboration_neighbourhood
    slack = request.attribution.slack
    rows = np.arange(max(0, lo - reach), min(len(n), hi + 1 + reach))
    rows = rows[n[rows] > 0]
    m = request.min_segment
    if rows.size < 4 * m or n[rows].sum() < 20 * m:
        return None
    w = cp.weigh(cp.BucketSeries(n[rows], k[rows]))
    allowed = (rows >= lo - slack) & (rows <= hi + slack)
    allowed[:m] = False
    allowed[rows.size - m + 1 :] = False
    if not allowed.any():
        return None
    observed = cp.gain_curve(w.u, w.v, True, m)[allowed].max()
    order = np.argsort(rng.random((permutations, rows.size)), axis=1)
    null = cp.gain_curve(w.u[order], w.v[order], True, m)[:, allowed].max(axis=1)
    return float((1 + np.sum(null >= observed)) / (permutations + 1))


def persist_drift(store: Store, report: DriftReport, now: Callable[[], dt.datetime]) -> None:
    """Write the run's change points and brackets, then the run itself as an analysis event."""
    run_at = now().astimezone(dt.UTC).replace(tzinfo=None)
    p = report.parameters
    common = [
        report.since.astimezone(dt.UTC).replace(tzinfo=None)
        if report.since.tzinfo
        else report.since,
        report.until.astimezone(dt.UTC).replace(tzinfo=None)
        if report.until.tzinfo
        else report.until,
        p.bucket,
        p.change_point_delta_threshold,
        p.run_modes,
        p.provenances,
        p.alpha,
        p.permutations,
        p.seed,
        report.event_count,
    ]
    rows: list[list[object]] = []
    for point in report.change_points:
        evidence = point.to_json()
        rows.append(
            [
                report.run_id, run_at, report.surface_id, point.dimension_id, "change_point",
                _naive(point.timestamp), _naive(point.window.from_), _naive(point.window.to),
                point.source, point.reason, point.confident, point.effect.delta,
                point.effect.ci_low, point.effect.ci_high, point.test_statistic, point.penalty,
                point.p_value, json.dumps(evidence), *common,
            ]
        )  # fmt: skip
    for window in report.bracketed_windows:
        rows.append(
            [
                report.run_id, run_at, report.surface_id, window.dimension_id,
                "bracketed_window", None, _naive(window.from_), _naive(window.to), "",
                window.reason, False, None, None, None, None, None, None,
                json.dumps(window.to_json()), *common,
            ]
        )  # fmt: skip
    store.insert("holonograph.drift_change_points", rows, DRIFT_COLUMNS)
    store.insert(
        "holonograph.analysis_events",
        [
            [
                report.run_id,
                "drift-run",
                "",
                report.surface_id,
                report.dimension_id or "",
                "",
                "",
                "",
                "",
                "",
                run_at,
                json.dumps(report.to_json()),
            ]
        ],
        ANALYSIS_EVENT_COLUMNS,
    )


def _naive(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


DRIFT_COLUMNS = [
    "run_id", "run_at", "surface_id", "dimension_id", "kind", "change_time", "window_from",
    "window_to", "source", "reason", "confident", "effect", "effect_ci_low", "effect_ci_high",
    "test_statistic", "penalty", "p_value", "evidence", "since", "until", "bucket",
    "delta_threshold", "run_modes", "provenances", "alpha", "permutations", "seed", "event_count",
]  # fmt: skip
ANALYSIS_EVENT_COLUMNS = [
    "event_id", "kind", "target_event_id", "surface_id", "dimension_id", "status", "verdict",
    "approver_id", "pinned_label", "superseded_by", "created_at", "payload",
]  # fmt: skip
