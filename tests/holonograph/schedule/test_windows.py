"""Jobs whose window is relative to the run: scheduled on a fake clock without a
window, `variance.decompose` reads the week and `report` the day that ended at the
fire time's midnight UTC, each persisted with the run (docs/schedules.md)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from holonograph.schedule.config import parse_schedule
from holonograph.schedule.records import runs_of
from holonograph.schedule.scheduler import Scheduler
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.reader import StoreSessions
from processors.variance.decompose import load_reading
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from tests.holonograph.schedule.helpers import T0, FakeClock, Sleeps

pytestmark = pytest.mark.clickhouse

MIDNIGHT = T0.replace(hour=0)  # 2026-07-01T00:00Z, the fire time's midnight


@pytest.fixture
def sessions(store: ClickHouseStore) -> Iterator[StoreSessions]:
    access = StoreSessions(store.url)
    yield access
    access.close()


def _seed(store: ClickHouseStore) -> dict[str, int]:
    """Hourly outcomes of surface `s` from 9 days before MIDNIGHT to 6 hours after it;
    how many fall in the last week and the last day before MIDNIGHT."""
    rows, counts = [], {"week": 0, "day": 0}
    for h in range(-9 * 24, 6):
        at = (MIDNIGHT + dt.timedelta(hours=h)).replace(tzinfo=None)
        for i in range(4):
            rows.append([f"e{h}-{i}", "correctness", (h + i) % 3 != 0, "s", "production",
                         "production-state", at + dt.timedelta(minutes=i)])  # fmt: skip
            counts["week"] += -7 * 24 <= h < 0
            counts["day"] += -24 <= h < 0
    store.insert(  # the events, so the surface is one the tenant has (processors.names)
        EVALUATION_EVENTS.qualified, [[r[0], "s", r[6]] for r in rows],
        EVALUATION_EVENTS.pick("event_id", "surface_id", "timestamp"),
    )  # fmt: skip
    store.insert(
        EVALUATION_DIMENSIONS.qualified, rows,
        EVALUATION_DIMENSIONS.pick("event_id", "dimension_id", "passed", "surface_id",
                                   "run_mode", "provenance", "timestamp"),
    )  # fmt: skip
    return counts


SCHEDULES = """\
schedules:
  - name: weekly-variance
    cron: "0 9 * * *"
    job: variance.decompose
    request:
      surfaceId: s
      dimensionId: correctness
      provenances: [any]
  - name: daily-report
    cron: "0 9 * * *"
    job: report
    request:
      surfaceId: s
      provenances: [any]
"""


async def test_variance_and_the_report_read_windows_relative_to_the_fire_time(
    store: ClickHouseStore, sessions: StoreSessions, tmp_path: Path
) -> None:
    counts = _seed(store)
    schedules = parse_schedule(SCHEDULES, "test.yaml", base=tmp_path)
    clock = FakeClock(T0 - dt.timedelta(minutes=1))
    runner = Scheduler(schedules, sessions, clock=clock, claimant="a", sleep=Sleeps())
    await runner.prepare()
    try:
        assert await runner.tick() == []
        clock.now = T0 + dt.timedelta(seconds=30)  # the 09:00 fire time
        assert len(await runner.tick()) == 2
        await runner.idle()
    finally:
        await runner.stop()

    [variance] = runs_of(store, "weekly-variance")
    assert variance["status"] == "ok", variance["error"]
    reading = json.loads(variance["report"])
    assert (reading["since"], reading["until"]) == ("2026-06-24T00:00:00Z", "2026-07-01T00:00:00Z")
    assert (reading["buckets"], reading["events"]) == (7 * 24, counts["week"])
    # Persisted: the reading evaluate and lifecycle take by its eventId.
    stored = load_reading(store, reading["eventId"])
    assert stored is not None and stored.events == counts["week"]

    [report] = runs_of(store, "daily-report")
    assert report["status"] == "ok", report["error"]
    document = json.loads(report["report"])
    assert (document["since"], document["until"]) == (
        "2026-06-30T00:00:00Z",
        "2026-07-01T00:00:00Z",
    )
    assert document["asOf"] == "2026-07-01T09:00:30Z"  # stream status judged at the run
    (surface,) = document["surfaces"]
    hours = surface["series"]["correctness"]
    assert len(hours) == 24 and sum(h["graded"] for h in hours) == counts["day"]


def test_a_given_window_is_kept_and_an_empty_one_refused() -> None:
    from processors.jobs import JobError
    from processors.variance.decompose import Request

    given = Request.model_validate(
        {"surfaceId": "s", "dimensionId": "d", "since": "2026-06-01", "until": "2026-06-02"}
    )
    assert given.analysis(T0).since == dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    by_day = Request.model_validate({"surfaceId": "s", "dimensionId": "d", "bucket": "day"})
    assert by_day.analysis(T0).since == MIDNIGHT - dt.timedelta(days=28)
    after_midnight = Request.model_validate(
        {"surfaceId": "s", "dimensionId": "d", "since": "2026-07-01T06:00:00Z"}
    )
    with pytest.raises(JobError, match="until must be after since"):
        after_midnight.analysis(T0)
