"""Drift says where delivery loss cannot be measured: events without emission ordinals
(OpenTelemetry GenAI evaluations, stored on no stream) are bracketed
`delivery-unmeasurable`, the report's `deliveryLoss` gives their share, and a change
point over them lists that bracket, never standing unbracketed."""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.export.request import validate_request
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.rows import TableRows, write_rows
from tests.genai_emit import Call, Eval, genai_contract, record_calls
from tests.ingest.export.test_genai import book_of
from tests.otel_emit import Dim, Evaluation, export_request, record_spans

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
RECEIVED = dt.datetime(2026, 6, 3, tzinfo=dt.UTC)
BOOK = book_of(genai_contract())
WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-03T00:00:00Z"]
HOURS = 48


def _ns(hour: int, n: int) -> int:
    return int((START + dt.timedelta(hours=hour, minutes=2 * n)).timestamp()) * 1_000_000_000


def genai_calls(hours: range, per_hour: int, rate: Any, rng: random.Random) -> list[Call]:
    """`per_hour` GenAI operations an hour, each passing with probability `rate(hour)`."""
    return [
        Call(
            [Eval("correctness", label="pass" if rng.random() < rate(hour) else "fail")],
            start_ns=_ns(hour, n),
        )
        for hour in hours
        for n in range(per_hour)
    ]


def holonograph_events(per_hour: int, rate: Any, rng: random.Random) -> list[Evaluation]:
    """`per_hour` holonograph events an hour on one emission stream, seq 0, 1, ..."""
    return [
        Evaluation(
            "strm",
            hour * per_hour + n,
            dims=[Dim("correctness", passed=rng.random() < rate(hour))],
            end_ns=_ns(hour, n) + 60_000_000_000,
        )
        for hour in range(HOURS)
        for n in range(per_hour)
    ]


def store_spans(store: ClickHouseStore, spans: list[Any]) -> None:
    rows = TableRows()
    for n, start in enumerate(range(0, len(spans), 500)):
        batch = validate_request(export_request(spans[start : start + 500]), contracts=BOOK)
        assert batch.quarantined == (), [q.reason for q in batch.quarantined]
        rows.add(batch, f"receipt{n}", RECEIVED, n)
    write_rows(store, rows)


def drift(store: ClickHouseStore, *extra: str) -> tuple[dict[str, Any], str]:
    args = ["drift", "--surface", "classify-intent", *WINDOW, "--no-save", "--store", store.url]
    as_json = CliRunner().invoke(cli, [*args, *extra, "--json"])
    assert as_json.exit_code in (0, 1), as_json.output
    text = CliRunner().invoke(cli, [*args, *extra])
    assert text.exit_code == as_json.exit_code, text.output
    return json.loads(as_json.stdout), text.output


def unmeasurable(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [w for w in report["bracketedWindows"] if w["reason"] == "delivery-unmeasurable"]


def shift(after: float, before: float = 0.85) -> Any:
    return lambda hour: after if hour >= HOURS // 2 else before


def test_genai_only_traffic_has_no_measurable_delivery_and_its_change_point_says_so(
    store: ClickHouseStore,
) -> None:
    """48 hours of GenAI evaluations, 25 an hour, the pass rate falling from 0.85 to
    0.55 at hour 24: the change point is found and bracketed `delivery-unmeasurable`,
    the window is one such bracket, and the share without ordinals is all of it."""
    calls = genai_calls(range(HOURS), 25, shift(0.55), random.Random(3))
    store_spans(store, record_calls(calls, seed=21))
    report, text = drift(store)

    assert report["deliveryLoss"] == {
        "measurable": "none",
        "events": 1200,
        "withoutOrdinals": 1200,
        "shareWithoutOrdinals": 1.0,
        "status": "unknown: no emission ordinals",
        "detail": "cannot be measured for 1200 of 1200 event(s) (100.0%): they carry no"
        " emission ordinals (OpenTelemetry GenAI evaluations), so no stream accounts for"
        " them",
    }
    (window,) = unmeasurable(report)
    assert (window["from"], window["to"]) == ("2026-06-01T00:00:00Z", "2026-06-03T00:00:00Z")
    assert window["detail"] == (
        "1200 of 1200 event(s) carry no emission ordinals: delivery loss cannot be measured"
        " for them"
    )
    assert report["changePoints"], report["notes"]
    for point in report["changePoints"]:
        assert "delivery-unmeasurable" in point["brackets"], point
    assert any("delivery-loss: cannot be measured for 1200 of 1200" in n for n in report["notes"])

    assert "delivery loss: cannot be measured for 1200 of 1200 event(s) (100.0%)" in text
    point_row = next(line for line in text.splitlines() if line.startswith("2026-06-0"))
    assert "delivery-unmeasurable" in point_row, text
    assert "delivery-unmeasurable  2026-06-01" in text, text


def test_mixed_traffic_brackets_only_the_buckets_without_ordinals(store: ClickHouseStore) -> None:
    """Holonograph events (with ordinals) every hour, 15 an hour, passing at 0.85; GenAI
    evaluations from hour 24 only, 10 an hour, passing at 0.3: the mixed series falls at
    hour 24, and only the second day is bracketed, with a quarter of the events."""
    rng = random.Random(5)
    store_spans(store, record_spans(holonograph_events(15, shift(0.85), rng)))
    calls = genai_calls(range(HOURS // 2, HOURS), 10, shift(0.3), rng)
    store_spans(store, record_calls(calls, seed=22))
    report, text = drift(store)

    delivery = report["deliveryLoss"]
    assert (delivery["measurable"], delivery["events"], delivery["withoutOrdinals"]) == (
        "part",
        960,
        240,
    )
    assert delivery["shareWithoutOrdinals"] == pytest.approx(0.25)
    assert delivery["status"] == "unknown: no emission ordinals"
    (window,) = unmeasurable(report)
    assert (window["from"], window["to"]) == ("2026-06-02T00:00:00Z", "2026-06-03T00:00:00Z")
    assert window["detail"].startswith("240 of 600 event(s) carry no emission ordinals")
    points = [p for p in report["changePoints"] if p["window"]["to"] > "2026-06-02T00:00:00Z"]
    assert points, report
    for point in points:
        assert "delivery-unmeasurable" in point["brackets"], point
    assert "delivery loss: cannot be measured for 240 of 960 event(s) (25.0%)" in text


def test_traffic_with_ordinals_is_measurable_and_not_bracketed_for_it(
    store: ClickHouseStore,
) -> None:
    """The same shift in holonograph events alone: delivery loss is measurable for all,
    nothing is bracketed `delivery-unmeasurable` and the text says nothing of it."""
    store_spans(store, record_spans(holonograph_events(25, shift(0.55), random.Random(7))))
    report, text = drift(store)

    assert report["deliveryLoss"] == {
        "measurable": "all",
        "events": 1200,
        "withoutOrdinals": 0,
        "shareWithoutOrdinals": 0.0,
        "status": None,
        "detail": "",
    }
    assert unmeasurable(report) == []
    assert report["changePoints"], report["notes"]
    assert all("delivery-unmeasurable" not in p["brackets"] for p in report["changePoints"])
    assert "delivery loss:" not in text
