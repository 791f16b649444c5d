"""Persistence of drift runs: one `drift_change_points` row per change point and per
bracketed window (the run's parameters repeated on each), and the whole report as a
`drift-run` event in `analysis_events`, so a run that found nothing is on record too."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from schemas.analysis import DriftReport
from schemas.events import DEFAULT_TENANT
from schemas.store import Store


def persist_drift(store: Store, report: DriftReport, now: Callable[[], dt.datetime]) -> None:
    """Write the run's change points and brackets, then the run itself as an analysis
    event, under the run's tenant (a run over every tenant of a store that holds none
    yet is recorded as tenant `default`)."""
    run_at = now().astimezone(dt.UTC).replace(tzinfo=None)
    tenant = report.tenant_id or DEFAULT_TENANT
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
        tenant,
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
                tenant,
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
    "tenant_id",
]  # fmt: skip
ANALYSIS_EVENT_COLUMNS = [
    "tenant_id", "event_id", "kind", "target_event_id", "surface_id", "dimension_id", "status",
    "verdict", "approver_id", "pinned_label", "superseded_by", "created_at", "payload",
]  # fmt: skip
