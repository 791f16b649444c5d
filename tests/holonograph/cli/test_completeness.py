"""`holonograph completeness` over a chDB store prepared in the test."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from holonograph.cli.completeness import format_gaps
from ingest.store.clickhouse import open_store
from ingest.store.url import chdb_path
from schemas.completeness import GapRange
from schemas.migrations import apply_migrations

pytestmark = pytest.mark.clickhouse

T0 = dt.datetime(2026, 7, 1, 9, 0, tzinfo=dt.UTC)
COLUMNS = [
    "emission_stream",
    "emission_seq",
    "receipt_id",
    "kind",
    "final",
    "quarantined",
    "event_id",
    "surface_id",
    "event_time",
    "received_at",
    "sentinel_interval_ms",
    "completeness_dropped",
]


def row(stream: str, seq: int, minutes: float, *, kind: str = "evaluation", **kw: Any) -> list[Any]:
    at = T0 + dt.timedelta(minutes=minutes)
    return [
        stream,
        seq,
        kw.get("receipt_id", f"{stream}-{seq}"),
        kind,
        kw.get("final", False),
        False,
        "" if kind == "sentinel" else f"evt_{stream}_{seq}",
        "" if kind == "sentinel" else kw.get("surface", "classify-intent"),
        at,
        at,
        kw.get("interval_ms"),
        kw.get("dropped"),
    ]


def seed(data_dir: Path, rows: list[list[Any]]) -> None:
    store = open_store(f"chdb://{data_dir}")
    try:
        apply_migrations(store)
        store.insert("holonograph.emission_receipts", rows, COLUMNS)
    finally:
        store.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "store"
    seed(
        path,
        [
            # complete and closed
            row("clean", 0, 0),
            row("clean", 1, 1, kind="sentinel", final=True),
            # lost 2-3 in its client buffer (reported), and 5 after it left
            row("lossy", 0, 0),
            row("lossy", 1, 1),
            row("lossy", 1, 1, receipt_id="lossy-1-retry"),
            row("lossy", 4, 2, kind="sentinel", dropped=2),
            row("lossy", 6, 70, surface="route"),
            row("lossy", 7, 71, kind="sentinel", final=True),
            # crashed: no final, silent
            row("crashed", 0, 0, surface="route"),
        ],
    )
    yield path


def run(data_dir: Path, *args: str) -> Any:
    return CliRunner().invoke(
        cli, ["completeness", "--data-dir", str(data_dir), "--as-of", "2026-07-01T12:00:00Z", *args]
    )


def test_text_lists_lossy_and_dead_first_and_exits_with_a_finding(data_dir: Path) -> None:
    result = run(data_dir)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("3 stream(s) (1 closed-complete, 1 closed-lossy, 1 dead)")
    table = [line.split()[0] for line in lines[4:7]]
    assert table == ["crashed", "lossy", "clean"]
    lossy = next(line for line in lines if line.startswith("lossy"))
    assert "2-3, 5" in lossy
    assert "Biased surface windows (hour): 4" in result.output
    assert (
        "classify-intent  2026-07-01T10:00:00Z  1        0          1        0.000        1/1"
        in result.output
    )


def test_json_is_the_report(data_dir: Path) -> None:
    result = run(data_dir, "--json", "--surface", "route", "--bucket", "hour")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [s["stream"] for s in report["streams"]] == ["crashed", "lossy"]
    stream = report["streams"][1]
    assert stream["status"] == "closed-lossy"
    assert stream["missingRanges"] == [{"from": 2, "to": 3}, {"from": 5, "to": 5}]
    assert (stream["expected"], stream["delivered"], stream["duplicates"]) == (8, 5, 1)
    assert stream["loss"]["reportedDropped"] == 2 and stream["loss"]["lostAfterClient"] == 1
    assert stream["lastSeenAt"] == "2026-07-01T10:11:00Z"
    hours = {
        (w["scope"], w["surfaceId"] or w["stream"], w["bucketStart"]): (
            w["offered"],
            w["missing"],
            w["biasFlag"],
        )
        for w in report["windows"]
    }
    assert hours == {
        ("stream", "crashed", "2026-07-01T09:00:00Z"): (1, 0, False),
        ("stream", "lossy", "2026-07-01T09:00:00Z"): (5, 2, True),
        ("stream", "lossy", "2026-07-01T10:00:00Z"): (3, 1, True),
        # route's own records (1 and 1) against the gaps of both streams carrying it
        ("surface", "route", "2026-07-01T09:00:00Z"): (3, 2, True),
        ("surface", "route", "2026-07-01T10:00:00Z"): (2, 1, True),
    }
    lossy_9 = next(w for w in report["windows"] if w["stream"] == "lossy")
    assert lossy_9["completenessLowerBound"] == pytest.approx(3 / 5)


def test_clean_selection_exits_zero_and_refresh_writes_tables(data_dir: Path) -> None:
    result = run(data_dir, "--stream", "clean", "--refresh")
    assert result.exit_code == 0, result.output
    assert "1 stream(s) (1 closed-complete)" in result.output
    store = open_store(f"chdb://{data_dir}")
    try:
        got = store.query(
            "SELECT emission_stream, status FROM holonograph.stream_status FINAL"
            " ORDER BY emission_stream"
        ).rows
    finally:
        store.close()
    assert got == [("clean", "closed-complete"), ("crashed", "dead"), ("lossy", "closed-lossy")]


def test_time_range_counts_the_gaps_in_range(data_dir: Path) -> None:
    result = run(data_dir, "--since", "2026-07-01T10:00:00Z", "--until", "2026-07-01T11:00:00Z")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("1 stream(s) (1 closed-lossy): expected 8, delivered 5, missing 3")
    assert lines[1] == "missing in [2026-07-01T10:00:00Z, 2026-07-01T11:00:00Z): 1"
    header, _, lossy = lines[3:6]
    assert header.split()[:7] == [
        "stream",
        "status",
        "expected",
        "delivered",
        "missing",
        "in",
        "range",
    ]
    assert lossy.split()[:6] == ["lossy", "closed-lossy", "8", "5", "3", "1"]


def test_time_range_and_usage_errors(data_dir: Path) -> None:
    empty = run(data_dir, "--since", "2026-07-02T00:00:00Z")
    assert empty.exit_code == 0 and "no emission streams" in empty.output
    bad = run(data_dir, "--since", "2026-07-02T00:00:00Z", "--until", "2026-07-01T00:00:00Z")
    assert bad.exit_code == 2
    naive = run(data_dir, "--since", "2026-07-01T00:00:00")
    assert naive.exit_code == 2


def test_missing_store_is_unavailable(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["completeness", "--data-dir", str(tmp_path / "nothing-here")])
    assert result.exit_code == 3


def test_format_gaps_shortens_long_lists() -> None:
    gaps = [GapRange.model_validate({"from": i * 10, "to": i * 10 + (i % 2)}) for i in range(6)]
    assert format_gaps(gaps) == "0, 10-11, 20, 30-31 (+2 more)"


@pytest.mark.e2e
@pytest.mark.chdb_only("reads a data directory serve holds, through its admin endpoint")
def test_works_while_serve_holds_the_store(receiver: Any) -> None:
    """Through the owner's admin endpoint: the live read, and --refresh as a write."""
    receiver.store.insert(
        "holonograph.emission_receipts",
        [row("held", 0, 0), row("held", 2, 1, kind="sentinel", final=True)],
        COLUMNS,
    )
    data_dir = chdb_path(receiver.store.url)
    result = run(data_dir, "--json", "--refresh")
    assert result.exit_code == 1, result.output
    (stream,) = json.loads(result.stdout)["streams"]
    assert stream["status"] == "closed-lossy"
    assert stream["missingRanges"] == [{"from": 1, "to": 1}]
    assert receiver.store.query(
        "SELECT emission_stream, status FROM holonograph.stream_status FINAL"
    ).rows == [("held", "closed-lossy")]


