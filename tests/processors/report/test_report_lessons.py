"""The report shows the lessons pipeline per surface, counted as the lessons dashboard
counts it: overrides in the window, open clusters, drafts at the gate, approved drafts
not yet published, and what was published; another tenant's or surface's never."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from processors.report.gather import ReportRequest, gather, surfaces_in_window
from processors.report.html import render
from processors.report.job import Report
from schemas.tables import LESSON_ARTIFACTS, LESSON_CLUSTERS, LESSON_DRAFTS, LESSON_OVERRIDES
from testkit.backends import migrated_store
from testkit.multiplex import MultiplexSpec, seed

pytestmark = pytest.mark.clickhouse

SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
SURFACE = "classify-intent"
IN = SINCE + dt.timedelta(hours=2)
BEFORE = SINCE - dt.timedelta(days=3)


def _seed_lessons(store: object) -> None:
    insert = store.insert  # type: ignore[attr-defined]
    insert(
        LESSON_OVERRIDES.qualified,
        [["default", "ovr-1", SURFACE, IN], ["default", "ovr-2", SURFACE, IN],
         ["default", "ovr-old", SURFACE, BEFORE], ["globex", "ovr-g", SURFACE, IN],
         ["default", "ovr-r", "route", IN]],
        LESSON_OVERRIDES.pick("tenant_id", "event_id", "surface_id", "occurred_at"),
    )  # fmt: skip
    insert(
        LESSON_CLUSTERS.qualified,
        [["default", "cl-open", SURFACE, IN], ["default", "cl-done", SURFACE, IN],
         ["globex", "cl-g", SURFACE, IN]],
        LESSON_CLUSTERS.pick("tenant_id", "cluster_id", "surface_id", "computed_at"),
    )  # fmt: skip
    insert(
        LESSON_DRAFTS.qualified,
        [["default", "dr-wait", 1, "drafted", SURFACE, IN],
         ["default", "dr-ok", 1, "drafted", SURFACE, IN],
         ["default", "dr-ok", 2, "approved", SURFACE, IN],
         ["default", "dr-no", 1, "drafted", SURFACE, IN],
         ["default", "dr-no", 2, "rejected", SURFACE, IN],
         ["default", "dr-pub", 1, "drafted", SURFACE, IN],
         ["default", "dr-pub", 2, "approved", SURFACE, IN],
         ["default", "dr-pub", 3, "published", SURFACE, IN],
         ["globex", "dr-g", 1, "drafted", SURFACE, IN]],
        LESSON_DRAFTS.pick("tenant_id", "draft_id", "seq", "action", "surface_id", "recorded_at"),
    )  # fmt: skip
    insert(
        LESSON_ARTIFACTS.qualified,
        [["default", "art-1", 2, "lesson", SURFACE, "cl-done", IN + dt.timedelta(hours=1)],
         ["globex", "art-g", 1, "lesson", SURFACE, "cl-g", IN]],
        LESSON_ARTIFACTS.pick(
            "tenant_id", "artifact_id", "version", "kind", "surface_id", "cluster_id",
            "published_at",
        ),
    )  # fmt: skip


def test_the_report_shows_the_lessons_pipeline_of_each_surface(tmp_path: Path) -> None:
    with migrated_store(tmp_path / "store") as store:
        seed(store, MultiplexSpec(calls=40, fallbacks=0), 3)
        _seed_lessons(store)
        request = ReportRequest(SINCE, UNTIL, UNTIL, surface_id=SURFACE, tenant_id="default")
        data = gather(store, request, surfaces_in_window(store, request), lambda _: None)
    assert len(data.surfaces) == 1
    lessons = Report(data).to_json()["surfaces"][0]["lessons"]
    assert {k: v for k, v in lessons.items() if k != "published"} == {
        "overrides": 2,
        "openClusters": 1,
        "draftsAtGate": 1,
        "approvedUnpublished": 1,
    }
    assert lessons["published"] == [
        {"artifactId": "art-1", "version": 2, "kind": "lesson",
         "publishedAt": IN + dt.timedelta(hours=1)},
    ]  # fmt: skip
    page = render(data)
    assert f'<b data-metric="lessons/{SURFACE}/overrides">2</b> overrides received' in page
    assert f'data-metric="lessons/{SURFACE}/draftsAtGate">1</b>' in page
    assert f'data-metric="lessons/{SURFACE}/published/art-1"' in page
    assert "art-g" not in page and "ovr-g" not in page
