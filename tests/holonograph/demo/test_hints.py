"""The demo's suggested commands (tests/e2e/test_demo.py runs them on a live store)."""

from __future__ import annotations

import datetime as dt

import pytest

from holonograph.demo.hints import hints, series_bucket
from holonograph.demo.traffic import DemoPlan, DemoSummary

UNTIL = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("days", "calls_per_day", "bucket"),
    [(14, 120, "day"), (14, 720, "hour"), (4, 240, "hour"), (30, 48, "day")],
)
def test_drift_is_read_by_day_when_hours_would_be_sparse(
    days: int, calls_per_day: int, bucket: str
) -> None:
    plan = DemoPlan(until=UNTIL, days=days, calls_per_day=calls_per_day)
    assert series_bucket(plan) == bucket
    summary = DemoSummary(plan=plan, endpoint="http://127.0.0.1:4318")
    (drift,) = [h for h in hints(plan, summary) if h.argv[1] == "drift"]
    assert ("--bucket" in drift.argv) == (bucket == "day")
    assert drift.argv[drift.argv.index("--since") + 1] == f"{plan.start:%Y-%m-%dT%H:%M:%SZ}"
