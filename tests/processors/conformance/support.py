"""Shared helpers for the conformance tests: a migrated chDB store and direct inserts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from processors.conformance.eval import DimensionView, EventView
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS

T0 = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id",
    "event_id",
    "surface_id",
    "run_mode",
    "provenance",
    "timestamp",
    "markers",
    "cohort_tags",
    "latency_ms",
    "cost_usd",
    "fixture_id",
    "dimension_ids",
    "emission_stream",
    "emission_seq",
    "ingested_at",
)
DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id",
    "event_id",
    "dimension_id",
    "passed",
    "score",
    "judge",
    "surface_id",
    "run_mode",
    "timestamp",
    "ingested_at",
)


def insert_events(
    store: Store, events: Sequence[EventView], surface_id: str = "classify-intent", **extra: Any
) -> None:
    """Store events as the receiver would: markers and dimensions in their tables, as
    tenant `tenant_id` (default `default`)."""
    tenant = extra.get("tenant_id", DEFAULT_TENANT)
    run_mode = extra.get("run_mode", "production")
    fixture_id = extra.get("fixture_id", "")
    now = dt.datetime(2026, 7, 10, tzinfo=dt.UTC)
    rows: list[list[Any]] = []
    dims: list[list[Any]] = []
    for seq, e in enumerate(events):
        ts = e.timestamp or T0 + dt.timedelta(minutes=seq)
        rows.append(
            [
                tenant,
                e.event_id,
                surface_id,
                run_mode,
                "production-state",
                ts,
                {k: list(v) for k, v in e.markers.items()},
                list(e.cohort_tags),
                e.latency_ms,
                e.cost_usd,
                fixture_id,
                list(e.dimensions),
                "stream-1",
                seq,
                now,
            ]
        )
        for dim_id, d in e.dimensions.items():
            dims.append(
                [tenant, e.event_id, dim_id, d.passed, d.score, d.judge, surface_id, run_mode,
                 ts, now]
            )  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, rows, EVENT_COLUMNS)
    store.insert(EVALUATION_DIMENSIONS.qualified, dims, DIMENSION_COLUMNS)


def event(
    event_id: str,
    markers: Mapping[str, Sequence[str]] | None = None,
    *,
    at: int | None = None,
    tags: Sequence[str] = (),
    latency: float | None = None,
    cost: float | None = None,
    dims: Mapping[str, tuple[bool | None, float | None] | tuple[bool | None, float | None, str]]
    | None = None,
) -> EventView:
    """An event view; `at` is minutes after T0."""
    return EventView(
        event_id=event_id,
        timestamp=None if at is None else T0 + dt.timedelta(minutes=at),
        markers={k: list(v) for k, v in (markers or {}).items()},
        cohort_tags=list(tags),
        latency_ms=latency,
        cost_usd=cost,
        dimensions={k: DimensionView(*v) for k, v in (dims or {}).items()},
    )


# Slot verdicts are driven by dimensions: a dimension-passed slot reads pass (True), fail
# (False) or unevaluable (absent); a judge slot reads pass, fail or requires-judge.
DIM_STATES = {"pass": (True, None), "fail": (False, None), "unevaluable": None}
JUDGE_STATES = {"pass": (True, None), "fail": (False, None), "requires-judge": None}


def guide_verdict(guard: tuple[str, ...], verdicts: tuple[str, ...]) -> str:
    """The Guide's rules, spelled out: a failed guard is not-applicable; an undecided
    guard leaves the event undecided; then fail, else pass if any passed, else a
    pending judge, else unevaluable."""
    if "fail" in guard:
        return "not-applicable"
    if any(v != "pass" for v in guard):
        return "requires-judge" if "requires-judge" in guard else "unevaluable"
    if "fail" in verdicts:
        return "fail"
    if "pass" in verdicts:
        return "pass"
    if "requires-judge" in verdicts:
        return "requires-judge"
    return "unevaluable"
