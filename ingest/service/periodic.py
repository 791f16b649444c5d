"""Jobs a long-running service runs over the store it owns (e.g. the stream status
refresh): one loop for `serve` and `sink`.

A failing run logs one line (again only when the reason changes, not a traceback every
period), is retried next period, and leaves the service *degraded*: `/readyz` still
answers 200 (ingest works, a probe must not take the receiver out of rotation for a
stale report) but says `degraded` with the job, since when and why, until a run
succeeds again, which is logged too.

Jobs run on threads of their own (one per job, as each job's runs follow one
another), never the commit path's or the admin endpoint's: a long job delays
neither ingest nor a query, and a burst of queries never delays a job.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from schemas.store import Store
from schemas.times import Clock, rfc3339

log = logging.getLogger(__name__)

PeriodicJob = Callable[[Store, dt.datetime], object]

_MAX_REASON = 300


@dataclass
class Periodic:
    """A job the CLI wiring schedules while the service runs (e.g. stream status)."""

    name: str
    every_seconds: float
    run: PeriodicJob


@dataclass
class JobHealth:
    """How a job's recent runs went; `failures` counts the current run of failures."""

    failures: int = 0
    failing_since: dt.datetime | None = None
    reason: str = ""
    last_success: dt.datetime | None = None


def describe(err: BaseException) -> str:
    """`StoreDown: store is down`: the type and the first line, bounded."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


class PeriodicJobs:
    """Runs each job every `every_seconds` on a worker thread, tracking its health."""

    def __init__(
        self, jobs: Sequence[Periodic], clock: Clock, registry: CollectorRegistry | None = None
    ) -> None:
        self._jobs = list(jobs)
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max(1, len(self._jobs)), "periodic-job"
        )
        self.health = {job.name: JobHealth() for job in self._jobs}
        registry = registry or CollectorRegistry()
        self._failing = Gauge(
            "holonograph_periodic_job_failing",
            "1 while a periodic job's latest run failed.",
            ["job"],
            registry=registry,
        )
        self._failed = Counter(
            "holonograph_periodic_job_failures",
            "Failed runs of periodic jobs.",
            ["job"],
            registry=registry,
        )

    def start(self, store: Store) -> None:
        self._tasks = [
            asyncio.create_task(self._every(job, store), name=job.name) for job in self._jobs
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._threads.shutdown(wait=False)

    def degraded(self) -> str | None:
        """Why the service is degraded (every failing job), or None."""
        problems = [
            f"periodic job {name} failing since {rfc3339(h.failing_since)}"
            f" ({h.failures} run(s)): {h.reason}"
            for name, h in self.health.items()
            if h.failing_since is not None
        ]
        return "; ".join(problems) or None

    async def run_once(self, job: Periodic, store: Store) -> None:
        """One run of `job`, its outcome recorded; never raises for a failing job."""
        try:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._threads, job.run, store, self._clock())
        except Exception as err:
            log.debug("periodic job %s failed", job.name, exc_info=err)  # the trace, with -v
            self._record_failure(job, describe(err))
        else:
            self._record_success(job)

    async def _every(self, job: Periodic, store: Store) -> None:
        while True:
            await self.run_once(job, store)
            await asyncio.sleep(job.every_seconds)

    def _record_failure(self, job: Periodic, reason: str) -> None:
        health = self.health[job.name]
        if health.failing_since is None or reason != health.reason:
            log.warning(
                "periodic job %s failed (retrying every %gs; /readyz says degraded): %s",
                job.name,
                job.every_seconds,
                reason,
            )
        if health.failing_since is None:
            health.failing_since = self._clock()
        health.failures += 1
        health.reason = reason
        self._failing.labels(job=job.name).set(1)
        self._failed.labels(job=job.name).inc()

    def _record_success(self, job: Periodic) -> None:
        health = self.health[job.name]
        if health.failing_since is not None:
            log.warning(
                "periodic job %s recovered after %d failed run(s)", job.name, health.failures
            )
        health.failures, health.failing_since, health.reason = 0, None, ""
        health.last_success = self._clock()
        self._failing.labels(job=job.name).set(0)
