"""The scale store generator: exactly the rows, surfaces, days and id shapes asked for,
in the project's tables, and the analyses run on it unchanged."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit.scalestore import ScaleSpec, build, truth

SPEC = ScaleSpec(rows=10_000, days=30, surfaces=5, streams=5, chunk_rows=3_000)
ULID = "^[0-9A-HJKMNP-TV-Z]{26}$"
UUID4 = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"


def test_a_spec_holds_whole_events_and_known_id_schemes() -> None:
    with pytest.raises(ValueError, match="multiple of dimensions"):
        ScaleSpec(rows=10_001)
    with pytest.raises(ValueError, match="ids must be one of ulid, random"):
        ScaleSpec(rows=10, ids="sequential")  # type: ignore[arg-type]
    assert SPEC.events == 5_000 and SPEC.dimension_ids == ("correctness", "helpfulness")


@pytest.fixture(scope="module", params=["ulid", "random"])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ScaleSpec, Path, list[int]]]:
    spec = dataclasses.replace(SPEC, ids=request.param)
    path = tmp_path_factory.mktemp(f"scale-{request.param}") / "store"
    heard: list[int] = []
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        build(store, spec, lambda done, total, seconds: heard.append(done))
    finally:
        store.close()
    yield spec, path, heard


def _one(path: Path, sql: str) -> tuple[Any, ...]:
    store = open_store(f"chdb://{path}")
    try:
        row: tuple[Any, ...] = store.query(sql).rows[0]
        return row
    finally:
        store.close()


def _cli(path: Path, now: dt.datetime, *args: str) -> tuple[int, Any]:
    done = CliRunner().invoke(
        cli, [*args, "--data-dir", str(path), "--json"], obj={"clock": lambda: now}
    )
    assert done.exit_code in (0, 1), done.output
    return done.exit_code, json.loads(done.stdout)


@pytest.mark.clickhouse
def test_the_store_holds_exactly_the_rows_surfaces_and_days_asked_for(
    built: tuple[ScaleSpec, Path, list[int]],
) -> None:
    spec, path, heard = built
    assert heard == [3_000, 6_000, 9_000, 10_000]  # progress after every chunk
    events, ids, surfaces, days, first, last = _one(
        path,
        "SELECT count(), uniqExact(event_id), arraySort(groupUniqArray(surface_id)),"
        " uniqExact(toDate(timestamp)), min(timestamp), max(timestamp)"
        " FROM holonograph.evaluation_events FINAL",
    )
    assert (events, ids) == (spec.events, spec.events)
    assert tuple(surfaces) == spec.surface_ids
    assert days == spec.days
    assert first == spec.start.replace(tzinfo=None) and last < spec.end.replace(tzinfo=None)
    rows, graded, per_event = _one(
        path,
        "SELECT count(), uniqExact(event_id, dimension_id), uniqExact(event_id)"
        " FROM holonograph.evaluation_dimensions FINAL",
    )
    assert (rows, graded, per_event) == (spec.rows, spec.rows, spec.events)
    expected = truth(spec)
    evaluations, sentinels, finals = _one(
        path,
        "SELECT countIf(kind = 'evaluation'), countIf(kind = 'sentinel'), countIf(final)"
        " FROM holonograph.emission_receipts FINAL",
    )
    assert (evaluations, sentinels, finals) == (
        expected.evaluation_receipts,
        expected.sentinels,
        expected.final_streams,
    )


@pytest.mark.clickhouse
def test_event_ids_have_the_shape_asked_for(built: tuple[ScaleSpec, Path, list[int]]) -> None:
    spec, path, _ = built
    pattern = ULID if spec.ids == "ulid" else UUID4
    shaped, time_ordered = _one(
        path,
        f"SELECT countIf(match(event_id, '{pattern}')),"
        " arraySort(groupArray(event_id)) = arrayMap(x -> x.2, arraySort(groupArray((timestamp,"
        " event_id)))) FROM holonograph.evaluation_events FINAL",
    )
    assert shaped == spec.events
    assert bool(time_ordered) is (spec.ids == "ulid")


@pytest.mark.clickhouse
def test_drift_compare_and_completeness_run_on_it(
    built: tuple[ScaleSpec, Path, list[int]],
) -> None:
    spec, path, _ = built
    since = (spec.end - dt.timedelta(days=7)).isoformat().replace("+00:00", "Z")
    until = spec.end.isoformat().replace("+00:00", "Z")
    primaries, events = _one(
        path,
        "SELECT countIf(multiplex_role = 'primary'), count() FROM holonograph.evaluation_events"
        f" FINAL WHERE surface_id = 'surface-00' AND timestamp >= '{since[:-1]}'",
    )
    window = ["--since", since, "--until", until]
    _, drift = _cli(path, spec.end, "drift", "--surface", "surface-00", "--no-save", *window)
    assert drift["eventCount"] == primaries > 0
    _, compare = _cli(path, spec.end, "compare", "--surface", "surface-00", *window)
    assert compare["events"] == events and compare["multiplexCalls"] > 0
    code, completeness = _cli(path, spec.end, "completeness", "--since", spec.start.isoformat())
    expected = truth(spec)
    assert expected.missing > 0
    assert completeness["totals"]["missing"] == expected.missing and code == 1
