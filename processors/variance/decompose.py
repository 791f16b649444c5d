"""Variance isolation: how much of the bucket-to-bucket spread is real.

Each bucket's outcome x_t (pass rate or mean score) is a noisy reading of the system's
level in that bucket: x_t = mu + u_t + e_t with sampling error e_t (variance v_t) and
real variation u_t (variance tau^2, what an operator wants). This is the random-effects
model of meta-analysis, so:

- v_t is the sampling variance of the bucket mean. Events that share a correlation id
  are not independent, so v_t = deff * s^2 / n_t where s^2 is the pooled within-bucket
  variance and deff the design effect from the clustered (sandwich) residuals of all
  buckets, each corrected for its cluster's leverage on the bucket mean: pooled, so v_t
  is stable even with few events per bucket, and unbiased where a per-bucket plug-in
  x(1 - x) / n is not (its noise is tied to x itself and the interval under-covers).
- tau^2 is the Paule-Mandel estimate (generalised Q equals its expectation T - 1) with a
  Q-profile confidence interval (Viechtbauer 2007), which keeps its nominal coverage
  for any number of buckets when v_t is known - unlike Wald intervals on tau^2.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, model_validator

from processors.analysis_events import record_event
from processors.jobs import Job, JobError, never_a_finding
from processors.series.cells import (
    BUCKET_SQL,
    SELECTION_FILTER,
    SERIES_FILTER,
    SelectionError,
    SeriesQuery,
    dimension_kinds,
    read_selection,
)
from processors.series.request import SeriesRequest, window_at
from schemas.analysis import Bucket, Interval, Role, VarianceReading
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, VARIANCE_READINGS
from schemas.times import Clock, to_store_time
from schemas.utctime import UtcTime

FloatArray = NDArray[np.float64]
METHOD = "paule-mandel + q-profile; clustered by correlation id"


@dataclass(frozen=True)
class Decomposition:
    mean: float
    observed: float
    noise: float
    tau2: float
    ci: tuple[float, float]
    q: float


def generalised_q(x: FloatArray, v: FloatArray, tau2: float) -> float:
    """Cochran's Q with random-effects weights 1 / (v + tau^2)."""
    w = 1.0 / (v + tau2)
    mu = float(np.sum(w * x) / np.sum(w))
    return float(np.sum(w * (x - mu) ** 2))


def _solve(x: FloatArray, v: FloatArray, target: float) -> float:
    """tau^2 >= 0 where Q(tau^2) = target (Q falls as tau^2 grows); 0 if Q(0) < target."""
    from scipy import optimize  # at the first reading, not at serve's start (docs/api.md)

    if generalised_q(x, v, 0.0) <= target:
        return 0.0
    hi = max(float(np.var(x)), float(np.max(v)), 1e-12)
    while generalised_q(x, v, hi) > target:
        hi *= 4.0
    return float(optimize.brentq(lambda t: generalised_q(x, v, t) - target, 0.0, hi, xtol=1e-14))


def paule_mandel(x: FloatArray, v: FloatArray, level: float = 0.95) -> Decomposition:
    """tau^2 with its Q-profile interval; needs at least two buckets."""
    from scipy import special  # chi2's quantiles, without importing scipy.stats

    if x.size < 2:
        raise ValueError("at least two buckets are needed")
    dof = x.size - 1
    tau2 = _solve(x, v, float(dof))
    tail = (1.0 - level) / 2.0
    # chdtri(k, p) is chi2's inverse survival function: chi2.ppf(1 - p, k).
    low = _solve(x, v, float(special.chdtri(dof, tail)))
    high = _solve(x, v, float(special.chdtri(dof, 1.0 - tail)))
    return Decomposition(
        mean=float(np.sum(x / (v + tau2)) / np.sum(1.0 / (v + tau2))),
        observed=float(np.var(x, ddof=1)),
        noise=float(np.mean(v)),
        tau2=tau2,
        ci=(low, high),
        q=generalised_q(x, v, 0.0),
    )


@dataclass(frozen=True)
class ClusteredBuckets:
    """Per bucket: events n, outcome sum y, within-bucket sum of squares about the bucket
    mean (events), and the same about the mean for cluster totals, corrected for each
    cluster's leverage on that mean."""

    buckets: list[dt.datetime]
    n: FloatArray
    y: FloatArray
    within_ss: FloatArray
    cluster_ss: FloatArray
    clusters: FloatArray

    @property
    def x(self) -> FloatArray:
        return self.y / self.n

    def design_effect(self) -> float:
        plain = float(np.sum(self.within_ss * self.n / np.maximum(self.n - 1, 1)))
        return max(float(np.sum(self.cluster_ss)) / plain, 1.0) if plain > 0 else 1.0

    def sampling_variance(self, deff: float | None = None) -> FloatArray:
        unit = float(np.sum(self.within_ss) / max(np.sum(self.n - 1), 1.0))
        effect = self.design_effect() if deff is None else deff
        return np.asarray(effect * max(unit, 1e-12) / self.n)


