"""`holonograph report` over a seeded chDB store: one self-contained page, usage errors
before any store is opened. (Opened in a browser: tests/e2e/test_report_browser.py.)"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import EVALUATION_EVENTS
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

pytestmark = pytest.mark.clickhouse

WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=60, fallbacks=5, lost=(2,)), 3)
    finally:
        store.close()
    return path


def test_the_page_is_self_contained(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        cli, ["report", *WINDOW, "--data-dir", str(data_dir), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out} (1 surface(s)")
    page = out.read_text()
    assert "<svg" in page and "Surface classify-intent" in page
    # Nothing that could load anything: no script, no source, no link, no CSS url().
    assert not re.search(r"<script|<link|<img|<iframe|\ssrc=|\shref=|url\(|@import", page)
    assert "default-src 'none'" in page
    assert not list(tmp_path.glob(".*.partial"))


def test_usage_errors_exit_2(data_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    reversed_window = ["--since", "2026-06-02T00:00:00Z", "--until", "2026-06-01T00:00:00Z"]
    bad = runner.invoke(
        cli, ["report", *reversed_window, "--data-dir", str(data_dir), "--out", "r.html"]
    )
    assert bad.exit_code == 2 and "--until must be after --since" in bad.output
    nowhere = runner.invoke(
        cli,
        ["report", *WINDOW, "--data-dir", str(data_dir), "--out", str(tmp_path / "no" / "r.html")],
    )
    assert nowhere.exit_code == 2 and "no directory" in nowhere.output


AS_OF = ["--as-of", "2026-06-02T06:00:00Z"]


def _json(data_dir: Path, *args: str) -> dict[str, Any]:
    done = CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir), "--json"])
    assert done.exit_code in (0, 1), done.output
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_the_reports_counts_are_the_completeness_commands(data_dir: Path, tmp_path: Path) -> None:
    report = _json(data_dir, "report", *WINDOW, *AS_OF)
    command = _json(data_dir, "completeness", *WINDOW, *AS_OF)
    assert report["completeness"]["totals"] == command["totals"]
    assert report["completeness"]["missingInRange"] == command["missingInRange"]
    totals = command["totals"]
    assert totals["missingInRange"] > 0  # the seeded lost event
    # The card counts what `completeness` prints: surface windows, not stream windows too.
    text = CliRunner().invoke(cli, ["completeness", *WINDOW, *AS_OF, "--data-dir", str(data_dir)])
    (shown,) = re.findall(r"Biased surface windows \(hour\): (\d+)", text.stdout)
    assert int(shown) == totals["biasedSurfaceWindows"] > 0
    assert totals["biasedWindows"] > totals["biasedSurfaceWindows"]  # stream windows as well
    out = tmp_path / "report.html"
    done = CliRunner().invoke(
        cli, ["report", *WINDOW, *AS_OF, "--data-dir", str(data_dir), "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    page = out.read_text()
    card = re.search(
        r'<div class="card">([^<]+)<b data-metric="completeness/totals/biasedSurfaceWindows">'
        r"(\d+)</b>",
        page,
    )
    assert card and card[1] == "Biased surface windows (hour)" and card[2] == shown
    # Human labels, never the JSON keys.
    assert (
        '<div class="card">Missing in range<b data-metric="completeness/totals/missingInRange">'
        in page
    )
    assert not re.search(r'<div class="card">[a-z]+[A-Z]', page)


def test_the_headline_says_what_is_wrong(data_dir: Path, tmp_path: Path) -> None:
    report = _json(data_dir, "report", *WINDOW, *AS_OF)
    lost = report["completeness"]["totals"]["missingInRange"]
    rejected = report["rejections"]["total"]
    lossy = sum(1 for n in report["completeness"]["missingInRange"].values() if n)
    dead = report["completeness"]["totals"]["byStatus"].get("dead", 0)
    assert lossy == 1 and lost == 1 and dead == 3 and rejected == 0, report["completeness"]
    # A sentence a newcomer reads: nouns agree with their counts, no "(s)", no JSON key.
    assert report["headline"] == (
        "1 stream lost 1 event in the window, 3 streams went silent without closing (dead)."
    )
    assert "(s)" not in report["headline"] and not re.search(r"[a-z][A-Z]", report["headline"])
    assert report["headline"].endswith(".")
    out = tmp_path / "report.html"
    CliRunner().invoke(
        cli, ["report", *WINDOW, *AS_OF, "--data-dir", str(data_dir), "--out", str(out)]
    )
    assert f'<p class="headline" data-metric="headline">{report["headline"]}</p>' in out.read_text()
    quiet = _json(data_dir, "report", "--since", "2026-05-01T00:00:00Z", "--until",
                  "2026-05-02T00:00:00Z", *AS_OF)  # fmt: skip
    assert quiet["headline"] == "No evaluation events in the window."


def test_a_verdict_shows_in_every_report_whose_window_overlaps_its_reading(
    data_dir: Path,
) -> None:
    reading = _json(
        data_dir, "variance", "decompose", "--surface", "classify-intent", "--dimension",
        "correctness", *WINDOW,
    )  # fmt: skip
    # evaluated now, long after the report's window: it shows all the same
    verdict = _json(data_dir, "variance", "evaluate", "--target-event-id", reading["eventId"])
    (shown,) = _json(data_dir, "report", *WINDOW, *AS_OF)["surfaces"][0]["verdicts"]
    assert shown["verdict"] == verdict["verdict"]
    assert (shown["since"], shown["until"]) == ("2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z")
    later = ["--since", "2026-06-01T12:00:00Z", "--until", "2026-06-03T00:00:00Z"]
    overlaps = _json(data_dir, "report", *later, *AS_OF, "--surface", "classify-intent")
    (overlapping,) = overlaps["surfaces"][0]["verdicts"]
    assert overlapping == shown
    apart = ["--since", "2026-06-02T00:00:00Z", "--until", "2026-06-03T00:00:00Z"]
    report = _json(data_dir, "report", *apart, *AS_OF, "--surface", "classify-intent")
    assert report["surfaces"][0]["verdicts"] == []


def test_a_drift_run_older_than_the_windows_events_is_stale(data_dir: Path) -> None:
    done = CliRunner().invoke(
        cli, ["drift", "--surface", "classify-intent", *WINDOW, "--data-dir", str(data_dir)]
    )
    assert done.exit_code in (0, 1), done.output
    (fresh,) = _json(data_dir, "report", *WINDOW, *AS_OF)["surfaces"]
    assert fresh["driftRun"]["stale"] is False and fresh["driftRun"]["behindSeconds"] is None
    # A late event of the window arrives after the run (a backfill).
    store = open_store(f"chdb://{data_dir}")
    try:
        store.command(
            f"INSERT INTO {EVALUATION_EVENTS.qualified} SELECT * REPLACE ("
            " concat(event_id, '-late') AS event_id, now64(3) AS ingested_at)"
            f" FROM {EVALUATION_EVENTS.qualified} WHERE surface_id = 'classify-intent' LIMIT 1"
        )
    finally:
        store.close()
    report = _json(data_dir, "report", *WINDOW, *AS_OF)
    (late,) = report["surfaces"]
    run = late["driftRun"]
    assert run["stale"] is True and run["runId"] == fresh["driftRun"]["runId"]
    behind = dt.datetime.fromisoformat(run["newestArrival"]) - dt.datetime.fromisoformat(
        run["runAt"]
    )
    assert run["behindSeconds"] == pytest.approx(behind.total_seconds())
    assert (
        "the latest drift run of classify-intent is older than some events of the window"
        " (run `holonograph drift` again)"
    ) in report["headline"]
