"""Numbered migrations: applied once in order, recorded, and edits refused."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.migrations import (
    Migration,
    MigrationError,
    apply_migrations,
    is_current,
    load_migrations,
)
from schemas.store import QueryResult
from schemas.tuning import TUNED_TABLES

pytestmark = pytest.mark.clickhouse


def test_migrations_are_numbered_and_unique() -> None:
    migrations = load_migrations()
    versions = [m.version for m in migrations]
    assert versions == sorted(versions) and versions[0] == 1
    assert len(set(versions)) == len(versions)


def test_applying_again_is_a_no_op(store: ClickHouseStore) -> None:
    assert apply_migrations(store) == []
    recorded = store.query(
        "SELECT version, name FROM holonograph.schema_migrations ORDER BY version"
    ).rows
    assert recorded == [(m.version, m.name) for m in load_migrations()]
    tables = {r[0] for r in store.query("SHOW TABLES FROM holonograph").rows}
    assert {"evaluation_events", "evaluation_dimensions", "emission_receipts",
            "emission_records", "quarantine"} <= tables  # fmt: skip


class _Counting:
    """The real store, counting what it is asked."""

    def __init__(self, inner: ClickHouseStore) -> None:
        self.url = inner.url
        self.inner = inner
        self.queries: list[str] = []
        self.writes: list[str] = []

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self.queries.append(sql)
        return self.inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self.writes.append(sql)
        self.inner.command(sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.writes.append(f"INSERT INTO {table}")
        self.inner.insert(table, rows, column_names, settings)

    def close(self) -> None:
        pass


def test_a_current_store_costs_one_query_and_no_write(store: ClickHouseStore) -> None:
    counting = _Counting(store)
    assert apply_migrations(counting) == []
    assert len(counting.queries) == 1 and counting.writes == []


def test_a_store_missing_a_record_or_its_tuning_takes_the_full_path(
    store: ClickHouseStore,
) -> None:
    shipped = load_migrations()
    last = shipped[-1]
    store.command(
        "ALTER TABLE holonograph.schema_migrations DELETE WHERE version = {v:UInt32}"
        " SETTINGS mutations_sync = 1",
        {"v": last.version},
    )
    assert not is_current(store, shipped)
    assert is_current(store, shipped[:-1])  # what an older tree ships is still current
    # (the last migration's statements are safe to repeat: every migration's must be)
    assert [m.version for m in apply_migrations(store)] == [last.version]
    assert is_current(store, shipped)
    store.command(
        f"ALTER TABLE holonograph.{TUNED_TABLES[0]} MODIFY SETTING merge_selector_base = 5"
    )
    assert not is_current(store, shipped)
    assert apply_migrations(store) == []
    assert is_current(store, shipped)  # re-tuned


def test_a_store_without_bookkeeping_is_not_current(store: ClickHouseStore) -> None:
    store.command("DROP TABLE holonograph.schema_migrations SYNC")
    assert not is_current(store, load_migrations())


def test_an_edited_migration_is_refused(store: ClickHouseStore) -> None:
    store.command(
        "ALTER TABLE holonograph.schema_migrations UPDATE checksum = 'changed' WHERE version = 1"
        " SETTINGS mutations_sync = 1"
    )
    with pytest.raises(MigrationError, match="0001_core_tables was edited"):
        apply_migrations(store)


def test_statements_split_on_semicolons_and_drop_comments() -> None:
    migration = Migration(9, "x", "-- a comment; with a semicolon\nSELECT 1;\nSELECT ';'\n;\n")
    assert migration.statements() == ["SELECT 1", "SELECT ';'"]
