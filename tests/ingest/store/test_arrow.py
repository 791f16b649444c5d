"""Column-wise inserts into in-process chDB go as Arrow tables (`ingest.store.arrow`) and
store what clickhouse-connect's Native rows store: the fuzz corpus, the bench payload
(hot-path rows, shared) and rows at the edges of every type, each table read back
whole, its views' tables too. The drain's event and dimension tables, built from the
rows by `ingest.store.arrow_rows`, are the placed columns' tables."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.request import validate_request
from ingest.store import arrow, owners
from ingest.store.arrow import (
    ArrowStreamer,
    ArrowValueError,
    arrow_schema,
    arrow_stream,
    arrow_table,
)
from ingest.store.arrow_rows import _hours, _taken, placed_tables
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.errors import is_permanent
from ingest.store.owners import Submission, Writer
from ingest.store.rows import (
    DIMENSION_PLACE,
    EVENT_PLACE,
    TableRows,
    insert_many,
    placed_columns,
    ticks_ns,
    write_rows,
)
from schemas.placement import placed_hour
from schemas.tables import (
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    EVENT_OWNERS,
    STREAM_OWNERS,
)
from tests.ingest.handoff.test_smalllog import AT, _corpus

pytestmark = [
    pytest.mark.clickhouse,
    pytest.mark.chdb_only("the Arrow insert is in-process chDB's; a server takes Native"),
]

DRAINED = (EVALUATION_EVENTS, EVALUATION_DIMENSIONS, EMISSION_RECEIPTS)
READ = (*(t.name for t in DRAINED), "event_owners", "event_moves")
U64 = 2**64 - 1
HOUR_NS = 3600 * 10**9


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


def test_arrow_out_of_memory_stays_retryable(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    def exhausted(*args: Any, **kwargs: Any) -> Any:
        raise pa.ArrowMemoryError("malloc of size 64 failed")

    rows = _rows(store, _corpus()[:2])
    columns = _columns(rows)[EMISSION_RECEIPTS.name]
    monkeypatch.setattr(pa, "array", exhausted)
    with pytest.raises(MemoryError, match="malloc") as raised:
        store.insert_columns(EMISSION_RECEIPTS.qualified, columns, EMISSION_RECEIPTS.columns)
    assert not isinstance(raised.value, ArrowValueError)
    assert not is_permanent(raised.value)  # retried, never isolated as a bad value


# --- the drain's tables built by `ingest.store.arrow_rows` ------------------------------


def _schemas(store: ClickHouseStore) -> tuple[Any, Any]:
    found = [store.arrow_schema(t.qualified, t.columns) for t in DRAINED[:2]]
    assert found[0] is not None and found[1] is not None
    return found[0], found[1]


def _by_columns(rows: TableRows, schemas: tuple[Any, Any]) -> list[Any]:
    """The tables `placed_columns` gives, each value converted where it stands."""
    columns = _columns(rows)
    return [arrow_table(s, columns[t.name]) for s, t in zip(schemas, DRAINED, strict=False)]


def _moved(rows: TableRows, every: int) -> TableRows:
    """`rows` with every `every`th event placed elsewhere by the commit (as a re-send
    of an event first received under another surface and hour)."""
    events = rows.expanded().events
    for n, row in enumerate(events[::every]):
        rows.placements[(row[0], row[1])] = (f"first-surface-{n}", 3600 * n)
    return rows


@pytest.mark.parametrize("source", ["corpus", "payload", "moved", "whole"])
def test_the_drain_tables_are_the_placed_columns(store: ClickHouseStore, source: str) -> None:
    if source == "corpus":
        rows = _rows(store, _corpus())
    else:
        factory = RequestFactory(PayloadSpec(batch=64, tag="arrow001"))
        rows = _rows(store, [factory.body(n) for n in range(3)])
        if source == "moved":
            rows = _moved(rows, 3)
        elif source == "whole":
            rows = rows.expanded()
    assert rows.shared or source == "whole"
    schemas = _schemas(store)
    built = placed_tables(rows, *schemas)
    for mine, theirs in zip(built, _by_columns(rows, schemas), strict=True):
        assert mine is not None and mine.equals(theirs)


def test_dimension_layers_are_taken_from_their_events(store: ClickHouseStore) -> None:
    """Hot-path rows take the dimension table's layers from the events' arrays; rows whose
    keys are not their events' dimensions in order are read whole, the same values."""
    factory = RequestFactory(PayloadSpec(batch=16, tag="arrow002"))
    rows = _rows(store, [factory.body(n) for n in range(2)]).expanded()
    events_schema, dimensions_schema = _schemas(store)
    events, _ = placed_tables(rows, events_schema, dimensions_schema)
    assert events is not None
    arrays = [column.combine_chunks() for column in events.columns]
    assert _taken(events_schema, arrays, rows.dimensions, dimensions_schema) is not None
    swapped = [rows.dimensions[1], rows.dimensions[0], *rows.dimensions[2:]]
    assert _taken(events_schema, arrays, swapped, dimensions_schema) is None
    shuffled = TableRows(events=rows.events, dimensions=swapped, placements=rows.placements)
    mine = placed_tables(shuffled, events_schema, dimensions_schema)[1]
    assert mine is not None and mine.equals(_by_columns(shuffled, _schemas(store))[1])


