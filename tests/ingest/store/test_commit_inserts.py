"""The commit's inserts (`ingest.store.rows.write_rows`: no merge of the block at insert
time, chDB's insert on one thread) store the rows the inserts stored before, on the
fuzz corpus, the wire fixture and ownership conflicts: every table read FINAL, and
every row once the merges have run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.request import validate_request
from ingest.store import owners
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import Submission, Writer
from ingest.store.rows import (
    DIMENSION_PLACE,
    EVENT_PLACE,
    TableRows,
    placed,
    placed_columns,
    write_rows,
)
from schemas.store import Store
from tests.ingest.handoff.test_smalllog import AT, _corpus

pytestmark = [pytest.mark.clickhouse]

TABLES = (
    "evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine",
    "event_owners", "stream_owners", "event_moves",
)  # fmt: skip
PLAIN = frozenset({"event_owners", "stream_owners"})  # MergeTree: every row is read
# Each commit holds this many requests, so some hold two versions of one event id.
PER_COMMIT = 3


class _Before:
    """The store as the commit wrote to it before: the block merged at insert time,
    chDB's insert pipeline on its default threads."""

    def __init__(self, inner: ClickHouseStore) -> None:
        self._inner = inner
        self.url = inner.url

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        before = {**(settings or {}), "optimize_on_insert": 1, "max_threads": 0}
        self._inner.insert(table, rows, column_names, before)


def _commit_all(store: Store, requests: list[Any]) -> None:
    for start in range(0, len(requests), PER_COMMIT):
        submissions = []
        for n, request in enumerate(requests[start : start + PER_COMMIT]):
            parsed = parse_protobuf(request.SerializeToString())
            batch = fast_batch(parsed) or validate_request(parsed)
            submissions.append(Submission(batch, Writer(None), AT, n))
        checked = owners.check(store, submissions, verify=False)
        rows = TableRows(placements=checked.placements)
        for n, batch in enumerate(checked):
            receipt = f"receipt-{start + n:04d}"
            if isinstance(batch, FastBatch):
                batch.add_to(rows, receipt, AT, n)
            else:
                rows.add(batch, receipt, AT, n)
        write_rows(store, rows)


def _dump(store: ClickHouseStore, final: bool) -> dict[str, list[tuple[Any, ...]]]:
    if not final:
        for table in TABLES:
            store.command(f"OPTIMIZE TABLE holonograph.{table} FINAL")
    out = {}
    for table in TABLES:
        modifier = " FINAL" if final and table not in PLAIN else ""
        out[table] = sorted(
            store.query(f"SELECT * FROM holonograph.{table}{modifier}").rows, key=repr
        )
    return out


def test_the_commit_stores_the_rows_it_stored_before(store: ClickHouseStore) -> None:
    corpus = _corpus()
    dumps = {}
    for name, writer in (("before", _Before(store)), ("now", store)):
        _commit_all(writer, corpus)
        dumps[name] = (_dump(store, final=True), _dump(store, final=False))
        for table in TABLES:
            store.command(f"TRUNCATE TABLE holonograph.{table}")
    before, now = dumps["before"], dumps["now"]
    assert before[0]["evaluation_events"], "the corpus stored nothing"
    assert before[0]["quarantine"], "the corpus quarantined nothing"
    assert before[0]["evaluation_dimensions"] and before[0]["emission_receipts"]
    for final in (0, 1):
        for table in TABLES:
            assert now[final][table] == before[final][table], (table, final)


def test_two_versions_in_one_insert_are_both_written_and_read_as_one(
    store: ClickHouseStore,
) -> None:
    """What the setting changes, and only until the merges: both versions of an event id
    sent in one commit are in its part, FINAL reads the later one."""
    corpus = _corpus()
    resent = corpus[-3:-1]  # one event id, sent twice: a commit of both
    _commit_all(store, resent)
    count = "SELECT count() FROM holonograph.evaluation_events"
    ((once,),) = store.query(count + " FINAL").rows
    assert once > 0
    assert store.query(count).rows == [(2 * once,)]
    assert store.query(
        "SELECT uniqExact(receipt_id) FROM holonograph.emission_receipts FINAL"
    ).rows == [(2,)]


def test_placed_columns_are_the_placed_rows_column_by_column() -> None:
    """With the commit's placements, without them, and for an id they do not hold."""
    rows = TableRows()
    for n, request in enumerate(_corpus()):
        parsed = parse_protobuf(request.SerializeToString())
        rows.add(validate_request(parsed), f"r{n}", AT, n)
    assert rows.events and rows.dimensions
    first = rows.events[0]
    placements = {(first[0], first[1]): ("elsewhere", 3600)}
    for table_rows, at in ((rows.events, EVENT_PLACE), (rows.dimensions, DIMENSION_PLACE)):
        for given in ({}, placements):
            expected = [list(column) for column in zip(*placed(table_rows, at, given), strict=True)]
            columns = list(zip(*table_rows, strict=True))
            got = [list(column) for column in placed_columns(columns, at, given)]
            assert got == expected
    event_columns = list(zip(*rows.events, strict=True))
    assert placed_columns(event_columns, EVENT_PLACE, placements)[-2][0] == "elsewhere"


def test_shared_rows_are_the_rows_add_to_builds_in_the_same_order() -> None:
    """A commit's hot-path rows handed over as they are (`FastBatch.add_shared`) are, as
    rows and column by column, the rows `add_to` builds, after the rows built whole
    before them; rows appended after shared ones keep their place too."""
    parsed = [parse_protobuf(r.SerializeToString()) for r in _corpus()]
    batches = [fast_batch(p) or validate_request(p) for p in parsed]
    fast = [b for b in batches if isinstance(b, FastBatch)]
    models = [b for b in batches if not isinstance(b, FastBatch) and b.events]
    assert len(fast) >= 2 and models
    whole, shared, later = TableRows(), TableRows(), TableRows()
    whole.add(models[0], "m0", AT, 0)
    shared.add(models[0], "m0", AT, 0)
    for n, batch in enumerate(fast, 1):
        batch.add_to(whole, f"r{n}", AT, n)
        batch.add_shared(shared, f"r{n}", AT, n)
    for table in ("events", "dimensions"):  # rows built whole, then shared ones
        expected = [list(c) for c in zip(*getattr(shared.expanded(), table), strict=True)]
        assert [list(c) for c in shared.table_columns(table)] == expected
    whole.add(models[-1], "m1", AT, 99)
    later.add(models[-1], "m1", AT, 99)
    shared.extend(later)
    expanded = shared.expanded()
    for table in ("events", "dimensions", "receipts", "quarantine"):
        assert getattr(expanded, table) == getattr(whole, table), table
    assert shared.row_count == whole.row_count
    assert not shared.shared and expanded is shared  # expanded once rows followed
    again = TableRows()
    for n, batch in enumerate(fast, 1):
        batch.add_shared(again, f"r{n}", AT, n)
    for table in ("events", "dimensions"):
        rows = getattr(again.expanded(), table)
        expected = [list(column) for column in zip(*rows, strict=True)]
        assert [list(column) for column in again.table_columns(table)] == expected
