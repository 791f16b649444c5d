"""Merge tuning of the ingest tables, and servers that do not know the setting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.store import QueryResult
from schemas.tuning import MERGE_SELECTOR_BASE, TUNED_TABLES, apply_merge_tuning

pytestmark = [pytest.mark.clickhouse]


def test_migrated_ingest_tables_carry_the_merge_selector_base(store: ClickHouseStore) -> None:
    for table in TUNED_TABLES:
        ddl = str(store.query(f"SHOW CREATE TABLE holonograph.{table}").scalar())
        assert f"merge_selector_base = {MERGE_SELECTOR_BASE}" in ddl, ddl
    quarantine = str(store.query("SHOW CREATE TABLE holonograph.quarantine").scalar())
    assert "merge_selector_base" not in quarantine


class _Recording:
    """The real store, recording commands instead of running them; `older` answers as
    a server without `merge_selector_base` would."""

    def __init__(self, inner: ClickHouseStore, older: bool = False) -> None:
        self.inner = inner
        self.older = older
        self.commands: list[str] = []

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        if self.older and "merge_tree_settings" in sql:
            return QueryResult(("count()",), [(0,)])
        return self.inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self.commands.append(sql)


def test_a_server_without_the_setting_keeps_its_defaults(store: ClickHouseStore) -> None:
    older = _Recording(store, older=True)
    assert apply_merge_tuning(older) is False  # type: ignore[arg-type]
    assert older.commands == []


def test_tuned_tables_are_not_altered_again(store: ClickHouseStore) -> None:
    again = _Recording(store)  # the fixture's store was migrated, hence tuned
    assert apply_merge_tuning(again) is True  # type: ignore[arg-type]
    assert again.commands == []