def test_placed_hours_are_placed_hour_at_the_edges() -> None:
    import pyarrow as pa

    low, high = ticks_ns(dt.datetime(1900, 1, 1, 0, 0, 0, 1)), ticks_ns(dt.datetime(2262, 4, 11))
    ticks = [low, -1, 0, 1, HOUR_NS - 1, HOUR_NS, 2**32 * 10**9, high, 2**63 - 1]
    hours = _hours(pa.array(ticks, type=pa.timestamp("ns", "UTC")))
    assert hours.tolist() == [placed_hour(t) for t in ticks]


@pytest.mark.parametrize("piece_bytes", [arrow.PIECE_BYTES, 20_011])
def test_the_drain_tables_store_what_native_rows_store(
    store: ClickHouseStore, piece_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write_rows` into in-process chDB (Arrow tables, streamed in one piece or in
    many) and as rows (Native) store the same rows, the commit's placements among them."""
    monkeypatch.setattr(arrow, "PIECE_BYTES", piece_bytes)
    factory = RequestFactory(PayloadSpec(batch=64, tag="arrow003"))
    requests = [*_corpus(), *(factory.body(n) for n in range(3))]
    dumps = []
    for native in (False, True):
        rows = _moved(_rows(store, requests), 5)
        write_rows(_RowsOnly(store) if native else store, rows)
        dumps.append(_dump(store))
        _truncate(store)
    as_arrow, native_dump = dumps
    assert native_dump["evaluation_dimensions"] and native_dump["event_moves"]
    for table in READ:
        assert as_arrow[table] == native_dump[table], table


def test_an_event_value_arrow_cannot_hold_is_refused_for_good(store: ClickHouseStore) -> None:
    rows = _rows(store, _corpus()[:2]).expanded()
    rows.events[0][EVALUATION_EVENTS.columns.index("latency_ms")] = "slow"
    with pytest.raises(ArrowValueError, match="latency_ms") as raised:
        write_rows(store, rows)
    assert is_permanent(raised.value)
    assert store.query("SELECT count() FROM holonograph.evaluation_events").rows == [(0,)]


class _RowsOnly:
    """`store` as a `Store` that is not a `ClickHouseStore`: `write_rows` sends it rows."""

    def __init__(self, store: ClickHouseStore) -> None:
        self._store = store
        self.url = store.url

    def query(self, sql: str, parameters: Any = None) -> Any:
        return self._store.query(sql, parameters)

    def command(self, sql: str, parameters: Any = None) -> None:
        self._store.command(sql, parameters)

    def insert(self, table: str, rows: Any, columns: Any, settings: Any = None) -> None:
        self._store.insert(table, rows, columns, settings)

    def close(self) -> None:
        self._store.close()


def test_a_drains_claims_as_columns_store_what_their_rows_store(store: ClickHouseStore) -> None:
    """The log's drain writes a drain's claims column-wise (`insert_many`: Arrow here)."""
    from ingest.handoff.claims import ClaimIndex, claim_rows, decide

    requests = [r.SerializeToString() for r in _corpus()]
    submissions = [
        Submission(fast_batch(parse_protobuf(r)) or validate_request(parse_protobuf(r)),
                   Writer(None), AT, n)
        for n, r in enumerate(requests)
    ]  # fmt: skip
    index = ClaimIndex()
    index.load(store)
    event_claims, stream_claims = claim_rows(decide(index, store, submissions, 1)[1])
    assert stream_claims  # an event's claims are its rows' (a view); an override's are these
    received, version = ticks_ns(AT) // 10**6, ticks_ns(AT) + 1
    event_claims += [["default", "override-1", "agent-a", received, version, "surface-s", 3600]]
    dumps = []
    for columns in (True, False):
        for table, claims in ((EVENT_OWNERS, event_claims), (STREAM_OWNERS, stream_claims)):
            if columns:
                insert_many(store, table, claims)
            else:
                store.insert(table.qualified, claims, table.columns)
        dumps.append({t.name: _read(store, t.name) for t in (EVENT_OWNERS, STREAM_OWNERS)})
        for table in (EVENT_OWNERS, STREAM_OWNERS):
            store.command(f"TRUNCATE TABLE {table.qualified}")
    assert dumps[0] == dumps[1]


def _read(store: ClickHouseStore, table: str) -> list[tuple[Any, ...]]:
    return sorted(store.query(f"SELECT * FROM holonograph.{table}").rows, key=repr)


def test_a_stream_in_pieces_is_the_table(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces of one kept buffer, a smaller table's after a larger one's: each joined is
    its table's stream."""
    import pyarrow as pa

    factory = RequestFactory(PayloadSpec(batch=64, tag="arrow004"))
    rows = _rows(store, [factory.body(n) for n in range(2)])
    tables = [t for t in placed_tables(rows, *_schemas(store)) if t is not None]
    tables.sort(key=lambda t: -t.nbytes)
    monkeypatch.setattr(arrow, "PIECE_BYTES", 5_003)
    streamer = ArrowStreamer()
    for table in tables:
        pieces = list(streamer.pieces(table))
        assert len(pieces) > 2
        assert pa.ipc.open_stream(b"".join(pieces)).read_all().equals(table)
        assert b"".join(pieces) == arrow_stream(table)