def fetch_clustered(store: Store, query: SeriesQuery, binary: bool) -> ClusteredBuckets:
    """Cluster totals are formed in ClickHouse (events without a correlation id are their
    own cluster); only per-bucket sums come back."""
    value = "toFloat64(passed)" if binary else "score"
    outcome = "passed IS NOT NULL" if binary else "score IS NOT NULL"
    sql = f"""
        SELECT bucket_start, sum(m) AS n, sum(k) AS y, sum(kk) AS sum_sq,
               sum(k * k) AS skk, sum(k * m) AS skm, sum(m * m) AS smm, count() AS clusters
        FROM (
            SELECT {BUCKET_SQL[query.bucket]} AS bucket_start,
                   (tenant_id, if(correlation_id = '', event_id, correlation_id)) AS cluster,
                   toFloat64(count()) AS m, sum({value}) AS k, sum({value} * {value}) AS kk
            FROM {EVALUATION_DIMENSIONS.qualified} FINAL
            WHERE {SERIES_FILTER} {SELECTION_FILTER}
              AND dimension_id = {{dimension:String}} AND {outcome}
            GROUP BY bucket_start, cluster
        )
        GROUP BY bucket_start ORDER BY bucket_start
    """
    rows = store.query(sql, query.params()).rows
    if not rows:
        empty = np.zeros(0)
        return ClusteredBuckets([], empty, empty, empty, empty, empty)
    b, *sums = (np.array(col) for col in zip(*rows, strict=True))
    return from_sums(list(b), *(np.asarray(s, dtype=float) for s in sums))


def from_sums(
    buckets: list[dt.datetime],
    n: FloatArray,
    y: FloatArray,
    sum_sq: FloatArray,
    skk: FloatArray,
    skm: FloatArray,
    smm: FloatArray,
    clusters: FloatArray,
) -> ClusteredBuckets:
    """Per bucket: events n, outcome sum y and sum of squares, and over its clusters (k =
    cluster outcome total, m = cluster size) the sums of k*k, k*m, m*m and their count.
    Shared by the SQL path and the in-memory coverage check, so both run one estimator."""
    x = y / n
    within = sum_sq - n * x * x
    resid = skk - 2 * x * skm + x * x * smm
    # Residuals about the bucket mean shrink by the leverage of each cluster in that mean:
    # E[resid] = (1 - sum(m^2) / n^2) * true variance when a cluster's variance grows with
    # its size m. Equal sizes give the familiar C / (C - 1); unequal sizes need more.
    shrink = 1.0 - smm / (n * n)
    corrected = np.where(shrink > 1e-9, resid / np.maximum(shrink, 1e-9), resid)
    return ClusteredBuckets(buckets, n, y, np.maximum(within, 0.0), corrected, clusters)


def unclustered(n: FloatArray, y: FloatArray, sum_sq: FloatArray) -> ClusteredBuckets:
    """Buckets where every event is its own cluster (design effect 1)."""
    return from_sums([], n, y, sum_sq, sum_sq, y, n, n)


def decompose_buckets(data: ClusteredBuckets, level: float = 0.95) -> Decomposition | None:
    """The estimator `decompose` runs on fetched buckets; None below two buckets."""
    if data.n.size < 2:
        return None
    return paule_mandel(data.x, data.sampling_variance(data.design_effect()), level)


@dataclass(frozen=True)
class DecomposeRequest:
    surface_id: str
    dimension_id: str
    since: dt.datetime
    until: dt.datetime
    bucket: str = "hour"
    run_modes: tuple[str, ...] = ()
    provenances: tuple[str, ...] = ("production-state",)
    level: float = 0.95
    tenant_id: str | None = None  # None: every tenant in the store
    role: Role = "primary"  # which series of a multiplexed surface (`series.cells`)
    light_source: str = ""

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


def decompose(store: Store, request: DecomposeRequest, now: dt.datetime) -> VarianceReading:
    """The reading; with fewer than two buckets its variances are NaN (and `evaluate`
    says insufficient-data). SelectionError when the series asked for is several."""
    selection = read_selection(store, request.query())
    kinds = dimension_kinds(store, request.query())
    binary = kinds.get(request.dimension_id, True)
    data = fetch_clustered(store, request.query(), binary)
    deff = data.design_effect() if data.n.size else 1.0
    result = decompose_buckets(data, request.level)
    return VarianceReading(
        event_id=f"evt_{uuid.uuid4().hex}",
        tenant_id=request.tenant_id or DEFAULT_TENANT,
        surface_id=request.surface_id,
        dimension_id=request.dimension_id,
        since=request.since,
        until=request.until,
        bucket=request.bucket,  # type: ignore[arg-type]
        run_modes=list(request.run_modes),
        provenances=list(request.provenances),
        outcome="passed" if binary else "score",
        buckets=int(data.n.size),
        events=int(data.n.sum()),
        clusters=int(data.clusters.sum()),
        mean=result.mean if result else None,
        observed_variance=result.observed if result else None,
        noise_variance=result.noise if result else None,
        cleaned_variance=result.tau2 if result else None,
        cleaned_variance_ci=Interval(
            estimate=result.tau2, ci_low=result.ci[0], ci_high=result.ci[1], level=request.level
        )
        if result
        else None,
        noise_share=result.noise / (result.noise + result.tau2) if result else None,
        design_effect=deff,
        q_statistic=result.q if result else None,
        method=METHOD,
        created_at=now,
        series=selection,
    )


