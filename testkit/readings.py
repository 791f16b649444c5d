"""Stored analysis results for the page tests (the report, the web UI): one recorded
drift run's change point on a surface's `correctness` and a `viable` variance verdict,
as `drift` and `variance evaluate` would have stored them, over the day from `start`."""

from __future__ import annotations

import datetime as dt

from processors.analysis_events import record_event
from schemas.store import Store
from schemas.tables import DRIFT_CHANGE_POINTS


def seed_readings(store: Store, surface_id: str, start: dt.datetime) -> None:
    hours = [start + dt.timedelta(hours=n) for n in (3, 2, 4)]
    store.insert(
        DRIFT_CHANGE_POINTS.qualified,
        [["run-1", start + dt.timedelta(days=1), surface_id, "correctness", "change_point",
          *hours, "light source", "served model changed", True, -0.12, start,
          start + dt.timedelta(days=1), "default"]],
        DRIFT_CHANGE_POINTS.pick(
            "run_id", "run_at", "surface_id", "dimension_id", "kind", "change_time",
            "window_from", "window_to", "source", "reason", "confident", "effect", "since",
            "until", "tenant_id",
        ),
    )  # fmt: skip
    record_event(
        store, "verdict-1", "variance-evaluate", surface_id, "correctness",
        start + dt.timedelta(hours=5), "{}", verdict="viable",
    )  # fmt: skip
