"""Numbered migrations: applied once in order, recorded, and edits refused."""

from __future__ import annotations

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.migrations import Migration, MigrationError, apply_migrations, load_migrations

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
