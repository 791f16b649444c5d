"""ClickHouse through clickhouse-connect: a server over HTTP(S) or chDB in-process.

`open_store` turns a store URL (`ingest.store.url`) into a `schemas.store.Store`. An embedded (chDB)
store can be opened by one process at a time; other commands reach it through that
process's admin endpoint instead (see `ingest.service.admin`). Read-only connections are
`ingest.store.reader`'s.
"""

from __future__ import annotations

import copy
import importlib
import importlib.abc
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import urlparse

from typing_extensions import TypeIs

from ingest.redact import redact_url
from ingest.store.url import normalize_store_url
from schemas.store import QueryResult

if TYPE_CHECKING:  # clickhouse-connect is imported when a store is opened
    import pyarrow as pa
    from clickhouse_connect.datatypes.base import ClickHouseType
    from clickhouse_connect.driver.client import Client

    from ingest.store.embedded import EmbeddedClient


def dedup_settings(token: str, table: str, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """`settings` with the `insert_deduplication_token` of `table`'s insert under a
    batch's `token` (`{token}:{table}`): a server with insert deduplication drops an
    identical retried block."""
    return {"insert_deduplication_token": f"{token}:{table}", **(settings or {})}


class ClickHouseStore:
    """A `Store` over one clickhouse-connect client (or a command's own chDB connection,
    `ingest.store.embedded`); calls are serialized by a lock because a chDB session,
    like a clickhouse-connect client, is not thread-safe. This is the writing side:
    read-only work runs on `ingest.store.reader.ReadOnlyStore`."""

    def __init__(self, url: str, client: Client | EmbeddedClient) -> None:
        self.url = url
        self._client = client
        self._lock = threading.Lock()
        # Column types per (table, columns), looked up once: clickhouse-connect would
        # otherwise DESCRIBE the table before every insert (a query per table per commit).
        self._column_types: dict[tuple[str, tuple[str, ...]], Sequence[ClickHouseType]] = {}
        # In-process chDB shares the process's cores with the receiver; a commit's
        # block is too small to gain from a parallel insert pipeline, which only adds
        # thread hand-offs (bench/RESULTS.md, issue 24). A server keeps its own.
        self._insert_settings = {"max_threads": 1} if _is_chdb_client(client) else {}
        # Each insert's `insert_deduplication_token` is `{token}:{table}` (`with_token`).
        self._token: str | None = None
        # In-process chDB takes column-wise inserts as Arrow tables on a connection of
        # our own (`ingest.store.arrow`), opened at the first; shared by `with_token`.
        self._arrow = (
            _ArrowConnection(Path(urlparse(url).path)) if _is_chdb_client(client) else None
        )

    @property
    def display_url(self) -> str:
        """The URL as printed: no password."""
        return redact_url(self.url)

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        with self._lock:
            result = self._client.query(sql, parameters=dict(parameters or {}))
        return QueryResult(tuple(result.column_names), [tuple(r) for r in result.result_rows])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._client.command(sql, parameters=dict(parameters or {}))

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if rows:
            self._insert(table, rows, column_names, settings, columnar=False)

    def insert_columns(
        self,
        table: str,
        columns: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """`insert` of rows given column by column (`columns[i]`: every row's value of
        `column_names[i]`), which clickhouse-connect's Native insert takes as they are:
        no row is copied to add a column or pivoted. In-process chDB takes them as an
        Arrow table instead, when `ingest.store.arrow` maps every column's type."""
        if not (columns and columns[0]):
            return
        schema = self.arrow_schema(table, column_names)
        if schema is not None:
            from ingest.store.arrow import arrow_table

            self._insert_table(table, arrow_table(schema, columns), settings)
            return
        self._insert(table, columns, column_names, settings, columnar=True)

    def arrow_schema(self, table: str, column_names: Sequence[str]) -> pa.Schema | None:
        """The Arrow schema `insert_arrow` takes `table`'s `column_names` in; None when
        this store takes no Arrow (a server: Native) or a column's type is not one
        `ingest.store.arrow` maps."""
        if self._arrow is None:
            return None
        with self._lock:
            return self._arrow.client().arrow_schema(table, column_names)

    def insert_arrow(
        self, table: str, data: pa.Table, settings: Mapping[str, Any] | None = None
    ) -> None:
        """`data`, built in the schema `arrow_schema` gave, into `table` (in-process chDB
        only: `arrow_schema` is None elsewhere)."""
        if self._arrow is None:
            raise TypeError(f"{self.display_url} takes no Arrow tables")
        self._insert_table(table, data, settings)

    def _insert_table(self, table: str, data: pa.Table, settings: Mapping[str, Any] | None) -> None:
        """An Arrow table into in-process chDB, under this store's insert settings and
        dedup token (`insert_arrow` and `insert_columns`)."""
        assert self._arrow is not None
        sent = dedup_settings(self._token, table, settings) if self._token else settings
        with self._lock:
            self._arrow.client().insert_table(
                table, data, {**self._insert_settings, **(sent or {})}
            )

    def _insert(
        self,
        table: str,
        data: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None,
        *,
        columnar: bool,
    ) -> None:
        names = list(column_names)
        key = (table, tuple(names))
        if self._token is not None:
            settings = dedup_settings(self._token, table, settings)
        with self._lock:
            if _is_embedded_client(self._client):
                rows = [list(row) for row in zip(*data, strict=True)] if columnar else data
                self._client.insert(table, rows, names, settings)
                return
            types = self._column_types.get(key)
            if types is None:
                table_types = self._client.create_insert_context(table, names).column_types
                self._column_types[key] = types = [_plain(t) for t in table_types]
            self._client.insert(
                table,
                list(data),
                column_names=names,
                column_types=types,
                settings={**self._insert_settings, **(settings or {})},
                column_oriented=columnar,
            )

    def with_token(self, token: str) -> ClickHouseStore:
        """This connection (its client, lock and column types), every insert carrying
        `insert_deduplication_token` `{token}:{table}`, so a server with insert
        deduplication drops an identical retried block. A `ClickHouseStore` still, so
        `ingest.store.rows.write_rows` keeps its column-wise inserts."""
        view = copy.copy(self)
        view._token = token
        return view

    def close(self) -> None:
        with self._lock:
            if self._arrow is not None:
                self._arrow.close()
            self._client.close()

    def reopen(self) -> ClickHouseStore:
        """A second connection to the same store, with its own lock: long jobs and
        admin queries on it never hold up the inserts on this one (chDB allows
        several connections to the directory its process owns)."""
        return open_store(self.url, direct=_is_embedded_client(self._client))


class _ArrowConnection:
    """The chDB connection `ClickHouseStore.insert_columns` sends Arrow tables on,
    opened at its first insert (calls serialized by the store's lock)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._client: EmbeddedClient | None = None
        self._finalizer: Callable[[], Any] | None = None
        _load_pyarrow()

    def client(self) -> EmbeddedClient:
        if self._client is None:
            from ingest.store.embedded import open_embedded

            self._client = open_embedded(self._path)
            # A store left open at exit: this connection closes before clickhouse-connect's
            # (finalizers run newest first), else chDB's engine stops under it.
            self._finalizer = weakref.finalize(self, self._client.close)
        return self._client

    def close(self) -> None:
        finalizer, self._finalizer, self._client = self._finalizer, None, None
        if finalizer is not None:
            finalizer()  # closes the connection, once, and lets go of it (its kept buffer)


def _load_pyarrow() -> None:
    """pyarrow, and its first array built (which sets the library up), when a store
    opens rather than in the first drain, where ~0.2 s of CPU under the GIL would stall
    the decode thread. Its first `array()` would import pandas (~0.1 s, ~50 MiB) only
    to ask whether the list is a pandas object: imported with pandas unavailable (as
    `_skip_pandas_probe`, no pandas object exists while pandas is not imported), pyarrow
    remembers it has none; a later `import pandas` works as usual."""
    with _chdb_import:
        blocker = None if "pandas" in sys.modules else _NoPandas()
        if blocker is not None:
            sys.meta_path.insert(0, blocker)
        try:
            importlib.import_module("pyarrow").array([0])
        finally:
            if blocker is not None:
                sys.meta_path.remove(blocker)


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import of pandas fails while this finder is first on `sys.meta_path`."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError(f"{fullname} is not imported here")


def _is_chdb_client(client: object) -> bool:
    """clickhouse-connect's client of an in-process chDB store."""
    return type(client).__name__ == "ChdbClient"


def _is_embedded_client(client: object) -> TypeIs[EmbeddedClient]:
    module = sys.modules.get("ingest.store.embedded")
    return module is not None and isinstance(client, module.EmbeddedClient)


class PreEscaped:
    """A string query parameter escaped here, as ClickHouse reads a parameter's value:
    a backslash before each backslash, quote, backtick, tab and newline (the rule of
    clickhouse-connect's `escape_str`). clickhouse-connect escapes a `str` parameter a
    character at a time in Python, which for tens of kilobytes (a commit's keys, in
    `ingest.store.owners`) costs more than the query; a value of a type it does not
    know it sends as `str(value)`. Only for a `ClickHouseStore`: another `Store`
    (the admin endpoint's client) needs the plain `str`."""

    _SPECIAL = "\\'`\t\n"
    _ESCAPES = str.maketrans({c: "\\" + c for c in _SPECIAL})

    def __init__(self, text: str) -> None:
        # Most texts (a commit's keys) hold none of them: five scans in C, no copy.
        special = any(c in text for c in self._SPECIAL)
        self._text = text.translate(self._ESCAPES) if special else text

    def __str__(self) -> str:
        return self._text


def _plain(column_type: ClickHouseType) -> ClickHouseType:
    """LowCardinality(T) sent as T: clickhouse-connect builds LowCardinality
    dictionaries value by value in Python, ClickHouse converts T on insert in C++."""
    from clickhouse_connect.datatypes.registry import get_from_name

    name = column_type.name
    if name.startswith("LowCardinality(") and name.endswith(")"):
        return get_from_name(name[len("LowCardinality(") : -1])
    return column_type


def open_store(url: str, *, direct: bool = False) -> ClickHouseStore:
    """Connect to the store at `url` (creating a chDB directory if needed); `direct`:
    see `connect_client`."""
    url = normalize_store_url(url)
    return ClickHouseStore(url, connect_client(url, direct=direct))


@overload
def connect_client(url: str, *, session: bool = True, direct: Literal[False] = False) -> Client: ...


@overload
def connect_client(url: str, *, session: bool = True, direct: bool) -> Client | EmbeddedClient: ...


def connect_client(url: str, *, session: bool = True, direct: bool = False) -> Any:
    """A new client for a normalized store URL: clickhouse-connect's `Client`, or with
    `direct` on a chDB store an `EmbeddedClient` (chDB's own connection, the same
    values without clickhouse-connect's import and handshake: for a command that
    opens the store itself). `session=False` keeps a server from holding state
    between this client's requests (chDB connections are always their own session)."""
    parsed = urlparse(url)
    if parsed.scheme == "chdb" and direct:
        from ingest.store.embedded import open_embedded

        own_data_dir(Path(parsed.path))
        return open_embedded(Path(parsed.path))
    import clickhouse_connect

    _skip_pandas_probe()
    if parsed.scheme == "chdb":
        own_data_dir(Path(parsed.path))
        _chdb_without_arrow()
        return clickhouse_connect.get_client(dsn=url)
    return clickhouse_connect.get_client(
        host=parsed.hostname,
        port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
        username=parsed.username or "default",
        password=parsed.password or "",
        secure=parsed.scheme == "https",
        database="default",
        autogenerate_session_id=session,
    )


_CHDB_CONNECTION_MODULE = "chdb.state.sqlitelike"
_chdb_import = threading.Lock()


def _chdb_without_arrow() -> None:
    """chDB's connection module imports pyarrow, for its Arrow APIs only, and reads it as
    optional (None when absent): a fifth of a second of CPU and tens of MiB at every
    start, for nothing clickhouse-connect does (it reads and writes Native; a store
    that writes Arrow loads pyarrow itself, `_load_pyarrow`, and inserts through a
    connection of its own). Load that
    module with pyarrow unavailable, unless pyarrow is already loaded; a later `import
    pyarrow` anywhere works as usual."""
    with _chdb_import:
        if _CHDB_CONNECTION_MODULE in sys.modules or "pyarrow" in sys.modules:
            return
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import says absent
        try:
            importlib.import_module(_CHDB_CONNECTION_MODULE)
        finally:
            if "pyarrow" in sys.modules and sys.modules["pyarrow"] is None:
                del sys.modules["pyarrow"]


def _skip_pandas_probe() -> None:
    """clickhouse-connect imports pandas (a second or more) on the first insert only to
    ask whether the rows are a DataFrame. Ours never are, and no DataFrame can exist
    while pandas is not imported: tell it there is none."""
    from clickhouse_connect.driver import options

    if "pandas" not in sys.modules and "pd" not in vars(options):
        options.pd = None
        options.pd_time_test = None


def own_data_dir(path: Path) -> None:
    """Make `path` the owner's alone, for everything chDB will create under it.

    chDB creates its directories and files with the process umask, so the process
    that holds an embedded store keeps umask 077 (0700 directories, 0600 files) from
    here on; the directory itself is set to 0700 even if it existed before. One that
    exists and another user owns, or group or others may write, is refused
    (`UnsafeFile`): someone else could have planted files in it."""
    from ingest.filecheck import check_owned_dir

    os.umask(0o077)
    if path.exists():
        check_owned_dir(path, "data directory")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