def test_says_when_the_tables_were_refreshed_and_warns_when_stale(data_dir: Path) -> None:
    def at(as_of: str, *args: str, env: dict[str, str] | None = None) -> Any:
        return CliRunner().invoke(
            cli, ["completeness", "--data-dir", str(data_dir), "--as-of", as_of, *args], env=env
        )

    never = at("2026-07-01T12:00:00Z", "--json")
    report = json.loads(never.stdout)
    assert (report["tablesRefreshedAt"], report["tablesStale"]) == (None, True)
    assert never.stderr.startswith("warning: tables stream_status, completeness_windows were")
    assert "never refreshed" in never.stderr

    assert at("2026-07-01T12:00:00Z", "--refresh").exit_code == 1  # a finding, tables written
    fresh = at("2026-07-01T12:01:00Z")
    assert fresh.stdout.splitlines()[-1] == (
        "tables stream_status, completeness_windows refreshed 2026-07-01T12:00:00Z (1m 0s ago)"
    )
    assert "warning" not in fresh.stderr
    stale = at("2026-07-01T12:03:00Z", "--json")
    assert json.loads(stale.stdout)["tablesRefreshedAt"] == "2026-07-01T12:00:00Z"
    assert json.loads(stale.stdout)["tablesStale"] is True
    assert stale.stderr.startswith(
        "warning: tables stream_status, completeness_windows refreshed 2026-07-01T12:00:00Z"
        " (3m 0s ago), not within two refresh periods (120s)"
    )
    assert "is `holonograph serve`/`sink` running? its /readyz says why" in stale.stderr
    slower = at("2026-07-01T12:03:00Z", env={"HOLONOGRAPH_STATUS_REFRESH_SECONDS": "300"})
    assert "warning" not in slower.stderr
    assert slower.stdout.splitlines()[-1].endswith("(3m 0s ago)")
