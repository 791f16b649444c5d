"""The embedded connection (`ingest.store.embedded`) gives what clickhouse-connect gives:
the same values for every column of every table of a seeded store and for typed
expressions, the same binding of parameters, and inserts that store the same rows."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.cli_wall import seed
from ingest.store.clickhouse import ClickHouseStore, connect_client
from ingest.store.embedded import EmbeddedClient, EmbeddedError, open_embedded
from ingest.store.url import chdb_url
from schemas.tables import DATABASE

EXPRESSIONS = [
    "toDateTime64('2026-12-02 10:11:12.345', 3, 'UTC')",
    "toDateTime64('2026-12-02 10:11:12.345678901', 9, 'UTC')",
    "toDateTime64('1900-01-01 00:00:00.001', 3, 'UTC')",
    "toDateTime('2026-12-02 10:11:12', 'UTC')",
    "toDateTime('2026-12-02 10:11:12')",
    "toDate('2026-12-02')",
    "toDate32('1950-12-02')",
    "toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0')",
    "CAST('sentinel', 'Enum8(\\'evaluation\\' = 1, \\'sentinel\\' = 2)')",
    "CAST('b', 'Enum16(\\'a\\' = -3, \\'b\\' = 300)')",
    "map('a', 'b', 'c', '')",
    "map('a', [1, 2])::Map(String, Array(UInt64))",
    "[('x', 1), ('y', 2)]::Array(Tuple(seq_from String, seq_to UInt64))",
    "('a', 1, [2.5])",
    "CAST(NULL, 'Nullable(Float64)')",
    "CAST(1.5, 'Nullable(Float64)')",
    "CAST(NULL, 'Nullable(DateTime64(3, \\'UTC\\'))')",
    "NULL",
    "true",
    "CAST(NULL, 'Nullable(Bool)')",
    "toLowCardinality('lc')",
    "[toLowCardinality('a')]",
    "nan",
    "-inf",
    "toFloat32(0.1)",
    "0.1 + 0.2",
    "18446744073709551615",
    "toInt64(-5)",
    "toInt8(-128)",
    "toUInt128('340282366920938463463374607431768211455')",
    "toInt256('-5')",
    "toDecimal64(-1.25, 2)",
    "toDecimal128('3.14159', 5)",
    "toFixedString('ab', 3)",
    "toIPv4('1.2.3.4')",
    "toIPv6('::1')",
    "'é\\xff'",
    "'tab\\there\\nnewline \\'quote\\' back\\\\slash'",
    "repeat('x', 300)",
    "[[1, 2], [], [3]]",
    "groupArray(number) FROM numbers(3)",
    "toStartOfHour(toDateTime64('2026-12-02 10:11:12.345', 3, 'UTC'))",
]


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, EmbeddedClient]]:
    path = tmp_path_factory.mktemp("embedded") / "store"
    seed(path)
    reference = connect_client(chdb_url(path))
    direct = open_embedded(path)
    try:
        yield reference, direct
    finally:
        direct.close()
        reference.close()


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def both(clients: tuple[Any, EmbeddedClient], sql: str, **kwargs: Any) -> tuple[Any, Any]:
    reference, direct = clients
    old = reference.query(sql, **kwargs)
    new = direct.query(sql, **kwargs)
    assert tuple(new.column_names) == tuple(old.column_names)
    return [tuple(r) for r in old.result_rows], new.result_rows


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_expressions_decode_as_clickhouse_connect_decodes_them(
    clients: tuple[Any, EmbeddedClient], expression: str
) -> None:
    sql = f"SELECT {expression}" if " FROM " in expression else f"SELECT {expression} AS v"
    old, new = both(clients, sql)
    assert same(new, old), (old, new)


def test_every_column_of_every_seeded_table_decodes_the_same(
    clients: tuple[Any, EmbeddedClient],
) -> None:
    reference, _ = clients
    tables = [
        name
        for (name,) in reference.query(
            "SELECT name FROM system.tables WHERE database = {db:String}"
            " AND engine LIKE '%MergeTree' ORDER BY name",
            parameters={"db": DATABASE},
        ).result_rows
    ]
    seen = 0
    for table in tables:
        old, new = both(clients, f"SELECT * FROM {DATABASE}.{table} ORDER BY tuple(*) LIMIT 2000")
        assert same(new, old), table
        seen += len(old)
    assert seen > 1000  # the seeded events, their dimensions and sentinels


PARAMETERS: list[tuple[str, Any]] = [
    ("String", "it's a \\ back\tslash\nline `tick`"),
    ("String", "é"),
    ("UInt64", 18446744073709551615),
    ("Int64", -3),
    ("Float64", 0.1),
    ("Bool", True),
    ("Bool", False),
    ("DateTime64(3)", dt.datetime(2026, 12, 2, 10, 11, 12, 345678)),
    ("DateTime64(3, 'UTC')", dt.datetime(2026, 12, 2, 10, 11, 12, 345000, tzinfo=dt.UTC)),
    ("DateTime('UTC')", dt.datetime(2026, 12, 2, 10, 11, 12, 999999)),
    ("Date", dt.date(2026, 12, 2)),
    ("UUID", uuid.UUID("61f0c404-5cb3-11e7-907b-a6006ad3dba0")),
    ("Array(String)", ["a", "b'c", ""]),
    ("Array(UInt64)", []),
    ("Array(DateTime64(3, 'UTC'))", [dt.datetime(2026, 1, 1, 0, 0, 0, 1000)]),
    ("Tuple(String, UInt8)", ("a", 1)),
    ("Nullable(String)", None),
]


@pytest.mark.parametrize(("kind", "value"), PARAMETERS)
def test_parameters_bind_as_clickhouse_connect_binds_them(
    clients: tuple[Any, EmbeddedClient], kind: str, value: Any
) -> None:
    old, new = both(clients, f"SELECT {{p:{kind}}} AS v", parameters={"p": value})
    assert same(new, old), (old, new)


def test_inserted_rows_are_the_rows_clickhouse_connect_inserts(
    clients: tuple[Any, EmbeddedClient], tmp_path: Path
) -> None:
    reference, direct = clients
    tables = ["evaluation_events", "evaluation_dimensions", "emission_receipts", "quarantine"]
    for table in tables:
        rows = direct.query(f"SELECT * FROM {DATABASE}.{table} ORDER BY tuple(*) LIMIT 300")
        names = list(rows.column_names)
        for copy in (f"{table}_old", f"{table}_new"):
            direct.command(f"DROP TABLE IF EXISTS {DATABASE}.{copy}")
            direct.command(f"CREATE TABLE {DATABASE}.{copy} AS {DATABASE}.{table}")
        ClickHouseStore("chdb://x", reference).insert(
            f"{DATABASE}.{table}_old", rows.result_rows, names
        )
        direct.insert(f"{DATABASE}.{table}_new", rows.result_rows, names)
        # read back by clickhouse-connect (and `both` checks the direct read agrees)
        old, _ = both(clients, f"SELECT * FROM {DATABASE}.{table}_old ORDER BY tuple(*)")
        new, _ = both(clients, f"SELECT * FROM {DATABASE}.{table}_new ORDER BY tuple(*)")
        assert same(new, old), table
        assert len(old) == len(rows.result_rows)


def test_a_refused_statement_is_an_error_with_its_code(clients: tuple[Any, EmbeddedClient]) -> None:
    _, direct = clients
    with pytest.raises(EmbeddedError) as refused:
        direct.query("SELECT * FROM holonograph.no_such_table")
    assert refused.value.code == 60
    assert str(refused.value).startswith("Code: 60.")
    assert direct.query("SELECT 1 AS one").result_rows == [(1,)]  # the session goes on


def test_commands_answer_text_as_clickhouse_connect_does(
    clients: tuple[Any, EmbeddedClient],
) -> None:
    reference, direct = clients
    for sql in ("EXPLAIN AST SELECT 1 FROM system.one WHERE dummy = {d:UInt8}", "SELECT 'a', 'b'"):
        assert direct.command(sql, parameters={"d": 0}) == reference.command(
            sql, parameters={"d": 0}
        )
    assert direct.command("SET max_threads = 2") is None


def test_a_command_takes_no_settings_of_its_own(clients: tuple[Any, EmbeddedClient]) -> None:
    """A SET around one command would outlive it or undo the session's own."""
    _, direct = clients
    with pytest.raises(EmbeddedError, match="SET them"):
        direct.command("SELECT 1", settings={"max_threads": 1})


