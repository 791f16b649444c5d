"""Migration 0016 (the event layout by placement, docs/decisions/0014): on a seeded
store of the release before it, with time-ordered or random ids and re-sends that
move events to other hours and surfaces, every analysis answers exactly as before;
a crash at any step converges when the migration runs again; and a surface-and-window
read with random ids reads its window, not the store (ClickHouse's own counts)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from processors.compare.job import JOB as COMPARE
from processors.completeness.job import JOB as COMPLETENESS
from processors.conformance.check import JOB as CHECK
from processors.drift.job import JOB as DRIFT
from processors.jobs import Job
from processors.report.job import JOB as REPORT
from processors.series.cells import SERIES_FILTER, SeriesQuery
from processors.topology.bootstrap import JOB as BOOTSTRAP
from schemas.conformance import Fixture
from schemas.jsoncodec import plain
from schemas.migrations import apply_migrations
from schemas.store import Store
from tests.schemas.layout_support import START, Unplaced, seed_old_store, strip_placement
from tests.schemas.test_migration_tenancy import Crash, CrashingStore

pytestmark = pytest.mark.clickhouse

NOW = START + dt.timedelta(days=13)
SINCE = START + dt.timedelta(days=5, hours=7, minutes=20)  # mid-hour, as a user asks
UNTIL = START + dt.timedelta(days=12)

FIXTURE = {
    "fixtureId": "fx-layout",
    "ruleId": "correct-01",
    "description": "graded correct",
    "enforceability": "trace-enforceable",
    "appliesTo": {"surfaceId": "s1"},
    "assertions": [{"kind": "dimension-passed", "dimension": "correctness"}],
}

# Every analysis the issue names, as its job runs it (read-only, nothing persisted).
ANALYSES: list[tuple[str, Job[Any, Any], dict[str, Any]]] = [
    ("drift", DRIFT, {"surface_id": "s0", "since": SINCE, "until": UNTIL,
                      "permutations": 49, "seed": 3}),
    ("drift-day", DRIFT, {"surface_id": "s2", "since": START, "until": UNTIL,
                          "bucket": "day", "permutations": 49, "seed": 3}),
    ("compare", COMPARE, {"surface_id": "s0", "since": SINCE, "until": UNTIL,
                          "by": "light-source"}),
    ("completeness", COMPLETENESS, {"surface_id": "s1", "since": SINCE, "until": UNTIL}),
    ("conformance", CHECK, {"fixture": Fixture.model_validate(FIXTURE), "since": SINCE,
                            "until": UNTIL, "limit": 1000}),
    ("topology", BOOTSTRAP, {"surface_id": "s1", "since": SINCE, "until": UNTIL}),
    ("report", REPORT, {"since": SINCE, "until": UNTIL, "as_of": NOW}),
]  # fmt: skip


# Fresh per run (a random id), not part of an answer.
VOLATILE = frozenset({"runId", "checkId", "reportId"})


def stable(document: Any) -> Any:
    """`document` without per-run ids, its floats to 12 significant digits: a float sum
    in ClickHouse depends on the order rows meet it (the layout's, the threads'), so
    1e-3 summed 558 times is 0.5580000000000004 one time and ...3 another."""
    if isinstance(document, dict):
        return {k: stable(v) for k, v in document.items() if k not in VOLATILE}
    if isinstance(document, list):
        return [stable(v) for v in document]
    if isinstance(document, float):
        return float(f"{document:.12g}")
    return document


def answers(store: Store) -> dict[str, Any]:
    """Each analysis's JSON document on `store`."""
    out = {}
    for name, job, fields in ANALYSES:
        request = job.request.model_validate(fields).for_tenant("default")
        out[name] = stable(plain(job.run(store, request, lambda: NOW).to_json()))
    return out


@pytest.mark.parametrize("ids", ["ulid", "random"])
def test_every_analysis_answers_as_before_the_migration(store: ClickHouseStore, ids: str) -> None:
    seed_old_store(store, ids)
    before = answers(Unplaced(store))  # the queries as they were, on the old layout
    assert before["drift"]["eventCount"] > 0 and before["conformance"]["eventsChecked"] > 0

    assert [m.version for m in apply_migrations(store)] == [16]
    keys = dict(
        store.query(
            "SELECT name, sorting_key FROM system.tables WHERE database = 'holonograph'"
            " AND name IN ('evaluation_events', 'evaluation_dimensions')"
        ).rows
    )
    assert keys == {
        "evaluation_events": "tenant_id, placed_surface_id, placed_hour, event_id",
        "evaluation_dimensions": (
            "tenant_id, placed_surface_id, placed_hour, event_id, dimension_id"
        ),
    }
    # Re-sends moved events to other hours and surfaces: listed as moves, one key each.
    moved = store.query(
        "SELECT count() FROM (SELECT DISTINCT event_id FROM holonograph.event_moves)"
    ).scalar()
    assert moved > 200
    assert store.query(
        "SELECT count() = uniqExact(event_id) FROM holonograph.evaluation_events FINAL"
    ).scalar()
    after = answers(store)
    for name, _, _ in ANALYSES:
        assert after[name] == before[name], _first_difference(after[name], before[name])
    assert answers(Unplaced(store)) == before  # the predicate narrows reads, not answers


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {a!r} != {b!r}"


