"""The read limits of every job's queries, in one place (`ingest.store.limits`).

A job's queries run on a read-only connection carrying its limits: time, memory,
rows read, rows returned. The defaults are per job, here; the CLI's job commands
take `--max-rows-to-read` and the others (so a config file's `drift:` section or
`HOLONOGRAPH_DRIFT_MAX_ROWS_TO_READ` overrides one job's), and through `serve` or
`sink` the owner's `--read-*` limits are the ceiling (never raised by a job).

A query stopped at a limit is `JobOverLimit`: the job, the limit and its value, and
what to do, in one sentence ("drift: the query read more than 1,000 rows
(max_rows_to_read); narrow the window or raise --max-rows-to-read"). The CLI exits 2
with it, the HTTP API answers 422 `read_limit_exceeded`: the request's to change,
never retried as it is, and the store goes on serving everyone else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ingest.store.limits import FLAGS, GIB, LimitRequest, ReadLimitExceeded, ReadLimits

# An analysis over a window: the whole window's events and dimensions, aggregated in
# the store (a 90-day window of 20M dimension rows reads ~20M rows, uses < 1 GiB).
ANALYSIS = ReadLimits(
    max_execution_time=300.0,
    max_memory_usage=1 * GIB,
    max_rows_to_read=2_000_000_000,
    max_result_rows=1_000_000,
)
# A listing or a decision on a few records: a page of rows, quickly.
LISTING = ReadLimits(
    max_execution_time=60.0,
    max_memory_usage=512 * 1024 * 1024,
    max_rows_to_read=500_000_000,
    max_result_rows=1_000_000,
)

JOB_LIMITS: Mapping[str, ReadLimits] = {
    "completeness": ANALYSIS,
    "compare": ANALYSIS,
    "conformance.check": ANALYSIS,
    "conformance.derive": LISTING,
    "conformance.fixtures": LISTING,
    "conformance.results": LISTING,
    "drift": ANALYSIS,
    "events": LISTING,
    "fixtures.rerun": ANALYSIS,
    "lessons.approve": LISTING,
    "lessons.cluster": ANALYSIS,
    "lessons.draft": LISTING,
    "lessons.override": LISTING,
    "lessons.overrides": LISTING,
    "lessons.publish": LISTING,
    "lessons.reject": LISTING,
    "quarantine": LISTING,
    "activity": LISTING,
    "report": ANALYSIS,
    "retention": LISTING,
    "status": LISTING,
    "structural-inventory": ANALYSIS,
    "topology-bootstrap": ANALYSIS,
    "topology-scan": ANALYSIS,
    "variance.decompose": ANALYSIS,
    "variance.evaluate": ANALYSIS,
    "variance.lifecycle": LISTING,
}


def job_limits(name: str, overrides: LimitRequest | None = None) -> dict[str, float]:
    """The limits of job `name`'s queries as a limit request: its defaults (an
    analysis's for a job not listed), with `overrides` (the CLI's flags, by limit name)."""
    limits = JOB_LIMITS.get(name, ANALYSIS)
    if overrides:
        limits = ReadLimits.from_mapping(overrides, base=limits)
    return dict(dataclasses.asdict(limits))


_SAID = {
    "max_rows_to_read": "the query read more than {value} rows",
    "max_memory_usage": "the query needed more than {value} bytes of memory",
    "max_execution_time": "the query ran longer than {value} seconds",
    "max_result_rows": "the query returned more than {value} rows",
}
_WHAT_TO_DO = {
    "max_result_rows": "narrow the request",
}


class JobOverLimit(ReadLimitExceeded):
    """A job's query stopped at one of its read limits: said for the job, with the
    limit's value and the flag that raises it."""

    def __init__(self, job: str, limit: str, value: float | None, reason: str) -> None:
        shown = (
            "?" if value is None else f"{value:,g}" if isinstance(value, float) else f"{value:,}"
        )
        flag = FLAGS.get(limit, limit)
        said = _SAID.get(limit, "the query reached its limit").format(value=shown)
        todo = _WHAT_TO_DO.get(limit, "narrow the window")
        super().__init__(f"{job}: {said} ({limit}); {todo} or raise {flag}", limit)
        self.job = job
        self.value = value
        self.reason = reason
        self._flag = flag

    @property
    def hint(self) -> str:
        return (
            f"the command's {self._flag} N (0: none), or the same key in its section of"
            f" the config file; through `serve` or `sink` at most their"
            f" --read-{self._flag[2:]} (the store said: {self.reason})"
        )

    def details(self) -> dict[str, object]:
        return {"limit": self.limit, "value": self.value, "job": self.job}


def over_limit(job: str, err: ReadLimitExceeded, limits: Mapping[str, float]) -> JobOverLimit:
    """`err` (a query of `job` stopped) said for the job; the value is the effective
    limit when the connection knows it (the owner's ceiling may be lower than asked)."""
    if isinstance(err, JobOverLimit):
        return err
    value = limits.get(err.limit)
    if isinstance(value, float) and value.is_integer() and err.limit != "max_execution_time":
        value = int(value)
    return JobOverLimit(job, err.limit, value, str(err))
