"""Shared helpers for the lessons tests: the runner on one store, calls with correlation
ids and graded dimensions, and a stepping clock."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from holonograph.runner import execute, scope
from processors.jobs import Job
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS

SURFACE = "classify-intent"
AGENT = "billing-triage"
T0 = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "agent_id", "correlation_id", "run_mode",
    "provenance", "timestamp", "markers", "cohort_tags", "dimension_ids", "emission_stream",
    "emission_seq", "ingested_at",
)  # fmt: skip
DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "surface_id", "agent_id",
    "correlation_id", "run_mode", "timestamp", "ingested_at",
)  # fmt: skip


class OneStore:
    """The runner's StoreAccess over a test's store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextlib.contextmanager
    def reading(self, tenant: str | None, limits: object = None) -> Iterator[Store]:
        yield self.store

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        yield self.store


class Clock:
    """Starts at `start` and moves one minute per reading."""

    def __init__(self, start: dt.datetime = T0 + dt.timedelta(days=1)) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(minutes=1)
        return self.now


def call(
    store: Store, job: Job[Any, Any], body: Mapping[str, Any], clock: Clock,
    tenant: str | None = None,
) -> Any:  # fmt: skip
    """Run a job as the HTTP API does: the body by its camelCase names (for `tenant`, else
    the store's only one)."""
    request = job.request.model_validate(dict(body), by_alias=True, by_name=False)
    request = request.for_tenant(tenant)
    stores = OneStore(store)
    return execute(job, scope(job, request, stores), stores, clock)


def insert_calls(
    store: Store,
    calls: Sequence[tuple[str, str, Mapping[str, bool], Mapping[str, Sequence[str]]]],
    *,
    surface: str = SURFACE,
    tenant: str = "default",
    start: dt.datetime = T0,
) -> None:
    """Evaluation events `(event_id, correlation_id, {dimension: passed}, markers)`, one
    minute apart from `start`."""
    rows, dims = [], []
    now = dt.datetime(2026, 7, 10, tzinfo=dt.UTC)
    for seq, (event_id, correlation, grades, markers) in enumerate(calls):
        ts = start + dt.timedelta(minutes=seq)
        rows.append(
            [tenant, event_id, surface, AGENT, correlation, "production", "production-state",
             ts, {k: list(v) for k, v in markers.items()}, [], list(grades), "stream-1", seq, now]
        )  # fmt: skip
        for dimension, passed in grades.items():
            dims.append(
                [tenant, event_id, dimension, passed, surface, AGENT, correlation, "production",
                 ts, now]
            )  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, rows, EVENT_COLUMNS)
    if dims:
        store.insert(EVALUATION_DIMENSIONS.qualified, dims, DIMENSION_COLUMNS)


def override_body(n: int, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agentId": AGENT,
        "surfaceId": SURFACE,
        "correlationId": f"corr_{n:03d}",
        "originalOutput": {"intent": "refund", "answer": "Your refund is on its way."},
        "correctedOutput": {"intent": "refund", "answer": "Let me look up your refund first."},
        "rationale": "Refund lookup wasn't invoked; agent guessed the refund status.",
        "tags": ["fix_tier=tool-input-schema", "tool=refund_lookup"],
        "at": (T0 + dt.timedelta(minutes=n)).isoformat(),
    }
    body.update(changes)
    return body


def seed_lessons(store: Store, at: dt.datetime, surface: str = SURFACE) -> dict[str, Any]:
    """Through the jobs, from `at`: five overrides in two clusters (recorded), a lesson of
    the larger one approved and published, a skill of the other waiting at the gate."""
    from processors.lessons import approve, cluster, draft, overrides, publish

    clock = Clock(at)
    for n in range(5):
        tags = ["fix_tier=prompt"] if n < 3 else ["fix_tier=retrieval"]
        when = (at + dt.timedelta(minutes=n)).isoformat()
        body = override_body(n, surfaceId=surface, tags=tags, at=when)
        call(store, overrides.JOB, body, clock, "default")
    window = {"surfaceId": surface, "since": at.isoformat(),
              "until": (at + dt.timedelta(hours=1)).isoformat(), "record": True}  # fmt: skip
    big, small = call(store, cluster.JOB, window, clock, "default").clusters
    lesson = call(
        store, draft.JOB, {"kind": "lesson", "clusterId": big.cluster_id}, clock, "default"
    )
    draft_id = lesson.to_json()["draftId"]
    call(store, approve.JOB, {"draftId": draft_id, "approverId": "brian"}, clock, "default")
    published = call(store, publish.JOB, {"draftId": draft_id}, clock, "default").to_json()
    waiting = call(
        store, draft.JOB, {"kind": "skill", "clusterId": small.cluster_id}, clock, "default"
    )
    return {
        "published": published["artifact"]["artifactId"],
        "open": small.cluster_id,
        "waiting": waiting.to_json()["draftId"],
    }
