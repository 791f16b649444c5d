"""`schemas.tables` agrees with the migrations: every table it names exists, and a
writer's columns are exactly the table's columns (those without a default)."""

from __future__ import annotations

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas import tables
from schemas.tables import DATABASE, EVALUATION_EVENTS, Table

pytestmark = pytest.mark.clickhouse

TABLES = [value for value in vars(tables).values() if isinstance(value, Table)]


def _columns(store: ClickHouseStore, table: Table) -> dict[str, str]:
    """Column name -> its default kind ('' when a row must give it)."""
    rows = store.query(
        "SELECT name, default_kind FROM system.columns"
        " WHERE database = {db:String} AND table = {t:String}",
        {"db": DATABASE, "t": table.name},
    ).rows
    return {str(name): str(kind) for name, kind in rows}


def test_every_table_named_is_one_the_migrations_create(store: ClickHouseStore) -> None:
    assert len(TABLES) >= 14
    for table in TABLES:
        assert _columns(store, table), f"{table.qualified} does not exist"


@pytest.mark.parametrize("table", [t for t in TABLES if t.columns], ids=lambda t: t.name)
def test_a_writer_writes_every_column_without_a_default(
    store: ClickHouseStore, table: Table
) -> None:
    columns = _columns(store, table)
    assert set(table.columns) <= set(columns), set(table.columns) - set(columns)
    required = {name for name, kind in columns.items() if not kind}
    assert required <= set(table.columns), required - set(table.columns)
    assert len(set(table.columns)) == len(table.columns)


def test_pick_refuses_a_column_the_table_does_not_have() -> None:
    assert EVALUATION_EVENTS.pick("tenant_id", "event_id") == ("tenant_id", "event_id")
    with pytest.raises(ValueError, match=r"holonograph\.evaluation_events has no column nope"):
        EVALUATION_EVENTS.pick("event_id", "nope")
    assert EVALUATION_EVENTS.column_list("event_id", "tenant_id") == "event_id, tenant_id"
    assert EVALUATION_EVENTS.qualified == "holonograph.evaluation_events"