def test_a_statement_with_a_format_of_its_own_is_refused(
    clients: tuple[Any, EmbeddedClient],
) -> None:
    _, direct = clients
    with pytest.raises(EmbeddedError) as refused:
        direct.query("SELECT 1 FORMAT JSON")
    assert refused.value.code == 62  # a syntax error: nothing read as the wrong format


def test_rows_the_receiver_builds_are_stored_as_clickhouse_connect_stores_them(
    clients: tuple[Any, EmbeddedClient],
) -> None:
    """The receiver's rows carry times as integer ticks (the Native insert's form): an
    offline writer of them (the small-request log's replay, a quarantine replay) must
    store the same instants, not read the ticks as seconds."""
    from ingest.export.request import validate_request
    from ingest.store.rows import TableRows, write_rows
    from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

    reference, direct = clients
    spans = record_spans([Evaluation("ticks", 0), Evaluation("ticks", 1), Sentinel("ticks", 2)])
    rows = TableRows()
    rows.add(
        validate_request(export_request(spans)), "r-ticks", dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
    )
    tables = {
        "evaluation_events": rows.events,
        "evaluation_dimensions": rows.dimensions,
        "emission_receipts": rows.receipts,
        "quarantine": rows.quarantine,
        "lesson_overrides": rows.overrides,
    }
    assert rows.events and rows.dimensions and rows.receipts
    for suffix in ("old", "new"):
        for table in tables:
            direct.command(f"DROP TABLE IF EXISTS {DATABASE}.{table}_{suffix}")
            direct.command(f"CREATE TABLE {DATABASE}.{table}_{suffix} AS {DATABASE}.{table}")
    write_rows(_Renamed(ClickHouseStore("chdb://x", reference), "old"), rows)
    write_rows(_Renamed(ClickHouseStore("chdb://x", direct), "new"), rows)
    for table in tables:
        old, _ = both(clients, f"SELECT * FROM {DATABASE}.{table}_old ORDER BY tuple(*)")
        new, _ = both(clients, f"SELECT * FROM {DATABASE}.{table}_new ORDER BY tuple(*)")
        assert same(new, old), table
        assert len(old) == len(tables[table])


