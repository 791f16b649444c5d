"""The scheduler `serve --schedule` runs beside the receiver (an
`ingest.service.background.Background`): at each schedule's fire time (cron, UTC) it
claims the fire time in the store, runs the job through `holonograph.runner` (the CLI's
and the HTTP API's code path), records the run, and delivers a finding to the
schedule's webhooks and as the `holonograph_schedule_finding` gauge.

- **Clock.** Everything reads the injected clock; `tick()` starts what is due at its
  time, so a test drives the scheduler by setting the clock and calling `tick()`.
- **Missed runs.** A schedule whose fire times passed while no receiver ran (downtime,
  or a run longer than its period) runs once, for the latest of them, not once each.
  A schedule that never ran waits for its next fire time.
- **Once across receivers.** Each fire time is claimed first (`records.claim`): of
  several receivers sharing a store, exactly one runs it.
- A run that fails (the store, a refused request) is recorded as `failed` and makes
  `/readyz` degraded until the schedule's next run succeeds; it is not retried before
  its next fire time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge

from holonograph.runner import execute, scope
from holonograph.schedule import records
from holonograph.schedule.config import Schedule, ScheduleSet
from holonograph.schedule.records import RunRecord
from holonograph.schedule.webhooks import Sleep, body_of, deliver
from ingest.service.periodic import describe
from ingest.store.limits import LimitRequest
from processors.jobs import JobError
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.times import Clock, rfc3339, utc_now

log = logging.getLogger(__name__)

# Fire times between a schedule's last claim and now that are counted (and skipped).
_COUNT_MISSED = 10_000
# The loop re-reads the clock at least this often while it waits (a suspended host, a
# clock step): a fire time is never slept through by more than this.
_WAKE_SECONDS = 30.0


class Sessions(Protocol):
    """The store the scheduler runs on: the runner's `StoreAccess`."""

    def reading(
        self, tenant: str | None, limits: LimitRequest | None = None
    ) -> AbstractContextManager[Store]: ...

    def writing(self) -> AbstractContextManager[Store]: ...


@dataclass
class ScheduleState:
    """What `/readyz` shows of one schedule."""

    handled: dt.datetime | None = None  # the latest fire time claimed or given up
    last_run: dict[str, Any] | None = None
    last_success: dt.datetime | None = None
    last_finding: dt.datetime | None = None
    problem: str = ""
    running: asyncio.Task[None] | None = field(default=None, repr=False)


