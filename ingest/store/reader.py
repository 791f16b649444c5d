"""Read-only connections to the store, and the admin endpoint's connections.

A `ReadOnlyStore` is what `holonograph query` without `--write`, the admin
endpoint's read token and read-only jobs run on. Read-only is the server's decision,
never the caller's: on chDB the connection is its own session on which we `SET
readonly = 1` (after the tenant filter) before any caller's statement, so no later
statement can lower either; on a ClickHouse server every request carries
`readonly=1` (and the tenant filter) without a server session. Every statement also
passes `ingest.store.querygate` first.

A tenant-scoped reader sees only that tenant's rows in every `holonograph` table
that has a `tenant_id` column (found at open, not listed here), through the
server's `additional_table_filters` setting.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from clickhouse_connect.driver.binding import external_bind_re, format_query_value
from clickhouse_connect.driver.client import Client

from ingest.store.clickhouse import connect_client, open_store
from ingest.store.querygate import StatementRefused, check_statement
from ingest.store.url import is_embedded, normalize_store_url
from schemas.store import QueryResult, Store
from schemas.tables import DATABASE

TENANT_COLUMN = "tenant_id"
_PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ReadOnlyStore:
    """A `Store` that only reads; `command` and `insert` are refused."""

    def __init__(
        self,
        url: str,
        client: Client,
        *,
        table_functions: frozenset[str],
        request_settings: Mapping[str, Any],
        tenant: str | None,
    ) -> None:
        self.url = url
        self.tenant = tenant
        self._client = client
        self._table_functions = table_functions
        self._settings = dict(request_settings)
        self._lock = threading.Lock()

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        params = dict(parameters or {})
        _check_parameters(sql, params)
        with self._lock:
            check_statement(
                self._client,
                sql,
                params,
                settings=self._settings,
                table_functions=self._table_functions,
            )
            result = self._client.query(sql, parameters=params, settings=self._settings)
        return QueryResult(tuple(result.column_names), [tuple(r) for r in result.result_rows])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        raise StatementRefused("refused: this connection is read-only (no commands)")

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        raise StatementRefused("refused: this connection is read-only (no inserts)")

    def close(self) -> None:
        with self._lock:
            self._client.close()


def _check_parameters(sql: str, parameters: Mapping[str, Any]) -> None:
    """Parameters must bind on the server (`{name:Type}`): clickhouse-connect would
    otherwise format them into the SQL text after the gate saw it."""
    if not parameters:
        return
    if not external_bind_re.search(sql) or not all(map(_PARAMETER_NAME.match, parameters)):
        raise StatementRefused("refused: parameters bind on the server only, as {name:Type}")


def open_reader(url: str, tenant: str | None = None) -> ReadOnlyStore:
    """A new read-only connection to the store at `url`, scoped to `tenant` if given."""
    url = normalize_store_url(url)
    embedded = is_embedded(url)
    client = connect_client(url, session=embedded)
    try:
        filters = tenant_filters(client, tenant) if tenant is not None else {}
        table_functions = _table_functions(client)
        settings: dict[str, Any] = {}
        if filters:
            settings["additional_table_filters"] = filters
        settings["readonly"] = 1  # last: with it set, nothing can be changed any more
        if embedded:
            for name, value in settings.items():
                client.command(f"SET {name} = {_setting_literal(value)}")
            settings = {}
    except BaseException:
        client.close()
        raise
    return ReadOnlyStore(
        url,
        client,
        table_functions=table_functions,
        request_settings=settings,
        tenant=tenant,
    )


def tenant_filters(client: Client, tenant: str) -> dict[str, str]:
    """`additional_table_filters` keeping only `tenant`'s rows of every holonograph
    table or view that has a tenant column."""
    tables = client.query(
        "SELECT table FROM system.columns WHERE database = {db:String} AND name = {col:String}"
        " ORDER BY table",
        parameters={"db": DATABASE, "col": TENANT_COLUMN},
    ).result_rows
    condition = f"{TENANT_COLUMN} = {format_query_value(tenant)}"
    return {f"{DATABASE}.{table}": condition for (table,) in tables}


def _table_functions(client: Client) -> frozenset[str]:
    rows = client.query(
        "SELECT name FROM system.table_functions"
        " WHERE name NOT IN (SELECT name FROM system.functions)"
    ).result_rows
    return frozenset(str(name) for (name,) in rows)


def _setting_literal(value: Any) -> str:
    if isinstance(value, dict):
        pairs = ", ".join(
            f"{format_query_value(k)}: {format_query_value(v)}" for k, v in value.items()
        )
        return "{" + pairs + "}"
    return str(format_query_value(value))


class StoreSessions:
    """Connections to one store for the admin endpoint, one per request, so nothing
    a request leaves in its session (a SET, a USE, a refused statement) reaches
    another request or the owner's own jobs.

    A writer is opened for each request and closed after it. Read-only connections
    without a tenant are kept for later requests (at most `keep` idle): their session
    is fixed when they open (readonly=1) and nothing the gate lets through can change
    it. Tenant-scoped ones are opened per request, so their filter covers every
    tenant-bearing table that exists at that moment."""

    def __init__(self, url: str, keep: int = 4) -> None:
        self.url = url
        self._keep = keep
        self._idle: list[ReadOnlyStore] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        store = open_store(self.url)
        try:
            yield store
        finally:
            store.close()

    @contextlib.contextmanager
    def reading(self, tenant: str | None = None) -> Iterator[Store]:
        if tenant is not None:
            scoped = open_reader(self.url, tenant)
            try:
                yield scoped
            finally:
                scoped.close()
            return
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        reader = reader or open_reader(self.url)
        try:
            yield reader
        finally:
            with self._lock:
                kept = len(self._idle) < self._keep
                if kept:
                    self._idle.append(reader)
            if not kept:
                reader.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for reader in idle:
            reader.close()
