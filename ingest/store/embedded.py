"""chDB reached straight through its own connection, for the commands that open an
embedded store themselves (`holonograph drift|completeness|compare|quarantine ...`
with no `serve` holding it): clickhouse-connect's import and its per-client handshake
(its HTTP stack, `system.settings` read and parsed at every client) are a third of
such a command's time (bench/RESULTS.md, issue 24). `serve`, `sink` and the admin
endpoint keep clickhouse-connect, with one connection of this module beside it for
the column-wise inserts (`EmbeddedClient.insert_table`: Arrow, `ingest.store.arrow`).

`EmbeddedClient` is the part of clickhouse-connect's `Client` our store code calls
(`query`, `command`, `insert`, `close`), with the same Python values: results are
read as RowBinaryWithNamesAndTypes and decoded as clickhouse-connect decodes Native
(naive UTC datetimes, microseconds, invalid UTF-8 as hex, named tuples as dicts, ...);
parameters are bound on the server as clickhouse-connect binds them; rows are
inserted as a VALUES statement. `tests/ingest/store/test_embedded.py` runs the same
queries, parameters and inserts through both and compares what comes back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import importlib.machinery
import importlib.util
import ipaddress
import math
import os
import re
import struct
import sys
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported at the first Arrow insert (`ingest.store.arrow`)
    import pyarrow as pa

    from ingest.store.arrow import ArrowStreamer

__all__ = ["EmbeddedClient", "EmbeddedError", "EmbeddedResult", "open_embedded"]

_CODE = re.compile(r"\bCode:\s*(\d+)")
# Results as rows with their names and types: every value decoded by its column's type
# (the statement ends with this FORMAT too, so one of its own is a syntax error).
_FORMAT = "RowBinaryWithNamesAndTypes"


class EmbeddedError(Exception):
    """chDB refused a statement; `code` is ClickHouse's error code (None if unknown)."""

    def __init__(self, message: str) -> None:
        start = message.find("Code: ")
        text = message[start:].strip() if start > 0 else message.strip()
        super().__init__(text)
        found = _CODE.search(text)
        self.code: int | None = int(found[1]) if found else None


class EmbeddedResult:
    """A query's answer: `column_names` and `result_rows` (tuples), as clickhouse-connect's
    `QueryResult` gives them (no names when there are no rows)."""

    def __init__(self, column_names: tuple[str, ...], result_rows: list[tuple[Any, ...]]) -> None:
        self.column_names = column_names
        self.result_rows = result_rows


def _chdb_module() -> Any:
    """chDB's C extension: the one this process already loaded, else loaded alone
    (`_engine_alone`), else through the `chdb` package (which loads it right)."""
    with _import_lock:
        loaded = sys.modules.get(_EXTENSION)
        if loaded is not None:
            return loaded
        if "chdb" not in sys.modules:
            alone = _engine_alone()
            if alone is not None:
                return alone
        blocked = "pyarrow" not in sys.modules
        if blocked:  # chdb's Python layers import pyarrow as optional: not needed here
            sys.modules["pyarrow"] = None  # type: ignore[assignment]
        try:
            import chdb
        finally:
            if blocked and sys.modules.get("pyarrow", ...) is None:
                del sys.modules["pyarrow"]
    return chdb._chdb


_EXTENSION = "chdb._chdb"


def _engine_alone() -> Any:
    """chDB's extension loaded as its package loads it (bound deep, from its own
    directory) without running the package's `__init__`, which starts and stops an
    in-memory engine to read its version and imports its UDF and progress layers: a
    quarter of an offline command's second (bench/RESULTS.md, issue 24). None when the
    extension is not where the package would find it (the package's import then runs).

    A later `import chdb` in this process finds this extension; its `__init__` then
    starts an in-memory engine, which chDB refuses while a store's engine is open
    ("EmbeddedServer already initialized"): after the last connection closed it works.
    Nothing that opens a directory through this module imports `chdb` while holding it
    (clickhouse-connect imports it only for a `chdb://` client, which such a command
    never opens)."""
    try:
        package = importlib.util.find_spec("chdb")
        locations = list(package.submodule_search_locations or []) if package else []
        spec = importlib.machinery.PathFinder.find_spec(_EXTENSION, locations)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or spec.loader is None:
        return None
    if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return None
    here = os.getcwd()
    os.chdir(os.path.dirname(spec.origin))  # as the package does: its libraries sit beside
    try:
        if sys.platform == "linux":  # its own symbols first, as the package binds them
            import ctypes

            ctypes.CDLL(spec.origin, mode=sys.getdlopenflags() | os.RTLD_DEEPBIND)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        os.chdir(here)
    sys.modules[_EXTENSION] = module
    return module


