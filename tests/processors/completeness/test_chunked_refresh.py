"""A full completeness recompute in bounded chunks (issue 30): over a store larger than
a (test-lowered) read limit it completes chunk by chunk with the answer of one
unlimited statement per step, the limit is real (one statement per step stops at it),
and a recompute interrupted after some chunks resumes where it stopped."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from processors.completeness import job
from schemas.store import Store
from testkit.scalestore import ScaleSpec, build

END = dt.datetime(2026, 7, 2, tzinfo=dt.UTC)
NOW = END + dt.timedelta(hours=1)
# 120,000 events on 10 streams over one day: each stream's windows are few (at most
# 1,440 minutes), its receipts many, so the receipts are what a statement reads.
SPEC = ScaleSpec(rows=240_000, days=1, surfaces=4, streams=10, end=END)
LIMIT = {"max_rows_to_read": 60_000.0}  # half the receipts: one statement over all stops
CHUNKED = job.CompletenessConfig(rows_per_shard=20_000, limits=LIMIT)
DERIVED = ("stream_status", "completeness_windows", "completeness_refreshes")
PROGRESS = "completeness_refresh_progress"


class Interrupted(RuntimeError):
    """The fault the seam raises after some chunks (a crash mid-recompute)."""


def _tables(store: Store) -> dict[str, list[Any]]:
    """The derived tables as read (FINAL), without the refresh's own version and times."""
    return {
        "streams": store.query(
            "SELECT * EXCEPT (version, computed_at) FROM holonograph.stream_status FINAL"
            " ORDER BY tenant_id, emission_stream"
        ).rows,
        "windows": store.query(
            "SELECT * EXCEPT (version, computed_at) FROM holonograph.completeness_windows FINAL"
            " ORDER BY tenant_id, bucket, scope, surface_id, emission_stream, bucket_start"
        ).rows,
    }


def _clear(store: Store) -> None:
    for table in (*DERIVED, PROGRESS):
        store.command(f"TRUNCATE TABLE holonograph.{table}")


@pytest.fixture
def loaded(store: Store) -> Store:
    build(store, SPEC)
    return store


def test_a_chunked_recompute_within_a_lowered_limit_equals_an_unlimited_one(
    loaded: Store,
) -> None:
    unlimited = job.recompute_completeness(loaded, NOW)
    expected = _tables(loaded)
    assert unlimited.streams == SPEC.streams and len(expected["windows"]) > 1_000
    _clear(loaded)

    summary = job.recompute_completeness(loaded, NOW, CHUNKED)

    assert _tables(loaded) == expected
    assert summary.streams == SPEC.streams and summary.resumed_chunks == 0
    shards = sum(1 for name in summary.step_ms if name.startswith("streams["))
    assert shards >= 3  # 120,000 receipts in ranges of ~20,000
    assert summary.chunks == 3 * shards + sum(
        1 for name in summary.step_ms if name.startswith("surface_windows[")
    )


def test_the_limit_is_real_one_statement_over_the_whole_store_stops_at_it(
    loaded: Store,
) -> None:
    whole = job.CompletenessConfig(rows_per_shard=10_000_000, limits=LIMIT)
    with pytest.raises(job.RefreshOverLimit) as raised:
        job.recompute_completeness(loaded, NOW, whole)
    assert raised.value.limit == "max_rows_to_read"
    assert "streams[0] stopped at its limit (max_rows_to_read)" in str(raised.value)
    assert "resumes" in str(raised.value)


def test_an_interrupted_recompute_resumes_after_its_last_chunk_with_the_same_answer(
    loaded: Store,
) -> None:
    job.recompute_completeness(loaded, NOW)
    expected = _tables(loaded)
    _clear(loaded)
    ran: list[str] = []

    def crash_after_four(name: str) -> None:
        ran.append(name)
        if len(ran) == 4:
            raise Interrupted(name)

    with pytest.raises(Interrupted):
        job.recompute_completeness(loaded, NOW, CHUNKED, on_chunk=crash_after_four)
    assert loaded.query("SELECT count() FROM holonograph.completeness_refreshes").scalar() == 0

    later = NOW + dt.timedelta(minutes=30)  # the rerun keeps the interrupted run's `now`
    resumed = job.recompute_completeness(loaded, later, CHUNKED, on_chunk=ran.append)

    assert resumed.resumed_chunks == 4 and resumed.now == NOW
    assert ran[4:] == [name for name in resumed.step_ms if name != "mark_dead"]
    assert len(set(ran)) == len(ran) == resumed.chunks  # no chunk ran twice
    assert _tables(loaded) == expected

    fresh = job.recompute_completeness(loaded, later, CHUNKED)  # finished: not resumed again
    assert fresh.resumed_chunks == 0 and fresh.now == later and fresh.version > resumed.version


def test_a_refresh_finished_since_abandons_the_interrupted_recompute(loaded: Store) -> None:
    def crash(name: str) -> None:
        raise Interrupted(name)

    with pytest.raises(Interrupted):
        job.recompute_completeness(loaded, NOW, CHUNKED, on_chunk=crash)
    job.refresh_completeness(loaded, NOW, NOW - dt.timedelta(days=2))  # one statement a step

    later = NOW + dt.timedelta(minutes=30)
    summary = job.recompute_completeness(loaded, later, CHUNKED)

    assert summary.resumed_chunks == 0 and summary.now == later
    chunked = _tables(loaded)
    _clear(loaded)
    job.recompute_completeness(loaded, later)
    assert chunked == _tables(loaded)
