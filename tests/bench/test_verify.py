"""verify.py against a fake store reader: accepted spans must all be there; spans of
requests whose outcome is unknown, or that were answered UNAVAILABLE (the service
may have stored them before the answer; at-least-once), are allowed; spans of
requests refused up front (RESOURCE_EXHAUSTED) or never sent are not."""

from __future__ import annotations

import re
from typing import Any

from bench.loadgen import LoadResult
from bench.payload import STREAM_PREFIX
from bench.verify import Expected, verify

BATCH = 4
TAG = "verify01"


class _FakeReader:
    """Answers verify's queries from per-request stored span counts."""

    def __init__(self, stored: dict[int, int], evaluations_per_span: float = 1.0) -> None:
        self.streams = {f"{STREAM_PREFIX}{TAG}-{n:010d}": c for n, c in stored.items()}
        self.events = int(sum(stored.values()) * evaluations_per_span)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        if "GROUP BY emission_stream" in sql:
            return [[stream, count] for stream, count in self.streams.items()]
        if re.search(r"FROM \w+\.evaluation_events", sql):
            return [[self.events]]
        if "evaluation_dimensions" in sql:
            return [[2 * self.events]]
        if "quarantine" in sql:
            return [[0]]
        raise AssertionError(f"unexpected query {sql}")


def _result(
    accepted: list[int],
    unknown: tuple[int, ...] = (),
    retryable: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    result = LoadResult(
        config={"tag": TAG, "batch": BATCH},
        accepted_spans=BATCH * len(accepted),
        accepted_evaluations=BATCH * len(accepted),
        accepted_requests=accepted,
        unknown_requests=list(unknown),
        retryable_requests=retryable or {},
        ended_at=1.0,
    )
    return result.__dict__


def _verify(result: dict[str, Any], stored: dict[int, int]) -> dict[str, Any]:
    expected = Expected()
    expected.add(result)
    return verify(_FakeReader(stored), expected)


def test_all_accepted_stored_passes() -> None:
    report = _verify(_result([0, 1]), {0: BATCH, 1: BATCH})
    assert report["ok"] and report["spans_lost"] == 0


def test_stored_after_unavailable_is_allowed_and_reported() -> None:
    result = _result([0], retryable={"UNAVAILABLE": [1], "503": [2], "RESOURCE_EXHAUSTED": [3]})
    report = _verify(result, {0: BATCH, 1: BATCH, 2: BATCH})
    assert report["ok"], report
    assert report["retryable_spans"] == 2 * BATCH
    assert report["retryable_spans_stored"] == 2 * BATCH
    assert report["spans_unexpected"] == 0


def test_loss_of_an_accepted_span_still_fails_with_retryable_around() -> None:
    result = _result([0, 1], retryable={"UNAVAILABLE": [2]})
    report = _verify(result, {0: BATCH, 1: BATCH - 1, 2: BATCH})
    assert not report["ok"]
    assert report["spans_lost"] == 1


def test_stored_after_a_refusal_fails() -> None:
    result = _result([0], retryable={"RESOURCE_EXHAUSTED": [1], "429": [2]})
    report = _verify(result, {0: BATCH, 1: BATCH})
    assert not report["ok"]
    assert report["spans_unexpected"] == BATCH
    assert report["retryable_spans_stored"] == 0


def test_unknown_outcome_stays_allowed() -> None:
    report = _verify(_result([0], unknown=(5,)), {0: BATCH, 5: 2})
    assert report["ok"]
    assert report["unknown_outcome_spans_stored"] == 2


def test_results_without_retryable_requests_still_verify() -> None:
    result = _result([0])
    del result["retryable_requests"]  # a load result from before the field existed
    assert _verify(result, {0: BATCH})["ok"]


class _ArrivingReader:
    """Receipts that arrive a few per poll (a row per arrival, redeliveries counted in
    `count()`); records which queries each poll ran."""

    def __init__(self, total: int, per_poll: int, duplicates: int) -> None:
        self.total, self.per_poll, self.duplicates = total, per_poll, duplicates
        self.present = 0
        self.queries: list[str] = []

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        if "WHERE emission_stream" in sql:
            self.present = min(self.total, self.present + self.per_poll)
            self.queries.append("last")
            return [[1]]  # the last stream is there from the first poll on
        if "count()" in sql:
            self.queries.append("count")
            return [[self.present + self.duplicates]]
        if "uniqExact(emission_stream, emission_seq)" in sql:
            self.queries.append("distinct")
            return [[self.present]]
        raise AssertionError(f"unexpected query {sql}")


def test_wait_queryable_reads_the_distinct_count_only_once_enough_rows_are_there() -> None:
    from bench.verify import wait_queryable

    expected = Expected()
    expected.add(_result(list(range(10))))  # 40 spans
    reader = _ArrivingReader(total=expected.spans, per_poll=8, duplicates=4)
    assert wait_queryable(reader, expected, poll=0.0) is not None
    assert reader.present == expected.spans
    # count() is 36 at the 4th poll (32 arrivals and 4 duplicates), 44 at the 5th:
    # the distinct count runs from there, and the wait ends when it says all are there.
    assert reader.queries.count("count") == 5
    assert reader.queries.count("distinct") == 1
    assert reader.queries[-1] == "distinct"
