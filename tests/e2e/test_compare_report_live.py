"""`compare` and `report` while `serve` holds the embedded store: both go through the
owner's admin endpoint (read token, the read-only gate) and answer exactly what they
answer on the store when no process holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit import multiplex
from testkit.multiplex import MultiplexSpec
from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]


def test_compare_and_report_through_a_live_serve(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = open_store(f"chdb://{data_dir}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=120, fallbacks=6, lost=(4,)), 11)
    finally:
        store.close()
    args = ["compare", "--surface", "classify-intent", *WINDOW, "--data-dir", str(data_dir)]
    offline = holonograph(*args, "--json")
    assert offline.returncode == 1, offline.stderr
    server = ServeProcess(data_dir)
    try:
        assert (data_dir / ".holonograph-admin.json").exists()
        live = holonograph(*args, "--json")
        assert live.returncode == 1, live.stderr
        assert json.loads(live.stdout) == json.loads(offline.stdout)
        page = tmp_path / "report.html"
        written = holonograph(
            "report", *WINDOW, "--as-of", "2026-06-01T03:00:00Z", "--data-dir", str(data_dir),
            "--out", str(page),
        )  # fmt: skip
        assert written.returncode == 0, written.stderr
        assert written.stderr == ""  # not a terminal: no progress bar in the log
        assert 'data-metric="compare/classify-intent/groups/openai/gpt-5/events">126<' in (
            page.read_text()
        )
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