_import_lock = threading.Lock()


def open_embedded(path: Path) -> EmbeddedClient:
    """A new connection to the chDB store in `path` (the engine starts with the first)."""
    module = _chdb_module()
    try:
        connection = module.connect(str(path))
    except RuntimeError as err:
        raise EmbeddedError(str(err)) from None
    return EmbeddedClient(connection)


class EmbeddedClient:
    """One chDB connection (its own session: SET applies to it alone), calls serialized."""

    def __init__(self, connection: Any) -> None:
        self._conn = connection
        self._lock = threading.Lock()
        self._types: dict[str, dict[str, str]] = {}
        self._schemas: dict[tuple[str, tuple[str, ...]], Any] = {}  # `arrow_schema`'s
        self._streamer: ArrowStreamer | None = None  # `insert_table`'s, at its first
        try:  # clickhouse-connect's client sets these on every session it opens
            self._run("SET date_time_input_format = 'best_effort'", {})
            self._run("SET cast_string_to_dynamic_use_inference = 1", {})
        except BaseException:
            self.close()
            raise

    def _run(self, sql: str, params: Mapping[str, str], fmt: str = "TabSeparated") -> Any:
        with self._lock:
            if self._conn is None:
                raise EmbeddedError("the chDB connection is closed")
            try:
                return self._conn.query(sql, fmt, params=dict(params))
            except RuntimeError as err:
                raise EmbeddedError(str(err)) from None

    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> EmbeddedResult:
        text, params = bind(sql, parameters)
        text += _settings_clause(settings)
        result = self._run(f"{text}\nFORMAT {_FORMAT}", params, _FORMAT)
        return decode_rows(result.bytes())

    def command(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> str | list[str] | None:
        """Run `sql`; its output as clickhouse-connect's `command` gives text: one value
        (a multi-line one, as `EXPLAIN AST`'s, whole), several as a list, none as None.
        No `settings`: a command cannot carry a SETTINGS clause at its end, and a SET
        around it would outlive it or undo the session's own (nothing here asks)."""
        if settings:
            raise EmbeddedError("settings for one command are not taken here: SET them")
        text, params = bind(sql, parameters)
        out = str(self._run(text, params).bytes().decode("utf-8", "replace"))
        out = out.removesuffix("\n")
        if not out:
            return None
        return out.split("\t") if "\t" in out and "\n" not in out else out

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """`rows` into `table` as one VALUES statement (ClickHouse converts each literal
        to its column's type, as it does the Native columns clickhouse-connect sends)."""
        if not rows:
            return
        columns = ", ".join(_identifier(name) for name in column_names)
        types = self._column_types(table)
        formats = [_column_literal(types.get(name, "")) for name in column_names]
        values = ",".join(
            "(" + ",".join(fmt(value) for fmt, value in zip(formats, row, strict=True)) + ")"
            for row in rows
        )
        clause = _settings_clause(settings)
        self._run(f"INSERT INTO {table} ({columns}){clause} VALUES {values}", {})

    def arrow_schema(self, table: str, column_names: Sequence[str]) -> pa.Schema | None:
        """The Arrow schema `insert_table` takes `table`'s `column_names` in (cached);
        None when a column's type is not one `ingest.store.arrow` maps."""
        from ingest.store.arrow import arrow_schema

        key = (table, tuple(column_names))
        if key not in self._schemas:
            self._schemas[key] = arrow_schema(column_names, self._column_types(table))
        schema: pa.Schema | None = self._schemas[key]
        return schema

    def insert_table(
        self, table: str, data: pa.Table, settings: Mapping[str, Any] | None = None
    ) -> None:
        """`data` (its columns by name, in the types `arrow_schema` gives) into `table`,
        as one Arrow stream through chDB's streaming insert, a piece at a time."""
        from ingest.store.arrow import ArrowStreamer

        if self._streamer is None:
            self._streamer = ArrowStreamer()
        names = ", ".join(_identifier(name) for name in data.column_names)
        sql = f"INSERT INTO {table} ({names}){_settings_clause(settings)}"
        with self._lock:
            if self._conn is None:
                raise EmbeddedError("the chDB connection is closed")
            try:
                inserter = self._conn.send_insert(sql, "ArrowStream")
                try:
                    for piece in self._streamer.pieces(data):
                        self._conn.insert_append(inserter, piece)
                except BaseException:
                    with contextlib.suppress(RuntimeError):  # the append's error says why
                        self._conn.insert_cancel(inserter)
                    raise
                self._conn.insert_done(inserter)
            except RuntimeError as err:
                raise EmbeddedError(str(err)) from None

    def _column_types(self, table: str) -> dict[str, str]:
        """`table`'s column types, once per connection: a VALUES literal is parsed as
        text, where the Native columns clickhouse-connect sends are typed (an integer
        for a DateTime64 is ticks in Native, seconds as text)."""
        cached = self._types.get(table)
        if cached is None:
            database, _, name = table.rpartition(".")
            found = self.query(
                "SELECT name, type FROM system.columns"
                " WHERE database = if({d:String} = '', currentDatabase(), {d:String})"
                " AND table = {t:String}",
                {"d": database.strip("`"), "t": name.strip("`")},
            )
            cached = {str(n): str(t) for n, t in found.result_rows}
            self._types[table] = cached
        return cached

    def close(self) -> None:
        with self._lock:
            connection, self._conn = self._conn, None
        if connection is not None:
            connection.close()


# --- parameters and literals, as clickhouse-connect's `binding` formats them ---------

_BIND = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*):([^}]+)\}")
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ESCAPE = str.maketrans({c: "\\" + c for c in "\\'`\t\n"})


