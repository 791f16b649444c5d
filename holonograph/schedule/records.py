"""The scheduler's rows in the store (migration 0011): the lease on a fire time and the
outcome of each run. Their one writer.

The lease rule (docs/schedules.md, "Two receivers, one store"): a receiver about to
run a schedule's fire time first looks for a claim on it (one exists: someone else has
it, however long ago), else inserts its own and reads the claims back; the claim with
the lowest `_block_number` (the store's insert order) holds it. Once a receiver has
read its own claim back, no claim it has not seen can come before it, so two receivers
that claimed at once agree which one runs, and the other does nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from schemas.jsoncodec import plain
from schemas.store import Store
from schemas.tables import SCHEDULE_CLAIMS, SCHEDULE_RUNS

# A stored report is for reading a run back, not a second copy of a job's results.
MAX_REPORT_CHARS = 256 * 1024

_KEY = (
    "tenant_id = {tenant:String} AND schedule = {schedule:String}"
    " AND fire_time = {fire:DateTime64(3, 'UTC')}"
)


def holder(store: Store, tenant: str, schedule: str, fire: dt.datetime) -> str | None:
    """The claimant that holds (tenant, schedule, fire), or None: not claimed yet."""
    rows = store.query(
        f"SELECT argMin(claimant, _block_number), count() FROM {SCHEDULE_CLAIMS.qualified}"
        f" WHERE {_KEY}",
        {"tenant": tenant, "schedule": schedule, "fire": fire},
    ).rows
    if not rows or not rows[0][1]:
        return None
    return str(rows[0][0])


def claim(
    store: Store, tenant: str, schedule: str, fire: dt.datetime, claimant: str, now: dt.datetime
) -> bool:
    """Whether `claimant` holds the fire time after claiming it (see the module)."""
    held = holder(store, tenant, schedule, fire)
    if held is None:
        store.insert(
            SCHEDULE_CLAIMS.qualified,
            [[tenant, schedule, fire, claimant, now]],
            SCHEDULE_CLAIMS.columns,
        )
        held = holder(store, tenant, schedule, fire)
    return held == claimant


def last_claimed(store: Store, tenant: str, schedule: str) -> dt.datetime | None:
    """The latest fire time anyone claimed for the schedule (None: never ran)."""
    rows = store.query(
        f"SELECT max(fire_time), count() FROM {SCHEDULE_CLAIMS.qualified}"
        " WHERE tenant_id = {tenant:String} AND schedule = {schedule:String}",
        {"tenant": tenant, "schedule": schedule},
    ).rows
    if not rows or not rows[0][1]:
        return None
    return _utc(rows[0][0])


@dataclass
class RunRecord:
    """One run of a schedule, as stored (`version` orders its states)."""

    tenant: str
    schedule: str
    fire_time: dt.datetime
    job: str
    run_id: str
    claimant: str
    started_at: dt.datetime
    finished_at: dt.datetime
    status: str  # ok | finding | failed
    finding: bool
    error: str = ""
    delivery: str = "none"  # none | pending | delivered | failed
    delivery_attempts: int = 0
    delivery_error: str = ""
    report: Any = None
    version: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "job": self.job,
            "fireTime": self.fire_time,
            "runId": self.run_id,
            "status": self.status,
            "finding": self.finding,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "error": self.error or None,
            "delivery": self.delivery,
            "deliveryAttempts": self.delivery_attempts,
            "deliveryError": self.delivery_error or None,
        }


def write_run(store: Store, run: RunRecord) -> None:
    report = "" if run.report is None else json.dumps(plain(run.report), separators=(",", ":"))
    if len(report) > MAX_REPORT_CHARS:
        report = json.dumps({"truncated": True, "chars": len(report)})
    store.insert(
        SCHEDULE_RUNS.qualified,
        [
            [
                run.tenant,
                run.schedule,
                run.fire_time,
                run.job,
                run.run_id,
                run.claimant,
                run.started_at,
                run.finished_at,
                run.status,
                run.finding,
                run.error,
                run.delivery,
                run.delivery_attempts,
                run.delivery_error,
                report,
                run.version,
            ]
        ],
        SCHEDULE_RUNS.columns,
    )


@dataclass(frozen=True)
class History:
    """What `/readyz` shows of a schedule after a restart: read from its runs."""

    last_run: dict[str, Any] | None
    last_success: dt.datetime | None
    last_finding: dt.datetime | None


def history(store: Store, schedule: str) -> History:
    """The schedule's last run, last successful run (ok or finding) and last finding,
    whichever tenant it ran for (the store's only one when the file names none)."""
    runs = f"(SELECT * FROM {SCHEDULE_RUNS.qualified} FINAL WHERE schedule = {{schedule:String}})"
    rows = store.query(
        "SELECT fire_time, status, finding, finished_at, run_id, job, error, delivery,"
        " delivery_attempts, delivery_error, started_at"
        f" FROM {runs} ORDER BY fire_time DESC LIMIT 1",
        {"schedule": schedule},
    ).rows
    marks = store.query(
        "SELECT maxIf(fire_time, status != 'failed'), countIf(status != 'failed'),"
        f" maxIf(fire_time, finding), countIf(finding) FROM {runs}",
        {"schedule": schedule},
    ).rows
    last = None
    if rows:
        fire, status, finding, finished, run_id, job, error, delivery, attempts, derr, started = (
            rows[0]
        )
        last = RunRecord(
            "", schedule, _utc(fire), job, run_id, "", _utc(started), _utc(finished),
            status, bool(finding), error, delivery, attempts, derr,
        ).to_json()  # fmt: skip
    success = finding_at = None
    if marks:
        ok_at, ok_n, found_at, found_n = marks[0]
        success = _utc(ok_at) if ok_n else None
        finding_at = _utc(found_at) if found_n else None
    return History(last, success, finding_at)


def runs_of(store: Store, schedule: str) -> list[dict[str, Any]]:
    """Every run of the schedule, latest state each, oldest first (tests, operators)."""
    return store.query(
        f"SELECT * FROM {SCHEDULE_RUNS.qualified} FINAL"
        " WHERE schedule = {schedule:String} ORDER BY fire_time",
        {"schedule": schedule},
    ).dicts()


def _utc(value: Any) -> dt.datetime:
    assert isinstance(value, dt.datetime)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
