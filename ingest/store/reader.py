"""Read-only connections to the store, and the admin endpoint's connections.

A `ReadOnlyStore` is what `holonograph query` without `--write`, the admin
endpoint's read token and read-only jobs run on. Read-only is the server's decision,
never the caller's: on chDB the connection is its own session on which we `SET
readonly = 1` (after the tenant filter) before any caller's statement, so no later
statement can lower either; on a ClickHouse server every request carries
`readonly=1` (and the tenant filter) without a server session. Every statement also
passes `ingest.store.querygate` first, but on a reader opened for a job's own
statements (`gate=False`): their text is written in this code base, never a user's or
a client's, with every value bound on the server, so the gate, which guards what
`readonly = 1` alone lets through (SYSTEM, KILL, file(), INTO OUTFILE, a second
statement), has nothing to decide there; the session is read-only all the same.

A tenant-scoped reader sees only that tenant's rows in every `holonograph` table
that has a `tenant_id` column (found at open, not listed here), through the
server's `additional_table_filters` setting.

Every reader carries its `ReadLimits` the same way (`ingest.store.limits`): a query
that reaches one is stopped by the server with `ReadLimitExceeded`, and the
connection goes on serving. A statement run for a client that may go away carries a
marker (`marked`), so `cancel_marked` can find it in `system.processes` and stop it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ingest.store.clickhouse import connect_client, open_store
from ingest.store.embedded import EmbeddedClient, literal
from ingest.store.limits import (
    DEFAULT_READ_LIMITS,
    READ_OS_THREAD_PRIORITY,
    LimitRequest,
    ReadLimitExceeded,
    ReadLimits,
    limit_hit,
)
from ingest.store.querygate import EngineFunctions, StatementRefused, check_statement
from ingest.store.url import is_embedded, normalize_store_url
from schemas.store import QueryResult, Store
from schemas.tables import DATABASE

if TYPE_CHECKING:  # imported by the connection that uses it (not by a command's own chDB)
    from clickhouse_connect.driver.client import Client

TENANT_COLUMN = "tenant_id"
_PASSED_KEPT = 256  # statements a connection remembers the gate passed
_PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SERVER_BIND = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*:[^}]+\}")  # a `{name:Type}` placeholder


class ReadOnlyStore:
    """A `Store` that only reads; `command` and `insert` are refused."""

    def __init__(
        self,
        url: str,
        client: Client | EmbeddedClient,
        *,
        table_functions: EngineFunctions,
        request_settings: Mapping[str, Any],
        tenant: str | None,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
        gate: bool = True,
    ) -> None:
        self.url = url
        self.tenant = tenant
        self.limits = limits
        self._client = client
        self._table_functions = table_functions
        self._settings = dict(request_settings)
        self._lock = threading.Lock()
        # Statements the gate passed, with their parameters: the same text and values
        # parse the same on a session nothing can change (readonly=1), so a job asking
        # twice is checked once. On chDB every reader of this process shares the
        # verdicts (one engine, whose parser and functions are those of this process:
        # a command's readers with other limits or scopes ask what its first asked).
        self._passed = _engine_passed if is_embedded(url) else _Passed()
        self._gate = gate

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        params = dict(parameters or {})
        _check_parameters(sql, params)
        text = unmarked(sql)  # the caller's text: parser positions count from its start
        key = (text, repr(sorted(params.items())))
        with self._lock:
            if self._gate and not self._passed.has(key):
                check_statement(
                    self._client,
                    text,
                    params,
                    settings=self._settings,
                    table_functions=self._table_functions,
                )
                self._passed.add(key)
            try:
                result = self._client.query(sql, parameters=params, settings=self._settings)
            except Exception as err:
                limit = limit_hit(err)
                if limit is None:
                    raise
                raise ReadLimitExceeded(_first_line(err), limit) from None
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


class _Passed:
    """The last `_PASSED_KEPT` statements (text, parameters) the gate passed."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], None] = {}
        self._lock = threading.Lock()

    def has(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._keys

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            if key not in self._keys and len(self._keys) >= _PASSED_KEPT:
                self._keys.pop(next(iter(self._keys)))
            self._keys[key] = None


# What the gate passed on this process's chDB engine, for all of its readers.
_engine_passed = _Passed()


def _check_parameters(sql: str, parameters: Mapping[str, Any]) -> None:
    """Parameters must bind on the server (`{name:Type}`): clickhouse-connect would
    otherwise format them into the SQL text after the gate saw it."""
    if not parameters:
        return
    if not _SERVER_BIND.search(sql) or not all(map(_PARAMETER_NAME.match, parameters)):
        raise StatementRefused("refused: parameters bind on the server only, as {name:Type}")


def open_reader(
    url: str,
    tenant: str | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    *,
    direct: bool = False,
    gate: bool = True,
) -> ReadOnlyStore:
    """A new read-only connection to the store at `url`, scoped to `tenant` if given,
    every query within `limits`; `direct`: see `connect_client`; `gate`: see
    `read_only`."""
    url = normalize_store_url(url)
    client = connect_client(url, session=is_embedded(url), direct=direct)
    return read_only(url, client, tenant, limits, gate=gate)


def read_only(
    url: str,
    client: Client | EmbeddedClient,
    tenant: str | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    *,
    gate: bool = True,
    tenant_tables: Sequence[str] | None = None,
) -> ReadOnlyStore:
    """`client` (a new connection to normalized `url`, nothing run on it yet but what
    its opener chose) as a `ReadOnlyStore` within `limits`: on chDB its session is made
    read-only for good (one `SET`, `readonly` last) before it is returned. Closes
    `client` if that fails.
    Without `gate` the statement gate is skipped: only for a caller whose statements
    are all its own code's (a job's), never a user's or client's text.
    `tenant_tables`: every table and view with a tenant column, when the opener has
    just read them on this connection (else they are read here)."""
    embedded = is_embedded(url)
    try:
        filters = tenant_filters(client, tenant, tenant_tables) if tenant is not None else {}
        table_functions = _table_functions(client, embedded) if gate else EngineFunctions(())
        settings: dict[str, Any] = {}
        if filters:
            settings["additional_table_filters"] = filters
        settings.update(_limit_settings(client, limits, embedded))
        settings["readonly"] = 1  # last: with it set, nothing can be changed any more
        if embedded:  # one statement: its settings apply in order, `readonly` the last
            assigned = ", ".join(f"{k} = {_setting_literal(v)}" for k, v in settings.items())
            client.command(f"SET {assigned}")
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
        limits=limits,
        gate=gate,
    )


