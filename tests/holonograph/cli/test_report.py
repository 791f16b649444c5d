"""`holonograph report` over a seeded chDB store: one self-contained page, usage errors
before any store is opened. (Opened in a browser: tests/e2e/test_report_browser.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
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