def bind(sql: str, parameters: Mapping[str, Any] | None) -> tuple[str, dict[str, str]]:
    """`sql` without a trailing `;`, and each parameter as the text the server parses
    for its `{name:Type}` (a parameter the text does not name is sent all the same)."""
    sql = sql.rstrip().rstrip(";")
    if not parameters:
        return sql, {}
    types = {name: kind for name, kind in _BIND.findall(sql)}
    return sql, {k: _parameter(v, types.get(k, "")) for k, v in parameters.items()}


def _parameter(value: Any, kind: str) -> str:
    precise = "datetime64" in kind.lower()
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return value.translate(_ESCAPE)
    if isinstance(value, dt.datetime):
        return _datetime(value, precise)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, list | tuple | dict):
        return _nested(value, precise)
    if isinstance(value, Enum):
        return _parameter(value.value, kind)
    return str(value)  # numbers, bools ('True' parses as Bool), PreEscaped


def _nested(value: Any, precise: bool) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_nested(x, precise) for x in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_nested(x, precise) for x in value) + ")"
    if isinstance(value, dict):
        pairs = (_nested(k, precise) + ":" + _nested(v, precise) for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, dt.datetime):
        return f"'{_datetime(value, precise)}'"
    return literal(value)


def _datetime(value: dt.datetime, precise: bool) -> str:
    if value.utcoffset() is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f" if precise else "%Y-%m-%d %H:%M:%S")


