"""A page of streams (`limit`, `offset`: the web UI's streams table at 10k streams): the
listed streams, in the report's order, with their windows and in-range gaps only; the
totals, the finding and `page.streams` over every stream. Without `limit` the answer is
the CLI's whole document, unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processors.completeness import job
from schemas.store import Store
from testkit.backends import migrated_store
from tests.holonograph.ui.test_ui_browser import _seed_streams

pytestmark = pytest.mark.clickhouse

STREAMS = 120  # every 7th lossy: 18
WINDOW = {"since": "2026-06-03T00:00:00Z", "until": "2026-06-04T00:00:00Z"}
NOW = dt.datetime(2026, 6, 5, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with migrated_store(Path(tmp_path_factory.mktemp("paging")) / "data") as opened:
        _seed_streams(opened, STREAMS)
        yield opened


def _run(store: Store, **body: Any) -> job.Report:
    return job.run(store, job.Request.model_validate({**WINDOW, **body}), lambda: NOW)


def test_pages_cover_every_stream_once_in_the_reports_order(store: Store) -> None:
    whole = _run(store).to_json()
    assert "page" not in whole and len(whole["streams"]) == STREAMS
    listed: list[str] = []
    for offset in range(0, STREAMS, 50):
        page = _run(store, limit=50, offset=offset).to_json()
        assert page["page"] == {"offset": offset, "limit": 50, "streams": STREAMS}
        assert page["totals"] == whole["totals"]
        assert len(page["streams"]) == min(50, STREAMS - offset)
        names = {s["stream"] for s in page["streams"]}
        assert {w["stream"] for w in page["windows"] if w["scope"] == "stream"} == names
        assert set(page["missingInRange"]) == names
        listed += [s["stream"] for s in page["streams"]]
    assert listed == [s["stream"] for s in whole["streams"]]
    surface = [w for w in whole["windows"] if w["scope"] == "surface"]
    assert surface and [w for w in page["windows"] if w["scope"] == "surface"] == surface


def test_the_finding_is_every_streams_even_on_a_page_without_loss(store: Store) -> None:
    last = _run(store, limit=50, offset=100)  # past the 18 lossy streams, listed first
    assert {s["status"] for s in last.to_json()["streams"]} == {"closed-complete"}
    assert job.finding(last) is True


def test_a_page_out_of_bounds_is_refused() -> None:
    for body in ({"limit": 0}, {"limit": 10_001}, {"offset": -1}):
        with pytest.raises(ValueError):
            job.Request.model_validate({**WINDOW, **body})
