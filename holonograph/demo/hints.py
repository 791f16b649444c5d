"""What `holonograph demo` suggests running next: one command per planted problem, with
the flags that make it show (tests/e2e/test_demo.py runs every one on the demo's store).

Drift brackets buckets with fewer than `SPARSE_MIN` outcomes as `sparse`; the demo's
default traffic (120 calls a day) puts 5 in an hour, so its two weeks are read by day.
A shorter demo stays hourly (sparse-bracketed, but the change is found): on 8 daily
buckets drift's permutation test does not find the planted change (tried: 8 days of 120
calls), on 14 it does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from holonograph.demo.traffic import DIMENSION, SURFACES, VERSIONS, DemoPlan, DemoSummary
from processors.drift.job import DriftRequest
from schemas.times import rfc3339

_DRIFT = {f.name: f.default for f in dataclasses.fields(DriftRequest)}
SPARSE_MIN = int(_DRIFT["sparse_min_events"])  # type: ignore[arg-type]
DAY_SERIES_DAYS = 14  # days from which the demo's drift is read by day


@dataclass(frozen=True)
class Hint:
    """A command line (`holonograph` and its arguments) and what it shows."""

    argv: tuple[str, ...]
    shows: str

    def to_json(self) -> dict[str, object]:
        return {"command": list(self.argv), "shows": self.shows}


def series_bucket(plan: DemoPlan) -> str:
    """The bucket whose series is not sparse: hour when an hour holds enough outcomes,
    else day when the plan spans enough days for drift to find the change by day, else
    hour (sparse-bracketed, but the change is found)."""
    if plan.calls_per_day / 24 >= SPARSE_MIN or plan.days < DAY_SERIES_DAYS:
        return "hour"
    return "day"


def hints(plan: DemoPlan, summary: DemoSummary) -> list[Hint]:
    first = SURFACES[0]
    window = ("--since", rfc3339(plan.start), "--until", rfc3339(plan.until))
    bucket = series_bucket(plan)
    by = ("--bucket", bucket) if bucket != "hour" else ()
    return [
        Hint(
            ("holonograph", "drift", "--surface", first, *window, *by),
            f"the primary's pass rate drops at {rfc3339(plan.change_at)}, attributed to the"
            f" light source ({VERSIONS[0]} -> {VERSIONS[1]}), the deploy {plan.deploy_id}"
            " cited",
        ),
        Hint(
            (
                "holonograph",
                "variance",
                "decompose",
                "--surface",
                first,
                "--dimension",
                DIMENSION,
                *window,
                *by,
            ),
            "then `holonograph variance evaluate --target-event-id <its eventId>`: the light"
            " source varied in the window, one stratum per vendor version",
        ),
        Hint(
            ("holonograph", "compare", "--surface", first, *window),
            "primary and observer paired on every call, no fallbacks",
        ),
        Hint(
            ("holonograph", "completeness", "--stream", plan.gap_stream),
            f"closed-lossy: {summary.dropped} events the client dropped on {plan.gap_day}",
        ),
        Hint(
            ("holonograph", "lessons", "cluster", "--surface", first, *window),
            f"the {len(summary.overrides)} human override(s), clustered",
        ),
    ]