def literal(value: Any) -> str:
    """`value` as a SQL literal (VALUES rows, SET values, nested parameters)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.translate(_ESCAPE) + "'"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)  # nan, inf, -inf
    if isinstance(value, dt.datetime):
        return f"'{_datetime(value, True)}'"
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    if isinstance(value, bytes | bytearray):
        return "'" + "".join(f"\\x{b:02x}" for b in value) + "'"
    if isinstance(value, list):
        return "[" + ", ".join(map(literal, value)) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(literal, value)) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Enum):
        return literal(value.value)
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return f"'{value}'"
    return "'" + str(value).translate(_ESCAPE) + "'"


_TICKS = re.compile(r"^(?:Nullable\()?DateTime64\((\d+)")


def _column_literal(kind: str) -> Callable[[Any], str]:
    """How a value for a column of type `kind` is written in VALUES: as `literal`, but
    an integer for a DateTime64(P) is ticks of 10**-P s (as clickhouse-connect's Native
    insert takes it), written as seconds with P decimals."""
    match = _TICKS.match(kind)
    if match is None:
        return literal
    scale = int(match[1])

    def ticks(value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            if scale == 0:
                return str(value)
            sign = "-" if value < 0 else ""
            whole, part = divmod(abs(value), 10**scale)
            return f"{sign}{whole}.{part:0{scale}d}"
        return literal(value)

    return ticks


def _setting_name(name: str) -> str:
    if not _SETTING.match(name):
        raise EmbeddedError(f"not a setting name: {name!r}")
    return name


def _settings_clause(settings: Mapping[str, Any] | None) -> str:
    if not settings:
        return ""
    return "\nSETTINGS " + ", ".join(
        f"{_setting_name(k)} = {literal(v)}" for k, v in settings.items()
    )


def _identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


# --- RowBinaryWithNamesAndTypes, decoded to clickhouse-connect's values -------------

Reader = Callable[[memoryview, int], tuple[Any, int]]
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)
_FIXED = {
    "Int8": "<b", "UInt8": "<B", "Int16": "<h", "UInt16": "<H", "Int32": "<i",
    "UInt32": "<I", "Int64": "<q", "UInt64": "<Q", "Float32": "<f", "Float64": "<d",
}  # fmt: skip
_WIDE = {"Int128": (16, True), "UInt128": (16, False), "Int256": (32, True), "UInt256": (32, False)}


def decode_rows(data: bytes) -> EmbeddedResult:
    view = memoryview(data)
    if not data:
        return EmbeddedResult((), [])
    count, pos = _varint(view, 0)
    names, types = [], []
    for _ in range(count):
        name, pos = _string_bytes(view, pos)
        names.append(name.decode())
    for _ in range(count):
        kind, pos = _string_bytes(view, pos)
        types.append(kind.decode())
    readers = [reader(kind) for kind in types]
    rows: list[tuple[Any, ...]] = []
    end = len(view)
    while pos < end:
        row = []
        for read in readers:
            value, pos = read(view, pos)
            row.append(value)
        rows.append(tuple(row))
    if not rows:
        return EmbeddedResult((), [])
    return EmbeddedResult(tuple(names), rows)


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _string_bytes(view: memoryview, pos: int) -> tuple[bytes, int]:
    size, pos = _varint(view, pos)
    return bytes(view[pos : pos + size]), pos + size


def _read_string(view: memoryview, pos: int) -> tuple[str, int]:
    raw, pos = _string_bytes(view, pos)
    try:
        return raw.decode(), pos
    except UnicodeDecodeError:
        return raw.hex(), pos  # as clickhouse-connect shows a String that is not UTF-8


def _split(args: str) -> list[str]:
    """Top-level comma-separated parts of a type's arguments."""
    parts, depth, quote, start = [], 0, "", 0
    i = 0
    while i < len(args):
        c = args[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'`\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
        i += 1
    parts.append(args[start:].strip())
    return [p for p in parts if p]


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'`\"":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


_readers: dict[str, Reader] = {}


def reader(kind: str) -> Reader:
    """The decoder of one value of type `kind` (ClickHouse's spelling)."""
    found = _readers.get(kind)
    if found is None:
        found = _readers[kind] = _make_reader(kind.strip())
    return found


def _make_reader(kind: str) -> Reader:  # one branch per type family
    name, _, rest = kind.partition("(")
    args = rest[:-1] if rest else ""
    if name in _FIXED:
        unpack = struct.Struct(_FIXED[name]).unpack_from
        size = struct.calcsize(_FIXED[name])
        return lambda v, p: (unpack(v, p)[0], p + size)
    if name in _WIDE:
        width, signed = _WIDE[name]
        return lambda v, p: (int.from_bytes(v[p : p + width], "little", signed=signed), p + width)
    if name == "Bool":
        return lambda v, p: (v[p] != 0, p + 1)
    if name == "String":
        return _read_string
    if name == "FixedString":
        width = int(args)
        return lambda v, p: (bytes(v[p : p + width]), p + width)
    if name in ("LowCardinality", "SimpleAggregateFunction"):
        return reader(_split(args)[-1])
    if name == "Nullable":
        inner = reader(args)

        def nullable(v: memoryview, p: int) -> tuple[Any, int]:
            if v[p]:
                return None, p + 1
            return inner(v, p + 1)

        return nullable
    if name == "Nothing":
        return lambda v, p: (None, p + 1)
    if name == "Date":
        return lambda v, p: (
            _EPOCH_DAY + dt.timedelta(days=struct.unpack_from("<H", v, p)[0]),
            p + 2,
        )
    if name == "Date32":
        return lambda v, p: (
            _EPOCH_DAY + dt.timedelta(days=struct.unpack_from("<i", v, p)[0]),
            p + 4,
        )
    if name == "DateTime":
        zone = _zone(_split(args)[0] if args else "")
        return lambda v, p: (_moment(struct.unpack_from("<I", v, p)[0] * 1_000_000, zone), p + 4)
    if name == "DateTime64":
        parts = _split(args)
        scale = int(parts[0])
        zone = _zone(parts[1] if len(parts) > 1 else "")

        def datetime64(v: memoryview, p: int) -> tuple[Any, int]:
            ticks = struct.unpack_from("<q", v, p)[0]
            micros = ticks // 10 ** (scale - 6) if scale >= 6 else ticks * 10 ** (6 - scale)
            return _moment(micros, zone), p + 8

        return datetime64
    if name == "UUID":

        def read_uuid(v: memoryview, p: int) -> tuple[Any, int]:
            high, low = struct.unpack_from("<QQ", v, p)
            return uuid.UUID(int=(high << 64) | low), p + 16

        return read_uuid
    if name == "IPv4":
        return lambda v, p: (ipaddress.IPv4Address(struct.unpack_from("<I", v, p)[0]), p + 4)
    if name == "IPv6":
        return lambda v, p: (ipaddress.IPv6Address(bytes(v[p : p + 16])), p + 16)
    if name.startswith("Decimal"):
        return _decimal(name, _split(args))
    if name in ("Enum8", "Enum16"):
        labels = {}
        for item in _split(args):
            label, _, number = item.rpartition("=")
            labels[int(number)] = _unquote(label.strip())
        code = "<b" if name == "Enum8" else "<h"
        size = 1 if name == "Enum8" else 2
        return lambda v, p: (labels[struct.unpack_from(code, v, p)[0]], p + size)
    if name == "Array":
        element = reader(args)

        def array(v: memoryview, p: int) -> tuple[Any, int]:
            n, p = _varint(v, p)
            out = []
            for _ in range(n):
                value, p = element(v, p)
                out.append(value)
            return out, p

        return array
    if name == "Map":
        key, value = (reader(part) for part in _split(args))

        def mapping(v: memoryview, p: int) -> tuple[Any, int]:
            n, p = _varint(v, p)
            out = {}
            for _ in range(n):
                k, p = key(v, p)
                out[k], p = value(v, p)
            return out, p

        return mapping
    if name == "Tuple":
        return _tuple(_split(args))
    raise EmbeddedError(f"type {kind} is not read on the embedded connection")


def _tuple(parts: list[str]) -> Reader:
    names: list[str] = []
    readers: list[Reader] = []
    for part in parts:
        match = re.match(r"^(`(?:[^`\\]|\\.)*`|[A-Za-z_][A-Za-z0-9_]*)\s+(.+)$", part)
        if match and not re.match(r"^[A-Za-z0-9_]+\(", part):
            names.append(_unquote(match[1]))
            readers.append(reader(match[2]))
        else:
            readers.append(reader(part))
    named = len(names) == len(readers)

    def read(v: memoryview, p: int) -> tuple[Any, int]:
        values = []
        for item in readers:
            value, p = item(v, p)
            values.append(value)
        return (dict(zip(names, values, strict=True)) if named else tuple(values)), p

    return read


def _decimal(name: str, args: list[str]) -> Reader:
    if name == "Decimal":
        precision, scale = int(args[0]), int(args[1])
    else:
        precision = {"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}[name]
        scale = int(args[0])
    width = 4 if precision <= 9 else 8 if precision <= 18 else 16 if precision <= 38 else 32
    exponent = decimal.Decimal(10) ** -scale

    def read(v: memoryview, p: int) -> tuple[Any, int]:
        raw = int.from_bytes(v[p : p + width], "little", signed=True)
        return (decimal.Decimal(raw) * exponent).quantize(exponent), p + width

    return read


def _zone(text: str) -> dt.tzinfo | None:
    """The zone a datetime column names; UTC (and none: chDB's is the host's, UTC here)
    decode naive, as clickhouse-connect does for the server's own zone."""
    name = _unquote(text.strip()) if text else ""
    if name in ("", "UTC", "Etc/UTC", "GMT", "Zulu"):
        return None
    import zoneinfo

    return zoneinfo.ZoneInfo(name)


def _moment(micros: int, zone: dt.tzinfo | None) -> dt.datetime:
    naive = _EPOCH + dt.timedelta(microseconds=micros)
    if zone is None:
        return naive
    return naive.replace(tzinfo=dt.UTC).astimezone(zone)
