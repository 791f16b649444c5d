"""The sink's inserts under a batch's deduplication token (`with_token`): on our own
store the token view keeps the column-wise inserts and stores the rows the row-wise
wrapper stored before (the fuzz corpus, twice over: nothing is deduplicated by the
tables' own settings), and an identical retried block under one token is dropped where
insert deduplication is on, a block under another token is not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.request import validate_request
from ingest.sink.batch import DedupTokenStore, with_token
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.rows import TableRows, write_rows
from schemas.store import QueryResult, Store
from tests.ingest.handoff.test_smalllog import AT, _corpus

pytestmark = [pytest.mark.clickhouse]

TABLES = ("evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine")
PROBE = "holonograph.token_probe"


def _rows() -> TableRows:
    rows = TableRows()
    for n, request in enumerate(_corpus()):
        parsed = parse_protobuf(request.SerializeToString())
        batch = fast_batch(parsed) or validate_request(parsed)
        if isinstance(batch, FastBatch):
            batch.add_to(rows, f"receipt-{n:04d}", AT, n)
        else:
            rows.add(batch, f"receipt-{n:04d}", AT, n)
    return rows


def _dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: sorted(store.query(f"SELECT * FROM holonograph.{table}").rows, key=repr)
        for table in TABLES
    }


class Columns:
    """Counts the column-wise inserts `store` takes (columns, or tables built as Arrow's
    where it takes them: in-process chDB)."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.calls: list[str] = []
        columns, arrow = store.insert_columns, store.insert_arrow

        def counted(table: str, data: Sequence[Sequence[Any]], *args: Any) -> None:
            self.calls.append(table)
            columns(table, data, *args)

        def counted_arrow(table: str, data: Any, *args: Any) -> None:
            self.calls.append(table)
            arrow(table, data, *args)

        store.insert_columns = counted  # type: ignore[method-assign]
        store.insert_arrow = counted_arrow  # type: ignore[method-assign]


def test_the_token_view_inserts_column_wise_the_rows_the_wrapper_stored(
    store: ClickHouseStore,
) -> None:
    rows = _rows()
    assert rows.events and rows.dimensions
    write_rows(DedupTokenStore(store, "before"), rows)  # the rows path, as before
    before = _dump(store)
    view = with_token(store, "after")
    assert isinstance(view, ClickHouseStore)
    spy = Columns(view)
    write_rows(view, rows)
    assert spy.calls == [
        "holonograph.evaluation_events",
        "holonograph.evaluation_dimensions",
        "holonograph.emission_receipts",
    ]
    after = _dump(store)
    for table in TABLES:  # the same rows again: each now twice
        assert after[table] == sorted(before[table] * 2, key=repr), table


def test_a_retried_block_under_one_token_is_dropped_under_another_kept(
    store: ClickHouseStore,
) -> None:
    store.command(
        f"CREATE TABLE {PROBE} (k UInt32) ENGINE = MergeTree ORDER BY k"
        " SETTINGS non_replicated_deduplication_window = 100"
    )
    first = with_token(store, "batch-1")
    first.insert_columns(PROBE, [[1, 2, 3]], ["k"])
    with_token(store, "batch-1").insert_columns(PROBE, [[1, 2, 3]], ["k"])  # a retry
    first.insert(PROBE, [[1], [2], [3]], ["k"])  # rows, same block, same token
    assert store.query(f"SELECT count() FROM {PROBE}").rows == [(3,)]
    with_token(store, "batch-2").insert_columns(PROBE, [[1, 2, 3]], ["k"])
    store.insert_columns(PROBE, [[1, 2, 3]], ["k"])  # the store itself: no token
    assert store.query(f"SELECT count() FROM {PROBE}").rows == [(9,)]


class Recording:
    """Another store: what its inserts were given."""

    url = "http://recording.invalid:8123"

    def __init__(self) -> None:
        self.settings: list[Mapping[str, Any] | None] = []

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        raise AssertionError("not queried")

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        raise AssertionError("not commanded")

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings.append(settings)

    def close(self) -> None:
        pass


def test_another_store_is_wrapped_with_the_token_per_table() -> None:
    inner = Recording()
    wrapped = with_token(inner, "abc")
    assert isinstance(wrapped, DedupTokenStore)
    wrapped.insert("holonograph.quarantine", [[1]], ["k"], {"optimize_on_insert": 0})
    assert inner.settings == [
        {"insert_deduplication_token": "abc:holonograph.quarantine", "optimize_on_insert": 0}
    ]
