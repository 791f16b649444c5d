"""Did every accepted span land, and when could it be queried?

The load generator reports the request numbers the service accepted; each request
is its own emission stream (`bench-<tag>-<number>`) with seq 0..batch-1. A run
passes when every accepted stream has all its (stream, seq) receipts, the event
and dimension tables hold one row per accepted evaluation, and nothing was
quarantined. Requests whose outcome the client never learnt (timeouts) may or
may not be stored; so may requests answered with a retryable error after which
the service may have done the work anyway (UNAVAILABLE: the store or broker did
not confirm in time): the client retries, the store collapses the repeat on the
event id (at-least-once). Both widen the tolerance on the totals and nothing
else; stored spans of a request refused up front (RESOURCE_EXHAUSTED / 429) still
fail the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.loadgen import MAYBE_STORED_CODES
from bench.paths import StoreReader
from bench.payload import STREAM_PREFIX

DB = "holonograph"


@dataclass
class Expected:
    """What the store must hold, from one or more load results."""

    batch: dict[str, int] = field(default_factory=dict)  # tag -> spans per request
    accepted: dict[str, set[int]] = field(default_factory=dict)
    unknown: dict[str, set[int]] = field(default_factory=dict)
    retryable: dict[str, set[int]] = field(default_factory=dict)  # answered, may be stored
    spans: int = 0
    evaluations: int = 0
    unknown_spans: int = 0
    uncertain_evaluations_max: int = 0  # unknown outcome + maybe stored after retryable
    retryable_spans: int = 0
    last_stream: str = ""
    ended_at: float = 0.0
    dimensions_per_evaluation: int = 2  # bench.payload's spans grade two; minimal ones none

    def add(self, result: dict[str, Any]) -> None:
        config = result["config"]
        tag, batch = config["tag"], config["batch"]
        if config.get("minimal"):
            self.dimensions_per_evaluation = 0
        self.batch[tag] = batch
        self.accepted.setdefault(tag, set()).update(result["accepted_requests"])
        self.unknown.setdefault(tag, set()).update(result["unknown_requests"])
        self.spans += result["accepted_spans"]
        self.evaluations += result["accepted_evaluations"]
        self.unknown_spans += batch * len(result["unknown_requests"])
        self.uncertain_evaluations_max += batch * len(result["unknown_requests"])
        maybe_stored = {
            number
            for code, numbers in result.get("retryable_requests", {}).items()
            if code in MAYBE_STORED_CODES
            for number in numbers
        }
        self.retryable.setdefault(tag, set()).update(maybe_stored)
        self.retryable_spans += batch * len(maybe_stored)
        self.uncertain_evaluations_max += batch * len(maybe_stored)
        if result["accepted_requests"] and result["ended_at"] >= self.ended_at:
            self.last_stream = f"{STREAM_PREFIX}{tag}-{max(result['accepted_requests']):010d}"
        self.ended_at = max(self.ended_at, result["ended_at"])


def _scalar(reader: StoreReader, sql: str, parameters: dict[str, Any] | None = None) -> int:
    return int(reader.query(sql, parameters)[0][0])


def _stream_counts(reader: StoreReader) -> dict[str, int]:
    rows = reader.query(
        f"SELECT emission_stream, uniqExact(emission_seq) FROM {DB}.emission_receipts"
        " GROUP BY emission_stream"
    )
    return {str(stream): int(count) for stream, count in rows}


def wait_queryable(
    reader: StoreReader, expected: Expected, timeout: float = 300.0, poll: float = 0.05
) -> float | None:
    """Seconds from the last accepted response until every accepted span is counted."""
    if not expected.last_stream:
        return 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        present = _scalar(
            reader,
            f"SELECT uniqExact(emission_seq) FROM {DB}.emission_receipts"
            " WHERE emission_stream = {stream:String}",
            {"stream": expected.last_stream},
        )
        # `count()` of the receipts is read from the parts' metadata (a few ms of the
        # store's CPU); the distinct count (~0.1 s of it at 50k rows, charged to the
        # service measured) only once enough rows are there: a receipt row per arrival,
        # so fewer rows than spans means fewer distinct arrivals too.
        if present > 0 and _scalar(reader, f"SELECT count() FROM {DB}.emission_receipts") >= (
            expected.spans
        ):
            total = _scalar(
                reader,
                f"SELECT uniqExact(emission_stream, emission_seq) FROM {DB}.emission_receipts",
            )
            if total >= expected.spans:
                return max(0.0, time.time() - expected.ended_at)
        time.sleep(poll)
    return None


def verify(reader: StoreReader, expected: Expected) -> dict[str, Any]:
    """Compare the store with what the client was told was accepted."""
    counts = _stream_counts(reader)
    lost = unknown_stored = retryable_stored = 0
    for tag, accepted in expected.accepted.items():
        batch = expected.batch[tag]

        def take(number: int, tag: str = tag) -> int:
            return counts.pop(f"{STREAM_PREFIX}{tag}-{number:010d}", 0)

        for number in accepted:
            lost += batch - min(batch, take(number))
        unknown_stored += sum(take(number) for number in expected.unknown.get(tag, ()))
        retryable_stored += sum(take(number) for number in expected.retryable.get(tag, ()))
    unexpected = sum(counts.values())
    events = _scalar(reader, f"SELECT count() FROM {DB}.evaluation_events FINAL")
    dimensions = _scalar(reader, f"SELECT count() FROM {DB}.evaluation_dimensions FINAL")
    quarantined = _scalar(reader, f"SELECT count() FROM {DB}.quarantine")
    events_ok = (
        expected.evaluations <= events <= expected.evaluations + expected.uncertain_evaluations_max
    )
    dimensions_ok = dimensions == expected.dimensions_per_evaluation * events
    ok = lost == 0 and unexpected == 0 and events_ok and dimensions_ok and quarantined == 0
    return {
        "ok": ok,
        "spans_accepted": expected.spans,
        "spans_stored": expected.spans - lost,
        "spans_lost": lost,
        "spans_unexpected": unexpected,
        "unknown_outcome_spans": expected.unknown_spans,
        "unknown_outcome_spans_stored": unknown_stored,
        "retryable_spans": expected.retryable_spans,
        "retryable_spans_stored": retryable_stored,
        "evaluations_accepted": expected.evaluations,
        "event_rows": events,
        "dimension_rows": dimensions,
        "quarantine_rows": quarantined,
    }
