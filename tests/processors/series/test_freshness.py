"""Staleness is for late arrivals, not live traffic (issue 27): while `serve` ingests, an
event has always arrived since the last completeness refresh began, but one that
happened within two refresh periods before it lands in a window still being filled and
is counted by the next refresh. Only an event older than that, arriving after the
refresh (a backfill, a late delivery), makes a read-only analysis say it is stale. The
refresh begins on the wall clock that stamps arrivals; every other time is injected
from it: the events' times, their `ingested_at`, the job's clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ingest.store.clickhouse import open_store
from processors.completeness.job import recompute_completeness
from processors.drift import job as drift_job
from processors.series.cells import SeriesQuery
from processors.series.freshness import judge, live_tolerance, read_freshness
from processors.series.refreshes import last_refresh_began
from schemas.migrations import apply_migrations
from schemas.store import Store
from testkit.scenarios import SurfaceSpec, generate, write_cells

pytestmark = pytest.mark.clickhouse

SECOND = dt.timedelta(seconds=1)


def _hour(surface: str, start: dt.datetime) -> SurfaceSpec:
    """An hour of events from `start` (the scenarios' smallest cell)."""
    return SurfaceSpec(surface, start=start.replace(tzinfo=None), buckets=1, events=(20, 30),
                       alias=f"a-{surface}")  # fmt: skip


@dataclass(frozen=True)
class Refreshed:
    store: Store
    began: dt.datetime  # when the last refresh began

    def query(self, surface: str) -> SeriesQuery:
        hour = dt.timedelta(hours=1)
        return SeriesQuery(surface, self.began - 6 * hour, self.began + 2 * hour)


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Refreshed]:
    """One refresh; then, arriving 90 s after it began, an hour of events from: when it
    began (live traffic), 60 s before (within the tolerance of two 60 s periods), and
    three hours before (a backfill)."""
    opened = open_store(f"chdb://{tmp_path_factory.mktemp('freshness') / 'store'}")
    try:
        apply_migrations(opened)
        now = dt.datetime.now(dt.UTC)
        history = _hour("history", now - dt.timedelta(hours=5))
        write_cells(opened, generate(history, seed=1), ingested_at=now - 60 * SECOND)
        recompute_completeness(opened, now)
        began = last_refresh_began(opened)
        assert began is not None
        for surface, start in (
            ("live", began),
            ("recent", began - 60 * SECOND),
            ("backfill", began - dt.timedelta(hours=3)),
        ):
            cells = generate(_hour(surface, start), seed=2)
            write_cells(opened, cells, ingested_at=began + 90 * SECOND)
        yield Refreshed(opened, began)
    finally:
        opened.close()


@pytest.mark.parametrize("surface", ["live", "recent"])
def test_live_traffic_since_the_refresh_is_not_stale(refreshed: Refreshed, surface: str) -> None:
    found = read_freshness(refreshed.store, refreshed.query(surface))
    assert found.newest_arrival is not None
    assert found.newest_arrival > refreshed.began  # it did arrive after the refresh
    assert (found.stale, found.behind_seconds) == (False, None)


def test_a_backfill_since_the_refresh_is_stale_by_its_arrival(refreshed: Refreshed) -> None:
    found = read_freshness(refreshed.store, refreshed.query("backfill"))
    assert found.stale is True and found.behind_seconds == pytest.approx(90, abs=0.01)


def test_the_tolerance_follows_the_refresh_cadence(
    refreshed: Refreshed, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert live_tolerance() == dt.timedelta(seconds=120)  # two periods of 60 s
    monkeypatch.setenv("HOLONOGRAPH_STATUS_REFRESH_SECONDS", "10")
    assert live_tolerance() == dt.timedelta(seconds=20)
    # 60 s before a refresh every 10 s is late: that window was counted already.
    assert read_freshness(refreshed.store, refreshed.query("recent")).stale is True
    assert read_freshness(refreshed.store, refreshed.query("live")).stale is False
    monkeypatch.setenv("HOLONOGRAPH_STATUS_REFRESH_SECONDS", "not a number")
    assert live_tolerance() == dt.timedelta(seconds=120)


def test_a_read_only_drift_over_live_traffic_carries_no_stale_note(refreshed: Refreshed) -> None:
    answers = {}
    for surface in ("live", "backfill"):
        query = refreshed.query(surface)
        request = drift_job.Request.model_validate(
            {"surfaceId": surface, "since": query.since, "until": query.until, "persist": False}
        )
        clock = lambda: refreshed.began + 2 * dt.timedelta(minutes=1)  # noqa: E731
        answers[surface] = drift_job.run(refreshed.store, request, clock).to_json()
    live, backfill = answers["live"], answers["backfill"]
    assert live["freshness"]["stale"] is False
    assert not [n for n in live["notes"] if n.startswith("stale:")]
    assert backfill["freshness"]["stale"] is True
    (note,) = [n for n in backfill["notes"] if n.startswith("stale:")]
    assert "that happened before that refresh" in note and "not bracketed" in note


def test_judge_without_a_refresh_or_a_late_arrival() -> None:
    began = dt.datetime(2026, 6, 10, 12, 0, tzinfo=dt.UTC)
    at = began + SECOND
    assert judge(None, at).stale is True  # never refreshed: nothing is bracketed
    assert judge(began, None).stale is False  # nothing the windows could count
    assert judge(began, at, None).stale is False  # live traffic only
    stale = judge(began, at, at)
    assert (stale.stale, stale.behind_seconds) == (True, 1.0)
