"""Migration 0005 on a store created by migrations 0001-0004 and holding data: every
row is kept (as tenant `default`), an event id stored twice under the old hourly keys
becomes one event (the latest received), and a crash at any step converges when the
migration runs again."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.migrations import apply_migrations, load_migrations
from schemas.store import QueryResult, Store

pytestmark = pytest.mark.clickhouse

OLD = load_migrations()[:4]
# This file tests 0005: later migrations (columns of their own) are not its subject.
THROUGH_0005 = [m for m in load_migrations() if m.version <= 5]
CORE = ("evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine",
        "stream_status", "completeness_windows")  # fmt: skip
ANALYSIS = ("drift_change_points", "analysis_events", "variance_readings",
            "conformance_fixtures", "conformance_results")  # fmt: skip

# Rows as the code before tenancy wrote them. evt_1 was re-sent an hour later (another
# hour, another month): the old keys stored it twice; the later receipt is the truth.
SUPERSEDED = dt.datetime(2026, 1, 31, 23, 59)  # the timestamp of evt_1's older version
OLD_ROWS = [
    """INSERT INTO holonograph.evaluation_events
       (event_id, surface_id, run_mode, timestamp, emission_stream, emission_seq, ingested_at)
       VALUES ('evt_1', 'classify-intent', 'production', '2026-01-31 23:59:00', 's', 0,
               '2026-02-01 00:00:00.000'),
              ('evt_1', 'classify-intent', 'production', '2026-02-01 00:59:00', 's', 0,
               '2026-02-01 01:00:00.000'),
              ('evt_2', 'classify-intent', 'eval', '2025-06-01 12:00:00', 's', 1,
               '2025-06-01 12:00:01.000')""",
    """INSERT INTO holonograph.evaluation_dimensions
       (event_id, dimension_id, passed, surface_id, timestamp, ingested_at)
       VALUES ('evt_1', 'correctness', false, 'classify-intent', '2026-01-31 23:59:00',
               '2026-02-01 00:00:00.000'),
              ('evt_1', 'correctness', true, 'classify-intent', '2026-02-01 00:59:00',
               '2026-02-01 01:00:00.000'),
              ('evt_2', 'tone', NULL, 'classify-intent', '2025-06-01 12:00:00',
               '2025-06-01 12:00:01.000')""",
    """INSERT INTO holonograph.emission_receipts
       (emission_stream, emission_seq, receipt_id, kind, event_id, event_time, received_at)
       VALUES ('s', 0, 'r1', 'evaluation', 'evt_1', '2026-01-31 23:59:00', '2026-02-01 00:00:00'),
              ('s', 0, 'r2', 'evaluation', 'evt_1', '2026-02-01 00:59:00', '2026-02-01 01:00:00'),
              ('s', 1, 'r3', 'evaluation', 'evt_2', '2025-06-01 12:00:00', '2025-06-01 12:00:01'),
              ('s', 2, 'r3', 'sentinel', '', '2025-06-01 12:00:00', '2025-06-01 12:00:01')""",
    """INSERT INTO holonograph.quarantine (quarantine_id, received_at, reason, span_name)
       VALUES ('q1', '2026-02-01 00:00:00', 'holonograph.run_mode: missing',
               'holonograph.evaluation')""",
    """INSERT INTO holonograph.stream_status (emission_stream, status, last_seq, version)
       VALUES ('s', 'open', 2, 7)""",
    """INSERT INTO holonograph.completeness_windows
       (bucket, scope, emission_stream, bucket_start, offered, delivered, version)
       VALUES ('hour', 'stream', 's', '2016-01-01 00:00:00', 3, 3, 7),
              ('hour', 'stream', 's', '2026-02-01 00:00:00', 1, 1, 7)""",
    """INSERT INTO holonograph.completeness_refreshes (version, mode, now, computed_at)
       VALUES (7, 'full', '2026-02-01 02:00:00', '2026-02-01 02:00:00')""",
    """INSERT INTO holonograph.drift_change_points (run_id, surface_id, kind, run_at)
       VALUES ('drift_1', 'classify-intent', 'change_point', '2026-02-02 00:00:00')""",
    """INSERT INTO holonograph.analysis_events (event_id, kind, created_at)
       VALUES ('evt_a', 'drift-run', '2026-02-02 00:00:00')""",
    """INSERT INTO holonograph.variance_readings (event_id, surface_id, created_at)
       VALUES ('evt_r', 'classify-intent', '2026-02-02 00:00:00')""",
    """INSERT INTO holonograph.conformance_fixtures (record_id, fixture_id, version, action)
       VALUES ('apv_1', 'fx', 1, 'approved')""",
    """INSERT INTO holonograph.conformance_results (check_id, fixture_id, checked_at)
       VALUES ('chk_1', 'fx', '2026-02-02 00:00:00')""",
]


def old_store(store: ClickHouseStore) -> dict[str, list[tuple[Any, ...]]]:
    """Reset `store` to 0001-0004 holding OLD_ROWS; return every table's rows as read
    before the migration (in a stable order, without FINAL)."""
    store.command("DROP DATABASE IF EXISTS holonograph SYNC")
    apply_migrations(store, OLD)
    for statement in OLD_ROWS:
        store.command(statement)
    return {table: _rows(store, table) for table in CORE + ANALYSIS}


def _rows(store: Store, table: str, columns: str = "*") -> list[tuple[Any, ...]]:
    return sorted(store.query(f"SELECT {columns} FROM holonograph.{table}").rows, key=repr)


def final_state(store: Store) -> dict[str, Any]:
    """What the migrated store holds: layouts and every row (FINAL), tenants included."""
    layouts = store.query(
        "SELECT name, engine, sorting_key, partition_key FROM system.tables"
        " WHERE database = 'holonograph' ORDER BY name"
    ).rows
    rows = {
        table: sorted(store.query(f"SELECT * FROM holonograph.{table} FINAL").rows, key=repr)
        for table in CORE + ANALYSIS
    }
    records = store.query(
        "SELECT * FROM holonograph.emission_records ORDER BY tenant_id, emission_stream,"
        " emission_seq"
    ).rows
    migrations = store.query(
        "SELECT version FROM holonograph.schema_migrations ORDER BY version"
    ).rows
    return {"layouts": layouts, "rows": rows, "records": records, "migrations": migrations}


def test_migration_keeps_every_row_as_tenant_default(store: ClickHouseStore) -> None:
    before = old_store(store)
    assert [m.version for m in apply_migrations(store, THROUGH_0005)] == [5]
    keys = {
        name: key
        for name, key in store.query(
            "SELECT name, sorting_key FROM system.tables WHERE database = 'holonograph'"
        ).rows
    }
    assert keys["evaluation_events"] == "tenant_id, event_id"
    assert keys["evaluation_dimensions"] == "tenant_id, event_id, dimension_id"
    assert keys["emission_receipts"] == "tenant_id, emission_stream, emission_seq, receipt_id"
    assert keys["quarantine"] == "tenant_id, quarantine_id"
    assert keys["stream_status"] == "tenant_id, emission_stream"
    assert keys["completeness_windows"].startswith("tenant_id, ")
    staging = store.query(
        "SELECT count() FROM system.tables WHERE database = 'holonograph' AND name LIKE '%__v5'"
    ).scalar()
    assert staging == 0

    for table in CORE + ANALYSIS:
        old_columns = ", ".join(
            name for (name,) in store.query(
                "SELECT name FROM system.columns WHERE database = 'holonograph'"
                " AND table = {t:String} AND name NOT IN ('tenant_id', 'ingest_version')"
                " ORDER BY position",
                {"t": table},
            ).rows
        )  # fmt: skip
        kept = before[table]
        if table in ("evaluation_events", "evaluation_dimensions"):  # one row per event now
            kept = [r for r in kept if SUPERSEDED not in r]
        assert _rows(store, table, old_columns) == kept, table
        tenants = store.query(f"SELECT DISTINCT tenant_id FROM holonograph.{table}").rows
        assert tenants == [("default",)], table

    # Read as the code reads now: evt_1 is one event, its later receipt wins.
    events = store.query(
        "SELECT event_id, timestamp FROM holonograph.evaluation_events FINAL ORDER BY event_id"
    ).rows
    assert [(e, str(t)) for e, t in events] == [
        ("evt_1", "2026-02-01 00:59:00"),
        ("evt_2", "2025-06-01 12:00:00"),
    ]
    grades = store.query(
        "SELECT event_id, passed FROM holonograph.evaluation_dimensions FINAL ORDER BY event_id"
    ).rows
    assert grades == [("evt_1", True), ("evt_2", None)]
    records = store.query(
        "SELECT tenant_id, emission_seq, received_count FROM holonograph.emission_records"
        " ORDER BY emission_seq"
    ).rows
    assert records == [("default", 0, 2), ("default", 1, 1), ("default", 2, 1)]
    assert apply_migrations(store, THROUGH_0005) == []


class Crash(RuntimeError):
    pass


class CrashingStore:
    """Runs the first `at` writes (commands and inserts) of the store, then crashes
    before the next one: the process died between two steps."""

    def __init__(self, inner: Store, at: int | None = None) -> None:
        self._inner = inner
        self.url = inner.url
        self._at = at
        self.writes = 0

    def _step(self) -> None:
        if self._at is not None and self.writes >= self._at:
            raise Crash(f"crashed before write {self.writes}")
        self.writes += 1

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._step()
        self._inner.command(sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._step()
        self._inner.insert(table, rows, column_names, settings)

    def close(self) -> None:
        self._inner.close()


def test_rerunning_after_a_crash_at_any_step_converges(store: ClickHouseStore) -> None:
    old_store(store)
    counting = CrashingStore(store)
    apply_migrations(counting, THROUGH_0005)
    expected = final_state(store)
    steps = counting.writes
    assert steps > 6 * 5  # six rebuilds of five steps, the view, the columns, the record
    for at in range(steps):
        old_store(store)
        with pytest.raises(Crash):
            apply_migrations(CrashingStore(store, at), THROUGH_0005)
        apply_migrations(store, THROUGH_0005)
        assert final_state(store) == expected, f"crash before write {at}"


def test_an_interrupted_copy_is_redone_not_added_to(store: ClickHouseStore) -> None:
    """A crash in the middle of a copy leaves some rows in the staging table."""
    old_store(store)
    apply_migrations(CrashingStore(store))
    expected = final_state(store)
    old_store(store)
    migration = load_migrations()[4]
    create = migration.statements()[0]
    assert create.startswith("CREATE TABLE IF NOT EXISTS holonograph.evaluation_events__v5")
    store.command(create)
    store.command(
        "INSERT INTO holonograph.evaluation_events__v5 (event_id, surface_id, ingested_at)"
        " VALUES ('evt_half_copied', 'x', now64(3))"
    )
    apply_migrations(store)
    assert final_state(store) == expected