def claimant_id() -> str:
    """This receiver among those sharing a store: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Scheduler:
    name = "schedules"

    def __init__(
        self,
        schedules: ScheduleSet,
        stores: Sessions,
        *,
        clock: Clock = utc_now,
        claimant: str | None = None,
        sleep: Sleep = asyncio.sleep,
        wall: Callable[[], float] = time.time,
        max_parallel_runs: int = 2,
    ) -> None:
        """`sleep`: the webhooks' backoff waits (and the loop's); `wall`: the clock the
        webhook signatures' timestamps read."""
        self.schedules = schedules
        self._stores = stores
        self._clock = clock
        self.claimant = claimant or claimant_id()
        self._sleep = sleep
        self._wall = wall
        self.state = {s.name: ScheduleState() for s in schedules.schedules}
        self._runs = concurrent.futures.ThreadPoolExecutor(max_parallel_runs, "schedule-run")
        self._records = concurrent.futures.ThreadPoolExecutor(1, "schedule-records")
        self._loop: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._metrics: _Metrics | None = None

    # --- the Background protocol (ingest.service.background)

    async def start(self, registry: CollectorRegistry) -> None:
        await self.prepare(registry)
        self._loop = asyncio.create_task(self._every_fire(), name="schedules")

    async def stop(self) -> None:
        tasks = [self._loop] if self._loop is not None else []
        tasks += [s.running for s in self.state.values() if s.running is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loop = None
        if self._http is not None:
            await self._http.close()
            self._http = None
        self._runs.shutdown(wait=False, cancel_futures=True)
        self._records.shutdown(wait=False, cancel_futures=True)

    def status(self) -> dict[str, Any]:
        """Per schedule: its job, cron, next fire time, last run, success and finding.
        No job's or webhook's message: `/readyz` is served without a token on the
        metrics port, and a message may name a tenant (they are in the log and the
        runs table)."""
        now = self._clock()
        out: dict[str, Any] = {}
        for schedule in self.schedules.schedules:
            state = self.state[schedule.name]
            out[schedule.name] = {
                "job": schedule.job.name,
                "cron": schedule.cron,
                "nextFire": rfc3339(schedule.next_fire(now)),
                "lastRun": _plain(state.last_run),
                "lastSuccess": _time(state.last_success),
                "lastFinding": _time(state.last_finding),
            }
        return out

    def degraded(self) -> str | None:
        problems = [
            f"schedule {name}: {state.problem}"
            for name, state in self.state.items()
            if state.problem
        ]
        return "; ".join(problems) or None

    # --- driving it

    async def prepare(self, registry: CollectorRegistry | None = None) -> None:
        """Metrics, the webhook client, and each schedule's history from the store."""
        self._metrics = _Metrics(registry or CollectorRegistry(), self.schedules)
        self._http = aiohttp.ClientSession()
        now = self._clock()
        for schedule in self.schedules.schedules:
            state = self.state[schedule.name]
            last = await self._on_records(records.last_claimed, _key(schedule), schedule.name)
            # Never ran: wait for the next fire time; else run what was missed, once.
            state.handled = last if last is not None else schedule.latest_fire(now)
            past = await self._on_records(records.history, schedule.name)
            state.last_run = past.last_run
            state.last_success, state.last_finding = past.last_success, past.last_finding
            self._metrics.restore(schedule, state)

    async def tick(self) -> list[asyncio.Task[None]]:
        """Start every schedule whose latest fire time has not been handled yet (one
        run each, however many fire times passed) and is not still running."""
        now = self._clock()
        started = []
        for schedule in self.schedules.schedules:
            state = self.state[schedule.name]
            if state.running is not None and not state.running.done():
                continue  # its fire times are handled, once, when it is done
            due = schedule.latest_fire(now)
            if state.handled is not None and due <= state.handled:
                continue
            missed = _missed(schedule, state.handled, due)
            if missed:
                log.warning(
                    "schedule %s: %d fire time(s) before %s were missed; running once for %s",
                    schedule.name,
                    missed,
                    rfc3339(due),
                    rfc3339(due),
                )
            state.handled = due
            state.running = asyncio.create_task(
                self._run(schedule, due), name=f"schedule-{schedule.name}"
            )
            started.append(state.running)
        return started

    async def idle(self) -> None:
        """Until every started run is done (tests; `stop` cancels instead)."""
        running = [s.running for s in self.state.values() if s.running is not None]
        await asyncio.gather(*running)

    async def _every_fire(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # a bug here must not end every schedule for good
                log.exception("schedules: tick failed")
            now = self._clock()
            wake = min(s.next_fire(now) for s in self.schedules.schedules)
            while (left := (wake - self._clock()).total_seconds()) > 0:
                await self._sleep(min(left, _WAKE_SECONDS))

    # --- one run

    async def _run(self, schedule: Schedule, fire: dt.datetime) -> None:
        try:
            await self._claimed_run(schedule, fire)
        except Exception:  # a bug: recorded like a failed run, never lost silently
            log.exception("schedule %s: run of %s failed", schedule.name, rfc3339(fire))
            self.state[schedule.name].problem = f"run of {rfc3339(fire)} failed"

    async def _claimed_run(self, schedule: Schedule, fire: dt.datetime) -> None:
        assert self._metrics is not None
        state = self.state[schedule.name]
        try:
            mine = await self._on_records(
                records.claim, _key(schedule), schedule.name, fire, self.claimant, self._clock()
            )
        except Exception as err:
            state.problem = f"cannot claim {rfc3339(fire)} in the store"
            log.warning("schedule %s: %s: %s", schedule.name, state.problem, describe(err))
            self._metrics.ran(schedule, "failed")
            return
        if not mine:
            log.info("schedule %s: %s is another receiver's", schedule.name, rfc3339(fire))
            self._metrics.ran(schedule, "elsewhere")
            return
        run = await self._execute(schedule, fire)
        await self._save(schedule, run)
        if run.finding and schedule.webhooks:
            await self._deliver(schedule, run)
            run.version += 1
            await self._save(schedule, run)
        self._finished(schedule, run)

    async def _execute(self, schedule: Schedule, fire: dt.datetime) -> RunRecord:
        started = self._clock()
        tenant: str | None = schedule.tenant
        status, found, error, document = "failed", False, "", None
        loop = asyncio.get_running_loop()
        try:
            tenant, report = await loop.run_in_executor(self._runs, self._job, schedule)
            found = bool(schedule.job.finding(report))
            status = "finding" if found else "ok"
            document = report.to_json()
        except JobError as err:
            error = f"{err}" + (f" ({err.hint})" if err.hint else "")
        except Exception as err:
            log.debug("schedule %s failed", schedule.name, exc_info=err)
            error = describe(err)
        return RunRecord(
            tenant or DEFAULT_TENANT,
            schedule.name,
            fire,
            schedule.job.name,
            secrets.token_hex(16),
            self.claimant,
            started,
            self._clock(),
            status,
            found,
            error,
            "pending" if found and schedule.webhooks else "none",
            report=document,
        )

    def _job(self, schedule: Schedule) -> tuple[str | None, Any]:
        """On a run thread: the runner, exactly as the CLI and the HTTP API call it."""
        request = scope(schedule.job, schedule.request, self._stores)
        return request.tenant, execute(schedule.job, request, self._stores, self._clock)

    async def _deliver(self, schedule: Schedule, run: RunRecord) -> None:
        assert self._http is not None and self._metrics is not None
        payload = {
            "schedule": schedule.name,
            "job": schedule.job.name,
            "tenant": run.tenant,
            "labels": dict(schedule.labels),
            "fireTime": run.fire_time,
            "runId": run.run_id,
            "status": run.status,
            "startedAt": run.started_at,
            "finishedAt": run.finished_at,
            "report": run.report,
        }
        body = body_of(payload)
        outcomes = await asyncio.gather(
            *(
                deliver(self._http, hook, run.run_id, body, sleep=self._sleep, wall=self._wall)
                for hook in schedule.webhooks
            )
        )
        failed = [o for o in outcomes if not o.delivered]
        for outcome in outcomes:
            self._metrics.delivered(schedule, outcome.webhook, outcome.delivered)
        run.delivery = "failed" if failed else "delivered"
        run.delivery_attempts = sum(o.attempts for o in outcomes)
        run.delivery_error = "; ".join(f"{o.webhook}: {o.error}" for o in failed)
        if failed:
            log.warning(
                "schedule %s: finding of %s not delivered: %s",
                schedule.name,
                rfc3339(run.fire_time),
                run.delivery_error,
            )

    async def _save(self, schedule: Schedule, run: RunRecord) -> None:
        try:
            await self._on_records(records.write_run, run)
        except Exception as err:
            self.state[schedule.name].problem = f"run of {rfc3339(run.fire_time)} not recorded"
            log.warning(
                "schedule %s: %s: %s",
                schedule.name,
                self.state[schedule.name].problem,
                describe(err),
            )

    def _finished(self, schedule: Schedule, run: RunRecord) -> None:
        assert self._metrics is not None
        state = self.state[schedule.name]
        state.last_run = run.to_json()
        problem = ""
        if run.status == "failed":
            problem = f"run of {rfc3339(run.fire_time)} failed"
            log.warning("schedule %s: %s: %s", schedule.name, problem, run.error)
        else:
            state.last_success = run.fire_time
        if run.finding:
            state.last_finding = run.fire_time
        if run.delivery == "failed":
            problem = f"finding of {rfc3339(run.fire_time)} not delivered"
        state.problem = problem
        self._metrics.finished(schedule, run)

    async def _on_records(self, work: Callable[..., Any], *args: Any) -> Any:
        def call() -> Any:
            with self._stores.writing() as store:
                return work(store, *args)

        return await asyncio.get_running_loop().run_in_executor(self._records, call)


class _Metrics:
    """The schedules' metrics; label values come from the file, never from data."""

    def __init__(self, registry: CollectorRegistry, schedules: ScheduleSet) -> None:
        self._extra = schedules.label_names()
        self.finding = Gauge(
            "holonograph_schedule_finding",
            "1 while a schedule's latest run found something (its job's exit 1); labels"
            " from the schedule file, for Alertmanager to route.",
            ["schedule", "job", *self._extra],
            registry=registry,
        )
        self.last_run = Gauge(
            "holonograph_schedule_last_run_timestamp_seconds",
            "Fire time of a schedule's latest run.",
            ["schedule"],
            registry=registry,
        )
        self.last_success = Gauge(
            "holonograph_schedule_last_success_timestamp_seconds",
            "Fire time of a schedule's latest run that completed (ok or finding).",
            ["schedule"],
            registry=registry,
        )
        self.last_finding = Gauge(
            "holonograph_schedule_last_finding_timestamp_seconds",
            "Fire time of a schedule's latest finding.",
            ["schedule"],
            registry=registry,
        )
        self.runs = Counter(
            "holonograph_schedule_runs",
            "Fire times handled, by outcome: ok, finding, failed, or elsewhere (another"
            " receiver sharing the store ran it).",
            ["schedule", "status"],
            registry=registry,
        )
        self.delivery_failing = Gauge(
            "holonograph_schedule_webhook_failing",
            "1 while a schedule's latest finding could not be delivered to a webhook.",
            ["schedule", "webhook"],
            registry=registry,
        )
        self.delivery_failures = Counter(
            "holonograph_schedule_webhook_failures",
            "Findings not delivered to a webhook after every attempt.",
            ["schedule", "webhook"],
            registry=registry,
        )
        for schedule in schedules.schedules:
            self._finding(schedule).set(0)
            for hook in schedule.webhooks:
                self.delivery_failing.labels(schedule.name, hook.name).set(0)

    def _finding(self, schedule: Schedule) -> Any:
        extra = [schedule.labels.get(name, "") for name in self._extra]
        return self.finding.labels(schedule.name, schedule.job.name, *extra)

    def restore(self, schedule: Schedule, state: ScheduleState) -> None:
        if state.last_run is not None:
            fire = state.last_run["fireTime"]
            self.last_run.labels(schedule.name).set(fire.timestamp())
            self._finding(schedule).set(1 if state.last_run["finding"] else 0)
        if state.last_success is not None:
            self.last_success.labels(schedule.name).set(state.last_success.timestamp())
        if state.last_finding is not None:
            self.last_finding.labels(schedule.name).set(state.last_finding.timestamp())

    def ran(self, schedule: Schedule, status: str) -> None:
        self.runs.labels(schedule.name, status).inc()

    def finished(self, schedule: Schedule, run: RunRecord) -> None:
        self.ran(schedule, run.status)
        self.last_run.labels(schedule.name).set(run.fire_time.timestamp())
        if run.status != "failed":
            self.last_success.labels(schedule.name).set(run.fire_time.timestamp())
            self._finding(schedule).set(1 if run.finding else 0)
        if run.finding:
            self.last_finding.labels(schedule.name).set(run.fire_time.timestamp())

    def delivered(self, schedule: Schedule, webhook: str, ok: bool) -> None:
        self.delivery_failing.labels(schedule.name, webhook).set(0 if ok else 1)
        if not ok:
            self.delivery_failures.labels(schedule.name, webhook).inc()


def _key(schedule: Schedule) -> str:
    """The tenant a schedule's claims are filed under (the file's, else the default)."""
    return schedule.tenant or DEFAULT_TENANT


def _missed(schedule: Schedule, handled: dt.datetime | None, due: dt.datetime) -> int:
    """Fire times after `handled` and before `due` (counted up to a bound)."""
    if handled is None:
        return 0
    count, fire = 0, schedule.next_fire(handled)
    while fire < due and count < _COUNT_MISSED:
        count, fire = count + 1, schedule.next_fire(fire)
    return count


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else rfc3339(value)


def _plain(run: dict[str, Any] | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        k: rfc3339(v) if isinstance(v, dt.datetime) else v
        for k, v in run.items()
        if k not in ("error", "deliveryError")
    }