class _Renamed:
    """A store whose inserts go to `<table>_<suffix>` (the copies compared above)."""

    def __init__(self, store: ClickHouseStore, suffix: str) -> None:
        self.store, self.suffix = store, suffix

    def insert(self, table: str, rows: Any, columns: Any, settings: Any = None) -> None:
        self.store.insert(f"{table}_{self.suffix}", rows, columns, settings)


ENGINE_ALONE = """
import sys
from pathlib import Path
from ingest.store.embedded import open_embedded
client = open_embedded(Path(sys.argv[1]))
print(client.query("SELECT 41 + 1").result_rows[0][0])
print("chdb" in sys.modules)  # the package's __init__ never ran
client.close()
import chdb  # the package still imports once the store's engine is closed
print(chdb._chdb is sys.modules["chdb._chdb"])
print(chdb.query("SELECT 7", "CSV").bytes().decode().strip())
again = open_embedded(Path(sys.argv[1]))
print(again.query("SELECT 8").result_rows[0][0])
again.close()
"""


def test_a_command_loads_the_engine_without_the_package_and_the_package_still_works(
    tmp_path: Path,
) -> None:
    """A process that has not imported `chdb` loads its extension alone (no in-memory
    engine started and stopped for a version string); `import chdb` afterwards finds
    the same extension and works, and the store opens again."""
    import subprocess
    import sys

    from bench.paths import ROOT

    done = subprocess.run(
        [sys.executable, "-c", ENGINE_ALONE, str(tmp_path / "store")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["42", "False", "True", "7", "8"]
