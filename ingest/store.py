"""ClickHouse through clickhouse-connect: a server over HTTP(S) or chDB in-process.

`open_store` turns a store URL into a `schemas.store.Store`. An embedded (chDB)
store can be opened by one process at a time; other commands reach it through that
process's admin endpoint instead (see `ingest.admin`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from schemas.store import QueryResult

if TYPE_CHECKING:  # clickhouse-connect is imported when a store is opened, not for URLs
    from clickhouse_connect.datatypes.base import ClickHouseType
    from clickhouse_connect.driver.client import Client


class StoreURLError(ValueError):
    """The store URL is neither `chdb:///path` nor `http(s)://host:port`."""


def chdb_url(data_dir: str | Path) -> str:
    return f"chdb://{Path(data_dir).resolve()}"


def normalize_store_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme == "chdb":
        path = (parsed.netloc + parsed.path) if parsed.netloc else parsed.path
        if not path:
            raise StoreURLError(
                f"{url!r}: a chdb store needs a directory, e.g. chdb:///var/lib/holo"
            )
        return chdb_url(path)
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname:
            raise StoreURLError(f"{url!r}: no host")
        return url
    raise StoreURLError(f"{url!r}: use chdb:///path or http(s)://host:8123")


def is_embedded(url: str) -> bool:
    return urlparse(url).scheme == "chdb"


def chdb_path(url: str) -> Path:
    return Path(urlparse(normalize_store_url(url)).path)


class ClickHouseStore:
    """A `Store` over one clickhouse-connect client; calls are serialized by a lock
    because a chDB session, like a clickhouse-connect client, is not thread-safe."""

    def __init__(self, url: str, client: Client, readonly: bool = False) -> None:
        self.url = url
        self.readonly = readonly
        self._client = client
        self._lock = threading.Lock()
        # Column types per (table, columns), looked up once: clickhouse-connect would
        # otherwise DESCRIBE the table before every insert (a query per table per commit).
        self._column_types: dict[tuple[str, tuple[str, ...]], Sequence[ClickHouseType]] = {}

    def _settings(self) -> dict[str, Any]:
        # readonly=2 forbids writes but still lets a query set its own settings.
        return {"readonly": 2} if self.readonly else {}

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self.query_as(sql, parameters, readonly=self.readonly)

    def query_as(
        self, sql: str, parameters: Mapping[str, Any] | None = None, *, readonly: bool
    ) -> QueryResult:
        """Query with an explicit read-only choice (the admin endpoint's per-call flag)."""
        settings = {"readonly": 2} if readonly else {}
        with self._lock:
            result = self._client.query(sql, parameters=dict(parameters or {}), settings=settings)
        return QueryResult(tuple(result.column_names), [tuple(r) for r in result.result_rows])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._client.command(sql, parameters=dict(parameters or {}), settings=self._settings())

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not rows:
            return
        if self.readonly:
            raise PermissionError("this store connection is read-only")
        names = list(column_names)
        key = (table, tuple(names))
        with self._lock:
            types = self._column_types.get(key)
            if types is None:
                table_types = self._client.create_insert_context(table, names).column_types
                self._column_types[key] = types = [_plain(t) for t in table_types]
            self._client.insert(
                table,
                list(rows),
                column_names=names,
                column_types=types,
                settings=dict(settings or {}),
            )

    def close(self) -> None:
        with self._lock:
            self._client.close()

    def reopen(self) -> ClickHouseStore:
        """A second connection to the same store, with its own lock: long jobs and
        admin queries on it never hold up the inserts on this one (chDB allows
        several connections to the directory its process owns)."""
        return open_store(self.url)


def _plain(column_type: ClickHouseType) -> ClickHouseType:
    """LowCardinality(T) sent as T: clickhouse-connect builds LowCardinality
    dictionaries value by value in Python, ClickHouse converts T on insert in C++."""
    from clickhouse_connect.datatypes.registry import get_from_name

    name = column_type.name
    if name.startswith("LowCardinality(") and name.endswith(")"):
        return get_from_name(name[len("LowCardinality(") : -1])
    return column_type


def open_store(url: str) -> ClickHouseStore:
    """Connect to the store at `url` (creating a chDB directory if needed)."""
    import clickhouse_connect

    url = normalize_store_url(url)
    parsed = urlparse(url)
    if parsed.scheme == "chdb":
        Path(parsed.path).mkdir(parents=True, exist_ok=True)
        client = clickhouse_connect.get_client(dsn=url)
    else:
        client = clickhouse_connect.get_client(
            host=parsed.hostname,
            port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
            username=parsed.username or "default",
            password=parsed.password or "",
            secure=parsed.scheme == "https",
            database="default",
        )
    return ClickHouseStore(url, client)
