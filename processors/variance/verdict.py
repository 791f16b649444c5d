"""Verdicts on variance readings, and their governance.

`evaluate` checks, in this order, first match wins:
1. insufficient-data - too few buckets or events for the interval to mean anything;
2. delivery-biased - completeness too low in the window, or the outcome differs in the
   buckets that lost events (loss correlated with outcome);
3. confounded - a layer (lens, light source, substrate column, run mode) took several
   values inside the window, or a change point lies inside it. When every layer stratum
   is viable on its own the verdict is `viable`, with the per-stratum readings;
4. viable.
Every verdict carries guidance naming what would make the reading viable.

`lifecycle` records lock | pin | supersede | discard as analysis events; supersede and
discard are final.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from processors.analysis_events import record_event
from processors.jobs import ErrorKind, JobError
from processors.series import changepoint as cp
from processors.series.cells import (
    BUCKETS,
    Cell,
    Series,
    SeriesQuery,
    bucket_grid,
    build_series,
    fetch_cells,
    layer_names,
)
from processors.series.delivery import LossWindow, fetch_loss_windows
from processors.series.freshness import read_freshness, stale_note
from processors.variance.decompose import Decomposition, paule_mandel
from schemas.analysis import (
    Interval,
    LifecycleRecord,
    StratumReading,
    VarianceEvaluation,
    VarianceReading,
    Verdict,
)
from schemas.store import Store
from schemas.tables import ANALYSIS_EVENTS, COMPLETENESS_WINDOWS, VARIANCE_READINGS


@dataclass(frozen=True)
class VerdictConfig:
    min_buckets: int = 12
    min_events: int = 300
    min_completeness: float = 0.98
    loss_z: float = 2.576
    layer_share: float = 0.05  # a second value counts once it carries 5 % of the events
    alpha: float = 0.02
    seed: int = 0


def reading_query(reading: VarianceReading) -> SeriesQuery:
    return SeriesQuery(
        reading.surface_id,
        reading.since,
        reading.until,
        reading.bucket,
        reading.dimension_id,
        tuple(reading.provenances),
        tuple(reading.run_modes),
        reading.tenant_id,
        reading.series.role,
        reading.series.light_source or "",
    )


Finding = tuple[Verdict, list[str], list[str], list[StratumReading]]


def evaluate(
    store: Store, reading: VarianceReading, now: dt.datetime, cfg: VerdictConfig | None = None
) -> VarianceEvaluation:
    """The first verdict whose check matches, with its reasons, guidance and checks."""
    cfg = cfg or VerdictConfig()
    checks: dict[str, object] = {"buckets": reading.buckets, "events": reading.events}
    finding = insufficiency(reading, cfg)
    if finding is None:
        query = reading_query(reading)
        binary = reading.outcome == "passed"
        series = build_series(
            bucket_grid(reading.since, reading.until, reading.bucket),
            fetch_cells(store, query, reading.dimension_id, binary),
            binary,
        )
        biased = delivery_bias(store, query, reading, series, cfg, checks)
        finding = ("delivery-biased", *biased, []) if biased else None
        finding = finding or confounding(series, reading, cfg, checks)
    verdict, reasons, guidance, strata = finding
    return VarianceEvaluation(
        event_id=f"evt_{uuid.uuid4().hex}",
        target_event_id=reading.event_id,
        verdict=verdict,
        reasons=reasons,
        guidance=guidance,
        strata=strata,
        checks=checks,
        created_at=now,
    )


def insufficiency(reading: VarianceReading, cfg: VerdictConfig) -> Finding | None:
    if reading.buckets >= cfg.min_buckets and reading.events >= cfg.min_events:
        return None
    width = BUCKETS[reading.bucket]
    return (
        "insufficient-data",
        [f"{reading.buckets} buckets / {reading.events} events; need {cfg.min_buckets}"
         f" buckets and {cfg.min_events} events"],
        [f"more buckets: widen the window to at least {cfg.min_buckets * width}"
         + (" or use hour buckets" if reading.bucket == "day" else "")],
        [],
    )  # fmt: skip


def confounding(
    series: Series, reading: VarianceReading, cfg: VerdictConfig, checks: dict[str, object]
) -> Finding:
    """`confounded` when layers varied or a change point lies inside - unless every layer
    stratum is viable on its own - else `viable`."""
    layers = varying_layers(series.cells, cfg)
    points = change_points_inside(series, cfg)
    checks["varyingLayers"] = layers
    checks["changePoints"] = [p.isoformat() for p in points]
    if not layers and not points:
        return ("viable", ["no layer changed and no change point in the window"], [], [])
    strata = stratum_readings(series, layers, reading, cfg) if layers else []
    if strata and all(s.viable for s in strata):
        return (
            "viable",
            [f"layers varied ({', '.join(layers)}) but every stratum is viable on its own"],
            ["read the per-stratum readings; the pooled figure mixes strata"],
            strata,
        )
    reasons = [f"{name} took several values in the window" for name in layers]
    reasons += [f"change point at {p:%Y-%m-%dT%H:%MZ}" for p in points]
    guidance = [f"hold {name} still: slice the reading by it" for name in layers]
    if points:
        guidance.append(
            "a narrower window: end it before "
            f"{points[0]:%Y-%m-%dT%H:%MZ} or start it after {points[-1]:%Y-%m-%dT%H:%MZ}"
        )
    return ("confounded", reasons, guidance, strata)


def delivery_bias(
    store: Store,
    query: SeriesQuery,
    reading: VarianceReading,
    series: Series,
    cfg: VerdictConfig,
    checks: dict[str, object],
) -> tuple[list[str], list[str]] | None:
    """Reasons and guidance when the window lost too much, or lost selectively."""
    windows = fetch_loss_windows(store, query)
    if windows is None:
        checks["delivery"] = f"not checked: {COMPLETENESS_WINDOWS.qualified} is not in the store"
        return None
    freshness = read_freshness(store, query)
    checks["freshness"] = freshness.model_dump(by_alias=True)
    note = stale_note(freshness)
    if note is not None:  # never a silently unweighed verdict
        checks["delivery"] = note
    lost = sum(max(w.offered - w.delivered, 0.0) for w in windows)
    completeness = reading.events / (reading.events + lost) if reading.events + lost > 0 else 1.0
    checks["completeness"] = completeness
    checks["lossWindows"] = len(windows)
    reasons = []
    if completeness < cfg.min_completeness:
        reasons.append(f"completeness {completeness:.3f} < {cfg.min_completeness}")
    z = _loss_outcome_z(series, windows, reading)
    checks["lossOutcomeZ"] = z
    if z is not None and abs(z) >= cfg.loss_z:
        reasons.append(f"outcome differs in buckets with delivery loss (z = {z:.2f})")
    if not reasons:
        return None
    spans = ", ".join(f"{w.start:%Y-%m-%dT%H:%MZ}..{w.end:%Y-%m-%dT%H:%MZ}" for w in windows[:5])
    return reasons, [
        f"a narrower window that leaves out the delivery-loss windows ({spans})",
        "stop the client-side loss (raise the emit buffer or drain rate) and re-read",
    ]


def _loss_outcome_z(
    series: Series, windows: list[LossWindow], reading: VarianceReading
) -> float | None:
    """Mean outcome of buckets inside loss windows vs the others, in standard errors."""
    lossy = np.zeros(len(series.grid), dtype=bool)
    for w in windows:
        for i, start in enumerate(series.grid):
            if w.start <= start < w.end:
                lossy[i] = True
    seen = series.n > 0
    a, b = lossy & seen, ~lossy & seen
    if a.sum() < 1 or b.sum() < 2:
        return None
    x = np.divide(series.y, series.n, out=np.zeros_like(series.y), where=seen)
    tau2 = reading.cleaned_variance or 0.0
    var_a = np.mean(reading.noise_variance or 0.0) + tau2
    se = float(np.sqrt(var_a / a.sum() + var_a / b.sum()))
    return float((x[a].mean() - x[b].mean()) / se) if se > 0 else None


def varying_layers(cells: list[Cell], cfg: VerdictConfig) -> list[str]:
    names = [*layer_names(cells), "run_mode"]
    out = []
    for name in names:
        share: dict[str, float] = defaultdict(float)
        for c in cells:
            share[c.layer(name)] += c.n
        total = sum(share.values())
        if sum(1 for v in share.values() if v >= cfg.layer_share * total) > 1:
            out.append(name)
    return out


def change_points_inside(series: Series, cfg: VerdictConfig) -> list[dt.datetime]:
    buckets = series.bucket_series()
    if len(buckets) < 6:
        return []
    found = cp.detect(buckets, cp.DetectConfig(alpha=cfg.alpha, n_boot=20), seed=cfg.seed)
    return [series.grid[int(series.index[p.index])] for p in found.change_points]


def stratum_readings(
    series: Series, layers: list[str], reading: VarianceReading, cfg: VerdictConfig
) -> list[StratumReading]:
    """One reading per combination of the varying layers' values (design effect of the
    pooled reading; change points tested inside each stratum)."""
    groups: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
    for c in series.cells:
        groups[tuple(c.layer(n) for n in layers)].append(c)
    deff = reading.design_effect
    out = []
    for key, cells in sorted(groups.items()):
        sub = build_series(series.grid, cells, series.binary)
        b = sub.bucket_series()
        label = dict(zip(layers, key, strict=True))
        if len(b) < cfg.min_buckets or float(b.n.sum()) < cfg.min_events:
            out.append(_stratum(label, b, None, False, "insufficient data"))
            continue
        unit = cp.within_variance(b)
        result = paule_mandel(b.rates, deff * unit / b.n)
        inside = change_points_inside(sub, cfg)
        reason = f"change point at {inside[0]:%Y-%m-%dT%H:%MZ}" if inside else ""
        out.append(_stratum(label, b, result, not inside, reason))
    return out


def _stratum(
    label: dict[str, str], b: cp.BucketSeries, d: Decomposition | None, viable: bool, reason: str
) -> StratumReading:
    return StratumReading(
        layers=label,
        buckets=len(b),
        events=int(b.n.sum()),
        mean=d.mean if d else None,
        cleaned_variance=d.tau2 if d else None,
        cleaned_variance_ci=Interval(estimate=d.tau2, ci_low=d.ci[0], ci_high=d.ci[1])
        if d
        else None,
        viable=viable,
        reason=reason,
    )


def persist_evaluation(
    store: Store, evaluation: VarianceEvaluation, reading: VarianceReading
) -> None:
    record_event(
        store, evaluation.event_id, "variance-evaluate", reading.surface_id,
        reading.dimension_id, evaluation.created_at, json.dumps(evaluation.to_json()),
        target_event_id=reading.event_id, verdict=evaluation.verdict,
        tenant_id=reading.tenant_id,
    )  # fmt: skip


FINAL_STATUSES = ("supersede", "discard")


class LifecycleError(JobError, ValueError):
    """The decision is not allowed: an unknown target (not-found), a missing field
    (invalid), a reading whose status is final already (conflict)."""

    def __init__(
        self, message: str, code: str = "invalid_lifecycle", kind: ErrorKind = "invalid"
    ) -> None:
        super().__init__(message, code)
        self.kind = kind


@dataclass(frozen=True)
class LifecycleDecision:
    """A validated decision and the reading it governs (surface, dimension, tenant)."""

    record: LifecycleRecord
    surface_id: str
    dimension_id: str
    tenant_id: str


def plan_lifecycle(
    store: Store,
    target_event_id: str,
    status: str,
    approver_id: str,
    now: dt.datetime,
    pinned_label: str | None = None,
    superseded_by: str | None = None,
    tenant_id: str | None = None,
) -> LifecycleDecision:
    """Validate one governance decision on a reading of `tenant_id` (None: any tenant's),
    read-only; the decision is the reading's tenant's."""
    target = _reading_scope(store, target_event_id, tenant_id)
    if target is None:
        raise LifecycleError(
            f"no variance reading {target_event_id!r}", "reading_not_found", "not-found"
        )
    if status not in ("lock", "pin", "supersede", "discard"):
        raise LifecycleError("status must be lock, pin, supersede or discard")
    if not approver_id:
        raise LifecycleError("approverId is required")
    if status == "pin" and not pinned_label:
        raise LifecycleError("pin needs a pinnedLabel")
    if status == "supersede":
        if not superseded_by:
            raise LifecycleError("supersede needs supersededBy")
        other = _reading_scope(store, superseded_by, target[2])
        if superseded_by == target_event_id or other is None:
            raise LifecycleError(f"supersededBy {superseded_by!r} is not another reading")
    current = current_status(store, target_event_id, target[2])
    if current in FINAL_STATUSES:
        raise LifecycleError(
            f"reading {target_event_id} is already {current}d", "lifecycle_final", "conflict"
        )
    record = LifecycleRecord(
        event_id=f"evt_{uuid.uuid4().hex}",
        target_event_id=target_event_id,
        status=status,  # type: ignore[arg-type]
        approver_id=approver_id,
        pinned_label=pinned_label,
        superseded_by=superseded_by if status == "supersede" else None,
        created_at=now,
    )
    return LifecycleDecision(record, *target)


def record_lifecycle(store: Store, decision: LifecycleDecision) -> None:
    """The decision as a `variance-lifecycle` analysis event (a substrate event drift
    can attribute to, like any other change)."""
    record = decision.record
    record_event(
        store, record.event_id, "variance-lifecycle", decision.surface_id,
        decision.dimension_id, record.created_at, json.dumps(record.to_json()),
        target_event_id=record.target_event_id, status=record.status,
        approver_id=record.approver_id, pinned_label=record.pinned_label,
        superseded_by=record.superseded_by, tenant_id=decision.tenant_id,
    )  # fmt: skip


def lifecycle(
    store: Store,
    target_event_id: str,
    status: str,
    approver_id: str,
    now: dt.datetime,
    pinned_label: str | None = None,
    superseded_by: str | None = None,
    tenant_id: str | None = None,
) -> LifecycleRecord:
    """Validate and record one governance decision (`plan_lifecycle`, `record_lifecycle`)."""
    decision = plan_lifecycle(
        store, target_event_id, status, approver_id, now, pinned_label, superseded_by, tenant_id
    )
    record_lifecycle(store, decision)
    return decision.record


def _reading_scope(
    store: Store, event_id: str, tenant_id: str | None
) -> tuple[str, str, str] | None:
    """(surface, dimension, tenant) of a stored reading of `tenant_id` (None: any)."""
    rows = store.query(
        f"SELECT surface_id, dimension_id, tenant_id FROM {VARIANCE_READINGS.qualified} FINAL"
        " WHERE event_id = {id:String} AND ({tenant:String} = '' OR tenant_id = {tenant:String})",
        {"id": event_id, "tenant": tenant_id or ""},
    ).rows
    return (str(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else None


def current_status(store: Store, target_event_id: str, tenant_id: str | None = None) -> str | None:
    value = store.query(
        f"SELECT argMax(status, created_at) FROM {ANALYSIS_EVENTS.qualified} FINAL"
        " WHERE kind = 'variance-lifecycle' AND target_event_id = {id:String}"
        " AND ({tenant:String} = '' OR tenant_id = {tenant:String})"
        " HAVING count() > 0",
        {"id": target_event_id, "tenant": tenant_id or ""},
    ).scalar()
    return None if value is None else str(value)
