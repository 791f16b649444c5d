"""Column-wise inserts into in-process chDB go as Arrow tables (`ingest.store.arrow`) and
store what clickhouse-connect's Native rows store: the fuzz corpus, the bench payload
(hot-path rows, shared) and rows at the edges of every type, each table read back
whole, its views' tables too."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.request import validate_request
from ingest.store import owners
from ingest.store.arrow import ArrowValueError, arrow_schema
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.errors import is_permanent
from ingest.store.owners import Submission, Writer
from ingest.store.rows import DIMENSION_PLACE, EVENT_PLACE, TableRows, placed_columns, ticks_ns
from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from tests.ingest.handoff.test_smalllog import AT, _corpus

pytestmark = [
    pytest.mark.clickhouse,
    pytest.mark.chdb_only("the Arrow insert is in-process chDB's; a server takes Native"),
]

DRAINED = (EVALUATION_EVENTS, EVALUATION_DIMENSIONS, EMISSION_RECEIPTS)
READ = (*(t.name for t in DRAINED), "event_owners", "event_moves")
U64 = 2**64 - 1


def _rows(store: ClickHouseStore, requests: Sequence[Any]) -> TableRows:
    """One commit's rows of `requests`, as the log's commit builds them (hot-path batches
    shared, the others' rows whole)."""
    submissions = []
    for n, request in enumerate(requests):
        parsed = parse_protobuf(
            request if isinstance(request, bytes) else request.SerializeToString()
        )
        submissions.append(
            Submission(fast_batch(parsed) or validate_request(parsed), Writer(None), AT, n)
        )
    checked = owners.check(store, submissions, verify=False)
    rows = TableRows(placements=checked.placements)
    for n, batch in enumerate(checked):
        if isinstance(batch, FastBatch):
            batch.add_shared(rows, f"receipt-{n:04d}", AT, n)
        else:
            rows.add(batch, f"receipt-{n:04d}", AT, n)
    return rows


def _columns(rows: TableRows) -> dict[str, list[list[Any]]]:
    """Each drained table's placed columns, as `write_rows` sends them."""
    out = {}
    for table, name, at in (
        (EVALUATION_EVENTS, "events", EVENT_PLACE),
        (EVALUATION_DIMENSIONS, "dimensions", DIMENSION_PLACE),
    ):
        out[table.name] = [
            list(c) for c in placed_columns(rows.table_columns(name), at, rows.placements)
        ]
    out[EMISSION_RECEIPTS.name] = [list(c) for c in zip(*rows.receipts, strict=True)]
    return out


def _edges(columns: dict[str, list[list[Any]]]) -> dict[str, list[list[Any]]]:
    """`columns` with one row more per table, every value at an edge of its type."""
    low, high = ticks_ns(dt.datetime(1900, 1, 1, 0, 0, 0, 1)), ticks_ns(dt.datetime(2262, 4, 11))
    texts = ["", "\x00nul", "émoji 🧪", "x" * 5000]
    for name, table_columns in columns.items():
        table = next(t for t in DRAINED if t.name == name)
        for position, column in enumerate(table_columns):
            value = column[0]
            column_name = table.columns[position]
            if isinstance(value, bool) or value is None:
                edge: Any = value
            elif isinstance(value, int):
                edge = (
                    low
                    if column_name in ("timestamp", "event_time")
                    else (U64 if column_name in ("ingest_version", "emission_seq") else value)
                )
            elif isinstance(value, float):
                edge = -0.0
            elif isinstance(value, str):
                edge = (
                    texts[position % len(texts)]
                    if column_name not in ("run_mode", "kind")
                    else value
                )
            elif isinstance(value, dict):
                edge = (
                    {"": "", "k\x00": "é"}
                    if all(isinstance(v, str) for v in value.values())
                    else {"m": ["", "🧪"], "n": []}
                )
            elif isinstance(value, list):
                edge = ["", "é", "x" * 300]
            else:
                edge = value
            column.append(edge)
        if name == EVALUATION_EVENTS.name:
            at = table.columns.index("latency_ms")
            table_columns[at][-1] = None  # a null of a Nullable column
            table_columns[table.columns.index("timestamp")][-2] = high
    return columns


def _dump(store: ClickHouseStore) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted(store.query(f"SELECT * FROM holonograph.{t}").rows, key=repr) for t in READ}


def _truncate(store: ClickHouseStore) -> None:
    for table in READ:
        store.command(f"TRUNCATE TABLE holonograph.{table}")


@pytest.mark.parametrize("source", ["corpus", "payload"])
def test_arrow_columns_store_what_native_rows_store(store: ClickHouseStore, source: str) -> None:
    if source == "corpus":
        requests: list[Any] = _corpus()
    else:
        factory = RequestFactory(PayloadSpec(batch=64, tag="arrow000"))
        requests = [factory.body(n) for n in range(3)]
    columns = _edges(_columns(_rows(store, requests)))
    dumps = []
    for as_columns in (True, False):
        for table in DRAINED:
            data = columns[table.name]
            if as_columns:
                store.insert_columns(
                    table.qualified, data, table.columns, {"optimize_on_insert": 0}
                )
            else:
                rows = [list(row) for row in zip(*data, strict=True)]
                store.insert(table.qualified, rows, table.columns, {"optimize_on_insert": 0})
        dumps.append(_dump(store))
        _truncate(store)
    arrow, native = dumps
    assert native["evaluation_events"] and native["evaluation_dimensions"]
    assert native["emission_receipts"] and native["event_owners"]
    for table in READ:
        assert arrow[table] == native[table], table


def test_every_column_of_the_drained_tables_is_sent_as_arrow(store: ClickHouseStore) -> None:
    """The drain's tables take the Arrow insert whole (a type left unmapped would
    silently send the table as Native again)."""
    for table in DRAINED:
        types = dict(store.query(
            "SELECT name, type FROM system.columns WHERE database = 'holonograph'"
            " AND table = {t:String}", {"t": table.name}).rows)  # fmt: skip
        assert arrow_schema(table.columns, types) is not None, table.name


def test_a_table_with_a_type_not_mapped_is_inserted_as_native_columns(
    store: ClickHouseStore,
) -> None:
    store.command(
        "CREATE TABLE holonograph.arrow_probe (k String, d Decimal(10, 2), u UUID,"
        " t Tuple(a String, b UInt8)) ENGINE = MergeTree ORDER BY k"
    )
    import decimal
    import uuid

    key = uuid.UUID(int=7)
    columns = [["a"], [decimal.Decimal("1.25")], [key], [("x", 3)]]
    store.insert_columns("holonograph.arrow_probe", columns, ("k", "d", "u", "t"))
    assert store.query("SELECT k, d, u, t.a, t.b FROM holonograph.arrow_probe").rows == [
        ("a", decimal.Decimal("1.25"), key, "x", 3)
    ]


def test_a_value_arrow_cannot_hold_is_refused_for_good(store: ClickHouseStore) -> None:
    rows = _rows(store, _corpus()[:2])
    columns = _columns(rows)[EMISSION_RECEIPTS.name]
    columns[EMISSION_RECEIPTS.columns.index("emission_seq")][0] = "not a number"
    with pytest.raises(ArrowValueError, match="emission_seq") as raised:
        store.insert_columns(EMISSION_RECEIPTS.qualified, columns, EMISSION_RECEIPTS.columns)
    assert is_permanent(raised.value)
    assert store.query("SELECT count() FROM holonograph.emission_receipts").rows == [(0,)]