def _limit_settings(
    client: Client | EmbeddedClient, limits: ReadLimits, embedded: bool
) -> dict[str, Any]:
    """The limits, and the niceness that lets the commit path's threads run first, as
    session (chDB) or request (server) settings. A server user whose
    profile is already read-only may change no setting: its profile's limits apply
    (`deploy/clickhouse/users.d/holonograph.xml` sets them for `holonograph_reader`)."""
    settings = {**limits.settings(), "os_thread_priority": READ_OS_THREAD_PRIORITY}
    if not embedded:
        # The server stops a read when its HTTP client goes away (Ctrl-C, a deadline).
        settings["cancel_http_readonly_queries_on_client_close"] = 1
        known = getattr(client, "server_settings", {})
        settings = {k: v for k, v in settings.items() if k in known and not known[k].readonly}
    return settings


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


MARK = "holonograph-request"
_MARKER = re.compile(r"^[0-9a-f]{32}$")


def new_marker() -> str:
    """A random marker for the statements of one client request."""
    return secrets.token_hex(16)


class Marked:
    """`store` whose statements start with the comment `/* holonograph-request <marker> */`
    on a line of its own, by which `cancel_marked` finds them. A comment changes nothing
    of what runs; it leads, since an INSERT's inline data runs to the end of the text."""

    def __init__(self, store: Store, marker: str) -> None:
        if not _MARKER.match(marker):
            raise ValueError("a marker is 32 lower-case hex digits")
        self.url = store.url
        self.limits: ReadLimits | None = getattr(store, "limits", None)
        self._store = store
        self._prefix = f"/* {MARK} {marker} */\n"

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self._store.query(self._prefix + sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._store.command(self._prefix + sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._store.insert(table, rows, column_names, settings)

    def close(self) -> None:
        """Nothing: the connection belongs to whoever opened it."""


_MARKED = re.compile(rf"^/\* {MARK} [0-9a-f]{{32}} \*/\n")


def unmarked(sql: str) -> str:
    """`sql` without the leading marker `Marked` gave it (the rest is what the caller
    sent; the marker before it is a closed comment, which changes nothing)."""
    return _MARKED.sub("", sql, count=1)


def cancel_marked(store: Store, marker: str) -> None:
    """Ask the server to stop every running statement that carries `marker` (a writing
    connection: a read-only one may not KILL). The marker is spelled in two literals,
    so this statement, also in `system.processes`, does not match itself."""
    if not _MARKER.match(marker):
        raise ValueError("a marker is 32 lower-case hex digits")
    store.command(f"KILL QUERY WHERE position(query, concat('{MARK} ', '{marker}')) > 0 ASYNC")


def running_marked(store: Store, marker: str) -> int:
    """How many statements carrying `marker` the server is running."""
    if not _MARKER.match(marker):
        raise ValueError("a marker is 32 lower-case hex digits")
    return int(
        store.query(
            "SELECT count() FROM system.processes"
            f" WHERE position(query, concat('{MARK} ', '{marker}')) > 0"
        ).scalar()
    )


def tenant_filters(
    client: Client | EmbeddedClient, tenant: str, tables: Sequence[str] | None = None
) -> dict[str, str]:
    """`additional_table_filters` keeping only `tenant`'s rows of every holonograph
    table or view that has a tenant column (`tables`, when the caller has them)."""
    if tables is None:
        tables = [
            str(table)
            for (table,) in client.query(
                "SELECT table FROM system.columns"
                " WHERE database = {db:String} AND name = {col:String} ORDER BY table",
                parameters={"db": DATABASE, "col": TENANT_COLUMN},
            ).result_rows
        ]
    condition = f"{TENANT_COLUMN} = {literal(tenant)}"
    return {f"{DATABASE}.{table}": condition for table in tables}


# The embedded engine's table functions: a fact of the chDB in this process, read once
# (a command opens several connections); which of them are also ordinary functions is
# asked only when a statement calls one (`EngineFunctions`).
_engine_table_functions: EngineFunctions | None = None


def _table_functions(client: Client | EmbeddedClient, embedded: bool) -> EngineFunctions:
    global _engine_table_functions
    if embedded and _engine_table_functions is not None:
        return _engine_table_functions
    rows = client.query("SELECT name FROM system.table_functions").result_rows
    functions = EngineFunctions(str(name) for (name,) in rows)
    if embedded:
        _engine_table_functions = functions
    return functions


def _setting_literal(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return literal(value)


class StoreSessions:
    """Connections to one store for the admin endpoint, one per request, so nothing
    a request leaves in its session (a SET, a USE, a refused statement) reaches
    another request or the owner's own jobs.

    A writer is opened for each request and closed after it. Read-only connections
    without a tenant and with the owner's `limits` are kept for later requests (at
    most `keep` idle): their session is fixed when they open (readonly=1) and nothing
    the gate lets through can change it. Tenant-scoped ones, and those with a client's
    lower limits, are opened per request, so a filter covers every tenant-bearing table
    that exists at that moment. `cancel` stops a request's marked statements from a
    control connection of its own."""

    def __init__(self, url: str, keep: int = 4, limits: ReadLimits = DEFAULT_READ_LIMITS) -> None:
        self.url = url
        self.limits = limits
        self._keep = keep
        self._idle: list[ReadOnlyStore] = []
        self._lock = threading.Lock()
        self._control: Store | None = None
        self._control_lock = threading.Lock()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        store = open_store(self.url)
        try:
            yield store
        finally:
            store.close()

    @contextlib.contextmanager
    def reading(
        self, tenant: str | None = None, limits: LimitRequest | None = None
    ) -> Iterator[Store]:
        wanted = ReadLimits.from_mapping(limits or {}, base=self.limits).within(self.limits)
        if tenant is not None or wanted != self.limits:
            scoped = open_reader(self.url, tenant, wanted)
            try:
                yield scoped
            finally:
                scoped.close()
            return
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        reader = reader or open_reader(self.url, limits=self.limits)
        try:
            yield reader
        finally:
            with self._lock:
                kept = len(self._idle) < self._keep
                if kept:
                    self._idle.append(reader)
            if not kept:
                reader.close()

    def cancel(self, marker: str) -> None:
        """Stop the statements of the request marked `marker` (see `Marked`)."""
        with self._control_lock:
            if self._control is None:
                self._control = open_store(self.url)
            cancel_marked(self._control, marker)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for reader in idle:
            reader.close()
        with self._control_lock:
            control, self._control = self._control, None
        if control is not None:
            control.close()