def persist_reading(store: Store, reading: VarianceReading) -> None:
    payload = json.dumps(reading.to_json())
    when = to_store_time(reading.created_at)
    ci = reading.cleaned_variance_ci or Interval(estimate=_NAN, ci_low=_NAN, ci_high=_NAN)
    store.insert(
        VARIANCE_READINGS.qualified,
        [
            [
                reading.tenant_id,
                reading.event_id,
                reading.surface_id,
                reading.dimension_id,
                to_store_time(reading.since),
                to_store_time(reading.until),
                reading.bucket,
                reading.run_modes,
                reading.provenances,
                reading.outcome,
                reading.buckets,
                reading.events,
                reading.clusters,
                *[
                    _nan(v)
                    for v in (
                        reading.mean,
                        reading.observed_variance,
                        reading.noise_variance,
                        reading.cleaned_variance,
                        ci.ci_low,
                        ci.ci_high,
                        reading.noise_share,
                        reading.q_statistic,
                    )
                ],
                reading.method,
                when,
                payload,
            ]
        ],
        VARIANCE_READINGS.columns,
    )
    record_event(store, reading.event_id, "variance-decompose", reading.surface_id,
                 reading.dimension_id, when, payload, tenant_id=reading.tenant_id)  # fmt: skip


def load_reading(
    store: Store, event_id: str, tenant_id: str | None = None
) -> VarianceReading | None:
    """The stored reading, if it is one of `tenant_id`'s (None: any tenant's)."""
    payload = store.query(
        f"SELECT payload FROM {VARIANCE_READINGS.qualified} FINAL WHERE event_id = {{id:String}}"
        " AND ({tenant:String} = '' OR tenant_id = {tenant:String})",
        {"id": event_id, "tenant": tenant_id or ""},
    ).scalar()
    return VarianceReading.model_validate(json.loads(payload)) if payload else None


_NAN = float("nan")


def _nan(value: float | None) -> float:
    return _NAN if value is None else value


# --- the job (processors.jobs): POST /lens/decomposeVariance -----------------------------


class DecomposeVarianceRequest(SeriesRequest):
    """The Guide's POST /lens/decomposeVariance body, with the CLI's filters."""

    named_fields: ClassVar[Mapping[str, str]] = {
        "surface_id": "surface",
        "dimension_id": "dimension",
    }

    surface_id: Annotated[str, Field(min_length=1, description="The surface to read.")]
    dimension_id: Annotated[str, Field(min_length=1, description="The dimension to read.")]
    since: UtcTime | None = Field(
        None, description="Window start, inclusive (default: 7 days, or 28 by day, before until)."
    )
    until: UtcTime | None = Field(
        None, description="Window end, exclusive (default: the run's midnight UTC)."
    )
    bucket: Bucket = Field("hour", description="Bucket of the outcome series.")

    @model_validator(mode="after")
    def _window(self) -> DecomposeVarianceRequest:
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValueError("until must be after since")
        return self

    def persists(self) -> bool:
        return True  # the reading is what evaluate and lifecycle take, by its eventId

    def analysis(self, now: dt.datetime) -> DecomposeRequest:
        """The reading's parameters, its window relative to the run at `now` where the
        request leaves it out (a schedule's `variance.decompose` reads the last week)."""
        since, until = window_at(self.since, self.until, self.bucket, now)
        if until <= since:
            raise JobError("until must be after since")
        return DecomposeRequest(
            self.surface_id,
            self.dimension_id,
            since,
            until,
            self.bucket,
            self.run_modes,
            self.provenances_read(),
            tenant_id=self.tenant,
            role=self.role,
            light_source=self.light_source,
        )


Request = DecomposeVarianceRequest
Report = VarianceReading


def run(store: Store, request: Request, clock: Clock) -> Report:
    """The reading of the surface's dimension over the window, read-only."""
    now = clock()
    try:
        return decompose(store, request.analysis(now), now)
    except SelectionError as err:
        raise JobError(str(err), "series_ambiguous") from None


def persist(store: Store, report: Report) -> Report:
    """The reading in `variance_readings` and as an analysis event."""
    persist_reading(store, report)
    return report


finding = never_a_finding  # a reading or a decision is never one by itself

JOB = Job(
    "variance.decompose", Request, VarianceReading, run, persist, finding,
    owner_tenant=True,
)  # fmt: skip
