"""Never silently unbracketed: an analysis run straight after a backfill, before the
periodic completeness refresh has seen it, either refreshes the windows first (a command
that may write: an embedded store) or says it is stale and by how much (the job itself,
as the HTTP API and the scheduler run it). Issue 27."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from processors.completeness.job import recompute_completeness
from processors.drift import job as drift_job
from processors.series import freshness as freshness_module
from processors.series.refreshes import last_refresh_began
from processors.variance import evaluate as evaluate_job
from schemas.migrations import apply_migrations
from schemas.store import Store
from testkit.scenarios import SurfaceSpec, generate, write_cells

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
HOURS = 120
WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-06T00:00:00Z"]
EARLIER = SurfaceSpec("earlier-surface", tau=0.0, events=(50, 80), buckets=HOURS, alias="a-1")
# Hours 40-46 lose 60% of their failed events: gaps in the emission ordinals.
BACKFILL = SurfaceSpec(
    "lossy-surface", tau=0.0, events=(100, 200), buckets=HOURS, alias="a-2",
    loss=((40, 46, 0.6),),
)  # fmt: skip


@pytest.fixture()
def backfilled(tmp_path: Path) -> Iterator[Path]:
    """A store whose windows were refreshed, then a week of a lossy surface backfilled
    (its events ingested after that refresh began)."""
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        write_cells(store, generate(EARLIER, seed=3), ingested_at=dt.datetime(2026, 6, 7))
        recompute_completeness(store, dt.datetime(2026, 6, 7, tzinfo=dt.UTC))
        assert last_refresh_began(store) is not None
        # the backfill arrives now, on the wall clock that stamps arrivals
        write_cells(store, generate(BACKFILL, seed=4), ingested_at=dt.datetime.now(dt.UTC))
    finally:
        store.close()
    yield path


def run(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)])


def _loss_hours(brackets: list[dict[str, object]]) -> set[int]:
    hours: set[int] = set()
    for b in brackets:
        if b["reason"] == "delivery-loss":
            start = dt.datetime.fromisoformat(str(b["from"]))
            end = dt.datetime.fromisoformat(str(b["to"]))
            hours.update(range((start - START) // dt.timedelta(hours=1),
                               (end - START) // dt.timedelta(hours=1)))  # fmt: skip
    return hours


def _read_only_drift(path: Path) -> dict[str, object]:
    """The drift job as the HTTP API runs it: read-only, no refresh first."""
    store: Store = open_store(f"chdb://{path}")
    try:
        until = START + dt.timedelta(hours=HOURS)
        request = drift_job.Request.model_validate(
            {"surfaceId": "lossy-surface", "since": START, "until": until, "persist": False}
        )
        return drift_job.run(store, request, lambda: START).to_json()
    finally:
        store.close()


def test_a_read_only_analysis_after_a_backfill_says_it_is_stale_and_by_how_much(
    backfilled: Path,
) -> None:
    report = _read_only_drift(backfilled)
    freshness = report["freshness"]
    assert isinstance(freshness, dict)
    assert freshness["stale"] is True
    refreshed = dt.datetime.fromisoformat(str(freshness["refreshedAt"]))
    arrived = dt.datetime.fromisoformat(str(freshness["newestArrival"]))
    behind = (arrived - refreshed).total_seconds()
    assert behind > 0 and freshness["behindSeconds"] == pytest.approx(behind)
    notes = [str(n) for n in report["notes"]]  # type: ignore[attr-defined]
    (note,) = [n for n in notes if n.startswith("stale:")]
    assert f"{freshness['behindSeconds']:g}s before the newest event of this range arrived" in note
    assert "not bracketed" in note
    assert not _loss_hours(report["bracketedWindows"])  # type: ignore[arg-type]


def test_drift_straight_after_a_backfill_refreshes_first_and_brackets_the_loss(
    backfilled: Path,
) -> None:
    done = run(backfilled, "drift", "--surface", "lossy-surface", *WINDOW, "--no-save", "--json")
    assert done.exit_code in (0, 1), done.output
    assert "refreshed the completeness windows first" in done.stderr
    report = json.loads(done.stdout)
    assert report["freshness"]["stale"] is False
    assert not [n for n in report["notes"] if n.startswith("stale:")]
    hours = _loss_hours(report["bracketedWindows"])
    assert hours and min(hours) >= 40 and max(hours) <= 46
    # Fresh now: the next command has nothing to refresh.
    again = run(backfilled, "drift", "--surface", "lossy-surface", *WINDOW, "--no-save", "--json")
    assert "refreshed the completeness windows first" not in again.stderr
    assert _loss_hours(json.loads(again.stdout)["bracketedWindows"]) == hours


def test_after_a_refresh_the_read_only_answer_is_fresh(backfilled: Path) -> None:
    report = _read_only_drift(backfilled)
    assert report["freshness"]["stale"]  # type: ignore[index]
    # After the refresh a command ran, the read-only job is fresh too.
    done = run(backfilled, "completeness", "--refresh", "--json")
    assert done.exit_code in (0, 1), done.output
    assert _read_only_drift(backfilled)["freshness"]["stale"] is False  # type: ignore[index]


def test_a_variance_verdict_after_a_backfill_is_weighed_fresh_or_says_stale(
    backfilled: Path,
) -> None:
    decomposed = run(
        backfilled, "variance", "decompose", "--surface", "lossy-surface", "--dimension",
        "correctness", *WINDOW, "--json",
    )  # fmt: skip
    assert decomposed.exit_code in (0, 1), decomposed.output
    target = json.loads(decomposed.stdout)["eventId"]
    store: Store = open_store(f"chdb://{backfilled}")
    try:  # as the HTTP API runs it: read-only, no refresh first
        request = evaluate_job.Request.model_validate({"targetEventId": target})
        stale = evaluate_job.run(store, request, lambda: START).evaluation
    finally:
        store.close()
    assert stale.checks["freshness"]["stale"] is True  # type: ignore[index]
    assert str(stale.checks["delivery"]).startswith("stale: completeness windows refreshed")
    done = run(backfilled, "variance", "evaluate", "--target-event-id", target)
    assert "refreshed the completeness windows first" in done.stderr
    assert "stale:" not in done.stdout
    fresh = run(backfilled, "variance", "evaluate", "--target-event-id", target, "--json")
    checks = json.loads(fresh.stdout)["checks"]
    assert checks["freshness"]["stale"] is False and checks["lossWindows"] > 0


def test_fresh_windows_are_read_once_by_the_command_and_the_job(
    backfilled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's check before drift and drift's own read of the same range: one read
    of the windows' last refresh when they are fresh (nothing written between); the
    report says what a read of its own would."""
    assert run(backfilled, "completeness", "--refresh").exit_code in (0, 1)
    reads: list[object] = []
    real = freshness_module.last_refresh_began

    def counted(store: Store) -> dt.datetime | None:
        reads.append(store)
        return real(store)

    monkeypatch.setattr(freshness_module, "last_refresh_began", counted)
    done = run(backfilled, "drift", "--surface", "lossy-surface", *WINDOW, "--no-save", "--json")
    assert done.exit_code in (0, 1), done.output
    assert "refreshed the completeness windows first" not in done.stderr
    assert len(reads) == 1
    report = json.loads(done.stdout)
    own = _read_only_drift(backfilled)  # the job alone, reading its own
    assert len(reads) == 2
    assert report["freshness"] == own["freshness"] and report["freshness"]["stale"] is False