def test_a_resend_to_another_surface_and_hour_is_read_where_it_now_is(
    store: ClickHouseStore,
) -> None:
    """The pinned placement keeps one key per event; the moves list keeps it found."""
    seed_old_store(store, "random")
    apply_migrations(store)
    # Event 1 (kind 2) was re-sent on s2; event 0 (kind 1) an hour and a day later.
    rows = store.query(
        "SELECT surface_id, placed_surface_id, toStartOfHour(timestamp) = placed_hour"
        " FROM holonograph.evaluation_events FINAL WHERE surface_id != placed_surface_id"
        " LIMIT 1"
    ).rows
    assert rows and rows[0][0] != rows[0][1]
    query = SeriesQuery("s2", START, UNTIL, tenant_id="default")
    sql = (
        "SELECT count() FROM holonograph.evaluation_events FINAL"
        f" WHERE {SERIES_FILTER} AND placed_surface_id != 's2'"
    )
    # Events placed elsewhere but now on s2 are taken, and only through the moves.
    found = int(store.query(sql, query.params()).scalar())
    assert found > 0
    assert int(store.query(strip_placement(sql), query.params()).scalar()) == found


def final_state(store: Store) -> dict[str, Any]:
    tables = ("evaluation_events", "evaluation_dimensions", "emission_receipts")
    rows = {
        t: sorted(store.query(f"SELECT * FROM holonograph.{t} FINAL").rows, key=repr)
        for t in tables
    }
    moves = sorted(store.query("SELECT DISTINCT * FROM holonograph.event_moves").rows, key=repr)
    placements = sorted(
        store.query(
            "SELECT tenant_id, event_id, argMin(agent_id, _block_number),"
            " argMinIf((placed_surface_id, placed_hour), _block_number, placed_surface_id != '')"
            " FROM holonograph.event_owners GROUP BY tenant_id, event_id"
        ).rows,
        key=repr,
    )
    layouts = store.query(
        "SELECT name, engine, sorting_key FROM system.tables WHERE database = 'holonograph'"
        " ORDER BY name"
    ).rows
    views = store.query(
        "SELECT name, as_select FROM system.tables WHERE database = 'holonograph'"
        " AND engine = 'MaterializedView' ORDER BY name"
    ).rows
    return {"rows": rows, "moves": moves, "placements": placements, "layouts": layouts,
            "views": views}  # fmt: skip


def test_rerunning_after_a_crash_at_any_step_converges(store: ClickHouseStore) -> None:
    seed_old_store(store, "random", events=600)
    counting = CrashingStore(store)
    apply_migrations(counting)
    expected = final_state(store)
    steps = counting.writes
    assert steps > 15  # the columns, placements, two relayouts of four, views, backfills
    for at in range(steps):
        seed_old_store(store, "random", events=600)
        with pytest.raises(Crash):
            apply_migrations(CrashingStore(store, at))
        apply_migrations(store)
        assert final_state(store) == expected, f"crash before write {at}"


def _rows_read_limit(store: Store, sql: str, params: dict[str, Any], limit: int) -> bool:
    """Whether ClickHouse runs `sql` reading at most `limit` rows (its own count,
    `max_rows_to_read`, checked as it reads)."""
    try:
        store.query(f"{sql} SETTINGS max_rows_to_read = {limit}", params)
    except Exception as err:
        assert "TOO_MANY_ROWS" in str(err) or "Limit for rows" in str(err), err
        return False
    return True


def _estimate(store: Store, sql: str, params: dict[str, Any]) -> int:
    """The rows ClickHouse plans to read from the dimension table (EXPLAIN ESTIMATE)."""
    rows = store.query(f"EXPLAIN ESTIMATE {sql}", params).dicts()
    return sum(int(r["rows"]) for r in rows if r["table"] == "evaluation_dimensions")


def test_a_window_read_with_random_ids_reads_its_window_not_the_store(
    store: ClickHouseStore,
) -> None:
    # 90 days on 20 surfaces; one surface's 7 days is ~0.4 % of the rows.
    seed_old_store(store, "random", events=150_000, days=90, surfaces=20)
    total = int(store.query("SELECT count() FROM holonograph.evaluation_dimensions").scalar())
    query = SeriesQuery(
        "s3", START + dt.timedelta(days=60), START + dt.timedelta(days=67), tenant_id="default"
    )
    sql = (
        "SELECT count(), countIf(passed) FROM holonograph.evaluation_dimensions FINAL"
        f" WHERE {SERIES_FILTER}"
    )
    params = query.params()
    answer = store.query(strip_placement(sql), params).rows
    window = int(answer[0][0])
    assert 0 < window < total / 100
    limit = total // 10
    # The old layout: random ids give the skip indexes nothing to prune.
    assert not _rows_read_limit(store, strip_placement(sql), params, limit)
    assert _estimate(store, strip_placement(sql), params) == total

    apply_migrations(store)
    assert store.query(sql, params).rows == answer
    assert _rows_read_limit(store, sql, params, limit)
    estimate = _estimate(store, sql, params)  # whole granules (8,192 rows) around it
    assert estimate <= 3 * 8192 < total / 10, (estimate, total)
