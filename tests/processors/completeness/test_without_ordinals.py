"""Completeness is honest about events that arrived without emission ordinals
(OpenTelemetry GenAI evaluations): their surfaces are `unknown: no emission ordinals`
with the share of their events that had none, never complete, in the report and on
the command line."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.export.request import validate_request
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.rows import TableRows, write_rows
from processors.completeness.job import Selection, read_report
from tests.genai_emit import Call, Eval, genai_contract, record_calls
from tests.ingest.export.test_genai import book_of
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

pytestmark = pytest.mark.clickhouse

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
BOOK = book_of(genai_contract())


def store_requests(store: ClickHouseStore, *spans: list) -> None:  # type: ignore[type-arg]
    rows = TableRows()
    for n, request_spans in enumerate(spans):
        batch = validate_request(export_request(request_spans), contracts=BOOK)
        assert batch.quarantined == (), [q.reason for q in batch.quarantined]
        rows.add(batch, f"receipt{n}", NOW, n)
    write_rows(store, rows)


def test_a_surface_with_events_without_ordinals_is_unknown_with_its_share(
    store: ClickHouseStore,
) -> None:
    holonograph = record_spans(
        [Evaluation("strm", 0), Evaluation("strm", 1), Sentinel("strm", 2, final=True)]
    )
    genai = record_calls([Call([Eval("relevance", score=1.0)]) for _ in range(2)], seed=4)
    only_genai = record_calls([Call([Eval("relevance", score=1.0)], agent="triage")], seed=5)
    store_requests(store, holonograph, genai)
    report = read_report(store, NOW, Selection())
    assert [s.status for s in report.streams] == ["closed-complete"]
    (surface,) = report.surfaces_without_ordinals
    assert (surface.surface_id, surface.status) == (
        "classify-intent",
        "unknown: no emission ordinals",
    )
    assert (surface.events, surface.without_ordinals, surface.share_without_ordinals) == (4, 2, 0.5)

    store_requests(store, only_genai)
    surface = read_report(
        store, NOW, Selection(surface="classify-intent")
    ).surfaces_without_ordinals
    assert [(s.events, s.without_ordinals) for s in surface] == [(5, 3)]
    assert read_report(store, NOW, Selection(stream="strm")).surfaces_without_ordinals == []
    assert read_report(store, NOW, Selection(tenant="acme")).surfaces_without_ordinals == []
    later = Selection(since=NOW, until=NOW + dt.timedelta(days=1))
    assert read_report(store, NOW, later).surfaces_without_ordinals == []


def test_the_command_says_unknown_for_genai_only_traffic(store: ClickHouseStore) -> None:
    store_requests(store, record_calls([Call([Eval("relevance", score=1.0)])]))
    args = ["completeness", "--surface", "classify-intent", "--store", store.url]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "no emission streams in the selection" in text.output
    assert "Surfaces whose delivery loss cannot be measured: 1" in text.output
    assert "classify-intent  unknown: no emission ordinals" in text.output
    assert "100.0%" in text.output
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["surfacesWithoutOrdinals"] == [
        {
            "tenantId": "default",
            "surfaceId": "classify-intent",
            "status": "unknown: no emission ordinals",
            "events": 1,
            "withoutOrdinals": 1,
            "shareWithoutOrdinals": 1.0,
        }
    ]
