"""`quarantine --offset` (and `offset` over HTTP, the web UI's pages): consecutive pages
of the newest rejected spans are disjoint and together exactly the whole list, in the
same order; the counts cover every match on every page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from tests.holonograph.cli.test_quarantine import COLUMNS, rejected

pytestmark = pytest.mark.clickhouse

SPANS = 23


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        rows = [rejected("acme", n, f"reason {n % 3}") for n in range(SPANS)]
        store.insert("holonograph.quarantine", rows, COLUMNS)
    finally:
        store.close()
    return path


def _page(data_dir: Path, *args: str) -> Any:
    done = CliRunner().invoke(cli, ["quarantine", "--data-dir", str(data_dir), "--json", *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_pages_by_offset_are_the_whole_list_once_in_order(data_dir: Path) -> None:
    whole = _page(data_dir, "--limit", str(SPANS))
    assert len(whole["spans"]) == SPANS
    pages = [_page(data_dir, "--limit", "10", "--offset", str(at)) for at in (0, 10, 20, 30)]
    assert [len(p["spans"]) for p in pages] == [10, 10, 3, 0]
    assert [s["spanId"] for p in pages for s in p["spans"]] == [s["spanId"] for s in whole["spans"]]
    assert all(p["total"] == SPANS and p["reasons"] == whole["reasons"] for p in pages)


def test_a_negative_offset_is_a_usage_error(data_dir: Path) -> None:
    done = CliRunner().invoke(cli, ["quarantine", "--data-dir", str(data_dir), "--offset", "-1"])
    assert done.exit_code == 2 and "--offset" in done.output


def test_the_openapi_document_describes_the_paging_and_the_activity_endpoint() -> None:
    from holonograph.api.openapi import document

    openapi = document()
    schemas = openapi["components"]["schemas"]
    quarantine = next(v for k, v in schemas.items() if k.startswith("QuarantineRequest"))
    assert quarantine["properties"]["offset"]["minimum"] == 0
    activity = openapi["paths"]["/holonograph/activity"]["get"]
    minutes = next(p for p in activity["parameters"] if p["name"] == "minutes")
    assert minutes["in"] == "query" and minutes["schema"]["maximum"] == 1440
