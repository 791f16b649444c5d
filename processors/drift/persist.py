"""Persistence of drift runs: one `drift_change_points` row per change point and per
bracketed window (the run's parameters repeated on each), and the whole report as a
`drift-run` event in `analysis_events`, so a run that found nothing is on record too."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from processors.analysis_events import record_event
from schemas.analysis import DriftReport
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import DRIFT_CHANGE_POINTS
from schemas.times import to_store_time


def persist_drift(store: Store, report: DriftReport, now: Callable[[], dt.datetime]) -> None:
    """Write the run's change points and brackets, then the run itself as an analysis
    event, under the run's tenant (a run over every tenant of a store that holds none
    yet is recorded as tenant `default`)."""
    run_at = to_store_time(now())
    tenant = report.tenant_id or DEFAULT_TENANT
    p = report.parameters
    common = [
        to_store_time(report.since),
        to_store_time(report.until),
        p.bucket,
        p.change_point_delta_threshold,
        p.run_modes,
        p.provenances,
        p.alpha,
        p.permutations,
        p.seed,
        report.event_count,
        tenant,
    ]
    rows: list[list[object]] = []
    for point in report.change_points:
        evidence = point.to_json()
        rows.append(
            [
                report.run_id, run_at, report.surface_id, point.dimension_id, "change_point",
                to_store_time(point.timestamp), to_store_time(point.window.from_),
                to_store_time(point.window.to),
                point.source, point.reason, point.confident, point.effect.delta,
                point.effect.ci_low, point.effect.ci_high, point.test_statistic, point.penalty,
                point.p_value, json.dumps(evidence), *common,
            ]
        )  # fmt: skip
    for window in report.bracketed_windows:
        rows.append(
            [
                report.run_id, run_at, report.surface_id, window.dimension_id,
                "bracketed_window", None, to_store_time(window.from_), to_store_time(window.to), "",
                window.reason, False, None, None, None, None, None, None,
                json.dumps(window.to_json()), *common,
            ]
        )  # fmt: skip
    store.insert(DRIFT_CHANGE_POINTS.qualified, rows, DRIFT_CHANGE_POINTS.columns)
    record_event(
        store, report.run_id, "drift-run", report.surface_id, report.dimension_id or "",
        run_at, json.dumps(report.to_json()), tenant_id=tenant,
    )  # fmt: skip
