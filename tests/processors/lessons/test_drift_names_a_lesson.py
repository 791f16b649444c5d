"""A published lesson is a change event drift attribution reads: a seeded shift that
starts when the lesson was published is attributed to substrate with the lesson cited
(artifact id and version), and a draft that was never approved is never cited."""

from __future__ import annotations

import datetime as dt

import pytest

from processors.drift.job import DriftRequest, run_drift
from processors.lessons import approve, cluster, draft, overrides, publish
from schemas.store import Store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells
from tests.processors.lessons.support import Clock, call, override_body

pytestmark = pytest.mark.clickhouse
START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
HOURS, SHIFT = 240, 160
SURFACE = "lessoned"


def hour(h: float) -> dt.datetime:
    return START + dt.timedelta(hours=h)


def _hours(moment: dt.datetime) -> float:
    return (moment.replace(tzinfo=dt.UTC) - START) / dt.timedelta(hours=1)


def test_drift_names_the_lesson_published_when_the_shift_began(store: Store) -> None:
    spec = SurfaceSpec(
        SURFACE, start=START.replace(tzinfo=None), tau=0.01, events=(100, 300), buckets=HOURS,
        alias=f"solo/{SURFACE}", served=f"solo/{SURFACE}/v1",
        changes=(Change(SHIFT, -0.08, ("silent",)),),
    )  # fmt: skip
    write_cells(store, generate(spec, seed=7), dt.datetime(2026, 7, 1))
    clock = Clock(hour(SHIFT - 30))
    for n in range(3):
        at = (hour(SHIFT - 24) + dt.timedelta(minutes=n)).isoformat()
        call(store, overrides.JOB, override_body(n, surfaceId=SURFACE, at=at), clock)
    window = {"surfaceId": SURFACE, "since": hour(SHIFT - 48).isoformat(),
              "until": hour(SHIFT).isoformat(), "record": True}  # fmt: skip
    (found,) = call(store, cluster.JOB, window, clock).clusters
    lesson = call(store, draft.JOB, {"kind": "lesson", "clusterId": found.cluster_id}, clock)
    draft_id = lesson.to_json()["draftId"]
    never = call(store, draft.JOB, {"kind": "skill", "clusterId": found.cluster_id}, clock)
    assert never.to_json()["status"] == "drafted"  # waits at the gate: never published
    call(store, approve.JOB, {"draftId": draft_id, "approverId": "brian"}, clock)
    clock.now = hour(SHIFT) - dt.timedelta(minutes=1)  # the next reading is the shift's hour
    published = call(store, publish.JOB, {"draftId": draft_id}, clock).to_json()
    report = run_drift(store, DriftRequest(SURFACE, START, hour(HOURS), tenant_id="default"))
    near = [
        p
        for p in report.change_points
        if abs((p.timestamp.replace(tzinfo=dt.UTC) - hour(SHIFT)) / dt.timedelta(hours=1)) <= 3
    ]
    (point,) = near
    assert (point.source, point.confident) == ("substrate", True), point.reason
    (cited,) = point.change_events
    assert (cited.kind, cited.layer, cited.artifact_id, cited.artifact_version) == (
        "lesson", "substrate", published["artifact"]["artifactId"], "1",
    )  # fmt: skip
    assert cited.actor == "brian" and cited.at == hour(SHIFT)
    assert "published" in cited.description
