"""Scheduled runs on a fake clock: fire, persist, deliver signed with retry, once across
receivers sharing one store, missed runs once (docs/schedules.md)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from holonograph.schedule.config import ScheduleSet, parse_schedule
from holonograph.schedule.records import runs_of
from holonograph.schedule.scheduler import Scheduler
from holonograph.schedule.webhooks import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify,
)
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.reader import StoreSessions
from tests.holonograph.schedule.helpers import (
    SECRET,
    T0,
    FakeClock,
    Sleeps,
    WebhookServer,
    schedule_text,
    secret_file,
    seed_a_gap,
)

pytestmark = pytest.mark.clickhouse

WALL = 1_800_000_000.0


@pytest.fixture
async def hook() -> AsyncIterator[WebhookServer]:
    server = await WebhookServer().start()
    yield server
    await server.stop()


@pytest.fixture
def sessions(store: ClickHouseStore) -> Iterator[list[StoreSessions]]:
    opened: list[StoreSessions] = []
    yield opened
    for s in opened:
        s.close()


def schedules_for(tmp_path: Path, url: str, **kwargs: object) -> ScheduleSet:
    secret_file(tmp_path)
    return parse_schedule(schedule_text(url, **kwargs), "test.yaml", base=tmp_path)  # type: ignore[arg-type]


def scheduler(
    store: ClickHouseStore,
    opened: list[StoreSessions],
    schedules: ScheduleSet,
    clock: FakeClock,
    sleeps: Sleeps,
    name: str,
) -> Scheduler:
    access = StoreSessions(store.url)
    opened.append(access)
    return Scheduler(schedules, access, clock=clock, claimant=name, sleep=sleeps, wall=lambda: WALL)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_a_schedule_fires_persists_and_delivers_a_signed_finding_with_retry(
    store: ClickHouseStore, sessions: list[StoreSessions], hook: WebhookServer, tmp_path: Path
) -> None:
    seed_a_gap(store)
    hook.answers = [500, 200]
    clock, sleeps, registry = FakeClock(T0 + dt.timedelta(minutes=2)), Sleeps(), CollectorRegistry()
    runner = scheduler(store, sessions, schedules_for(tmp_path, hook.url), clock, sleeps, "a")
    await runner.prepare(registry)
    try:
        assert await runner.tick() == []  # a schedule that never ran waits for its next fire
        clock.now = T0 + dt.timedelta(minutes=5)
        assert len(await runner.tick()) == 1
        await runner.idle()
        assert await runner.tick() == []  # that fire time is done

        # Delivered on the second attempt, after one backoff wait, signed each time.
        assert len(hook.received) == 2 and sleeps.asked == [1.0]
        first, second = hook.received
        assert first.headers[DELIVERY_HEADER] == second.headers[DELIVERY_HEADER]
        for attempt in hook.received:
            assert verify(
                SECRET,
                attempt.body,
                attempt.headers[TIMESTAMP_HEADER],
                attempt.headers[SIGNATURE_HEADER],
                now=WALL,
            )
            assert not verify(
                b"another-secret-0123456789",
                attempt.body,
                attempt.headers[TIMESTAMP_HEADER],
                attempt.headers[SIGNATURE_HEADER],
                now=WALL,
            )
        payload = second.json()
        assert payload["schedule"] == "loss-check" and payload["job"] == "completeness"
        assert payload["status"] == "finding" and payload["fireTime"] == "2026-07-01T09:05:00Z"
        assert payload["labels"] == {"team": "data", "severity": "page"}
        assert [s["stream"] for s in payload["report"]["streams"]] == ["a"]
        assert payload["report"]["streams"][0]["missing"] == 1

        # Persisted with its status and the delivery's outcome.
        [run] = runs_of(store, "loss-check")
        assert (run["status"], run["finding"], run["delivery"], run["delivery_attempts"]) == (
            "finding", True, "delivered", 2,
        )  # fmt: skip
        assert run["fire_time"].replace(tzinfo=dt.UTC) == T0 + dt.timedelta(minutes=5)
        assert run["run_id"] == second.headers[DELIVERY_HEADER]

        # /readyz's part and the metrics Alertmanager routes on (labels from the file).
        status = runner.status()["loss-check"]
        assert status["lastRun"]["fireTime"] == "2026-07-01T09:05:00Z"
        assert status["lastRun"]["status"] == "finding"
        assert status["lastSuccess"] == status["lastFinding"] == "2026-07-01T09:05:00Z"
        assert status["nextFire"] == "2026-07-01T09:10:00Z"
        assert runner.degraded() is None
        finding = sample(
            registry,
            "holonograph_schedule_finding",
            schedule="loss-check",
            job="completeness",
            team="data",
            severity="page",
        )
        assert finding == 1
        fire = (T0 + dt.timedelta(minutes=5)).timestamp()
        last_run = "holonograph_schedule_last_run_timestamp_seconds"
        assert sample(registry, last_run, schedule="loss-check") == fire
        runs = "holonograph_schedule_runs_total"
        assert sample(registry, runs, schedule="loss-check", status="finding") == 1
        failing = "holonograph_schedule_webhook_failing"
        assert sample(registry, failing, schedule="loss-check", webhook="ops") == 0
    finally:
        await runner.stop()


async def test_two_receivers_sharing_one_store_run_each_fire_time_once(
    store: ClickHouseStore, sessions: list[StoreSessions], hook: WebhookServer, tmp_path: Path
) -> None:
    seed_a_gap(store)
    schedules = schedules_for(tmp_path, hook.url)
    clock = FakeClock(T0 + dt.timedelta(minutes=1))
    registries = [CollectorRegistry(), CollectorRegistry()]
    pair = [
        scheduler(store, sessions, schedules, clock, Sleeps(), name) for name in ("east", "west")
    ]
    for runner, registry in zip(pair, registries, strict=True):
        await runner.prepare(registry)
    try:
        for minutes in (5, 10):
            clock.now = T0 + dt.timedelta(minutes=minutes)
            started = await asyncio.gather(*(runner.tick() for runner in pair))
            assert [len(tasks) for tasks in started] == [1, 1]  # both try
            await asyncio.gather(*(runner.idle() for runner in pair))
        runs = runs_of(store, "loss-check")
        assert [r["fire_time"].replace(tzinfo=dt.UTC) for r in runs] == [
            T0 + dt.timedelta(minutes=5),
            T0 + dt.timedelta(minutes=10),
        ]
        assert len(hook.received) == 2  # one delivery per fire time
        assert len({r.headers[DELIVERY_HEADER] for r in hook.received}) == 2
        counts = {
            (runner.claimant, status): sample(
                registry, "holonograph_schedule_runs_total", schedule="loss-check", status=status
            )
            or 0
            for runner, registry in zip(pair, registries, strict=True)
            for status in ("finding", "elsewhere")
        }
        assert counts[("east", "finding")] + counts[("west", "finding")] == 2
        assert counts[("east", "elsewhere")] + counts[("west", "elsewhere")] == 2
        assert {r["claimant"] for r in runs} <= {"east", "west"}
    finally:
        for runner in pair:
            await runner.stop()


async def test_missed_runs_after_downtime_run_once_not_in_a_burst(
    store: ClickHouseStore, sessions: list[StoreSessions], hook: WebhookServer, tmp_path: Path
) -> None:
    seed_a_gap(store)
    schedules = schedules_for(tmp_path, hook.url)
    clock = FakeClock(T0 + dt.timedelta(minutes=4))
    before = scheduler(store, sessions, schedules, clock, Sleeps(), "before")
    await before.prepare()
    clock.now = T0 + dt.timedelta(minutes=5)
    await before.tick()
    await before.idle()
    await before.stop()

    # Down from 09:05 to 10:03: eleven fire times passed. Restarted, it runs once.
    clock.now = T0 + dt.timedelta(hours=1, minutes=3)
    after = scheduler(store, sessions, schedules, clock, Sleeps(), "after")
    await after.prepare()
    try:
        assert after.status()["loss-check"]["lastRun"]["fireTime"] == "2026-07-01T09:05:00Z"
        assert len(await after.tick()) == 1
        await after.idle()
        assert await after.tick() == []
        fires = [r["fire_time"].replace(tzinfo=dt.UTC) for r in runs_of(store, "loss-check")]
        assert fires == [T0 + dt.timedelta(minutes=5), T0 + dt.timedelta(hours=1)]
        assert after.status()["loss-check"]["lastRun"]["fireTime"] == "2026-07-01T10:00:00Z"
    finally:
        await after.stop()


async def test_a_finding_not_delivered_is_visible_in_the_run_metrics_and_readyz(
    store: ClickHouseStore,
    sessions: list[StoreSessions],
    hook: WebhookServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    seed_a_gap(store)
    hook.answers = [503, 503, 503]
    clock, sleeps, registry = FakeClock(T0 + dt.timedelta(minutes=4)), Sleeps(), CollectorRegistry()
    runner = scheduler(
        store, sessions, schedules_for(tmp_path, hook.url, attempts=3), clock, sleeps, "a"
    )
    await runner.prepare(registry)
    try:
        clock.now = T0 + dt.timedelta(minutes=5)
        await runner.tick()
        await runner.idle()
        assert len(hook.received) == 3 and sleeps.asked == [1.0, 2.0]  # bounded, doubling
        [run] = runs_of(store, "loss-check")
        assert (run["status"], run["delivery"], run["delivery_attempts"]) == (
            "finding",
            "failed",
            3,
        )
        assert run["delivery_error"] == "ops: HTTP 503"
        failing = "holonograph_schedule_webhook_failing"
        assert sample(registry, failing, schedule="loss-check", webhook="ops") == 1
        failures = "holonograph_schedule_webhook_failures_total"
        assert sample(registry, failures, schedule="loss-check", webhook="ops") == 1
        assert "not delivered" in (runner.degraded() or "")
        assert runner.status()["loss-check"]["lastRun"]["delivery"] == "failed"
        assert "finding of 2026-07-01T09:05:00Z not delivered: ops: HTTP 503" in caplog.text
        assert SECRET.decode() not in caplog.text
        assert hook.received[0].headers[SIGNATURE_HEADER] not in caplog.text

        # A 4xx is the webhook's refusal: permanent, not retried.
        hook.answers = [403]
        clock.now = T0 + dt.timedelta(minutes=10)
        await runner.tick()
        await runner.idle()
        assert len(hook.received) == 4
        latest = runs_of(store, "loss-check")[-1]
        assert (latest["delivery"], latest["delivery_attempts"]) == ("failed", 1)
        assert "permanent" in latest["delivery_error"]
    finally:
        await runner.stop()


async def test_a_run_that_fails_is_recorded_failed_and_degrades_until_one_succeeds(
    store: ClickHouseStore, sessions: list[StoreSessions], hook: WebhookServer, tmp_path: Path
) -> None:
    secret_file(tmp_path)
    text = schedule_text(hook.url).replace("bucket: hour", "since: 2026-07-01T00:00:00Z")
    schedules = parse_schedule(text, "test.yaml", base=tmp_path)
    clock = FakeClock(T0 + dt.timedelta(minutes=4))
    runner = scheduler(store, sessions, schedules, clock, Sleeps(), "a")
    await runner.prepare()
    try:
        store.command("RENAME TABLE holonograph.emission_receipts TO holonograph.gone")
        clock.now = T0 + dt.timedelta(minutes=5)
        await runner.tick()
        await runner.idle()
        [run] = runs_of(store, "loss-check")
        assert run["status"] == "failed" and run["error"]
        assert "run of 2026-07-01T09:05:00Z failed" in (runner.degraded() or "")
        assert run["error"] not in (runner.degraded() or "")  # /readyz: when, not why
        assert "error" not in runner.status()["loss-check"]["lastRun"]
        assert hook.received == []
        store.command("RENAME TABLE holonograph.gone TO holonograph.emission_receipts")
        clock.now = T0 + dt.timedelta(minutes=10)
        await runner.tick()
        await runner.idle()
        assert runs_of(store, "loss-check")[-1]["status"] == "ok"
        assert runner.degraded() is None
    finally:
        await runner.stop()


async def test_started_it_waits_on_the_clock_and_fires_by_itself(
    store: ClickHouseStore, sessions: list[StoreSessions], hook: WebhookServer, tmp_path: Path
) -> None:
    seed_a_gap(store)
    clock = FakeClock(T0 + dt.timedelta(minutes=4, seconds=30))
    asked: list[float] = []
    parked = asyncio.Event()
    runner: Scheduler

    async def advancing(seconds: float) -> None:
        """The loop's wait: the fake clock moves on by what it asks, at once."""
        asked.append(seconds)
        clock.now += dt.timedelta(seconds=seconds)
        if clock.now > T0 + dt.timedelta(minutes=5):
            await runner.idle()
            parked.set()
            await asyncio.Event().wait()  # until stop() cancels the loop

    access = StoreSessions(store.url)
    sessions.append(access)
    runner = Scheduler(
        schedules_for(tmp_path, hook.url), access, clock=clock, claimant="solo", sleep=advancing
    )
    await runner.start(CollectorRegistry())
    try:
        await asyncio.wait_for(parked.wait(), 60)
        assert asked == [30.0, 30.0]  # up to 09:05, then re-reading the clock every 30 s
        [run] = runs_of(store, "loss-check")
        assert run["fire_time"].replace(tzinfo=dt.UTC) == T0 + dt.timedelta(minutes=5)
        assert len(hook.received) == 1
    finally:
        await runner.stop()
