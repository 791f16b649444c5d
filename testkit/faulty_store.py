"""A store wrapper that can be made to fail: the seam tests (and chaos drills) use to
take the store away without killing anything."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.store import QueryResult, Store


class StoreDown(ConnectionError):
    """Raised by `FaultyStore` while it is failing."""


class FaultyStore:
    """Delegates to `inner` until `fail()` (retryable) or, for chosen rows, `refuse()`
    (permanent); counts inserts so tests can see batching."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.url = inner.url
        self._failing: str | None = None
        self._error: type[Exception] = StoreDown
        self._fail_after_inserts: int | None = None
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._gate.set()
        self._held_table: str | None = None
        self.held = threading.Event()
        self.failed = threading.Event()
        self.insert_calls: list[tuple[str, int]] = []
        self.queries: list[str] = []  # the SQL of every query, in order
        self._refused: frozenset[str] = frozenset()
        self.refusals = 0

    def hold(self, table: str | None = None) -> None:
        """Make the next inserts (into `table` only, when given: e.g. a write's rows,
        not the ownership claims before them) wait, as a slow store would, until
        `release()`; `held` is set once an insert is waiting."""
        self._held_table = table
        self.held.clear()
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def fail(
        self,
        message: str = "store is down (injected)",
        after_inserts: int = 0,
        error: type[Exception] = StoreDown,
    ) -> None:
        """Fail every call from now on (or after `after_inserts` more successful inserts),
        raising `error` (default `StoreDown`; another type stands for a bug)."""
        with self._lock:
            self._failing = message
            self._error = error
            self._fail_after_inserts = after_inserts

    def refuse(self, *values: str) -> None:
        """Refuse every insert with a row holding one of `values` (e.g. an event id)
        the way ClickHouse refuses a value its column cannot take: a permanent error
        that every retry of those rows meets again."""
        with self._lock:
            self._refused = frozenset(values)

    def _check_refused(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        refused = self._refused
        if not refused:
            return
        for row in rows:
            for value in row:
                if isinstance(value, str) and value in refused:
                    from clickhouse_connect.driver.exceptions import DatabaseError

                    with self._lock:
                        self.refusals += 1
                    raise DatabaseError(
                        f"Code: 53. DB::Exception: Cannot convert {value!r} for {table}"
                        " (injected). (TYPE_MISMATCH)",
                        code=53,
                        name="TYPE_MISMATCH",
                    )

    def heal(self) -> None:
        with self._lock:
            self._failing = None
            self._fail_after_inserts = None

    def _check(self, counts_as_insert: bool = False) -> None:
        with self._lock:
            if self._failing is None:
                return
            if counts_as_insert and self._fail_after_inserts:
                self._fail_after_inserts -= 1
                return
            self.failed.set()
            raise self._error(self._failing)

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self._check()
        self.queries.append(sql)
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._check()
        self._inner.command(sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not self._gate.is_set() and self._held_table in (None, table):
            self.held.set()
            self._gate.wait()
        self._check(counts_as_insert=True)
        self._check_refused(table, rows)
        self._inner.insert(table, rows, column_names, settings)
        self.insert_calls.append((table, len(rows)))

    def close(self) -> None:
        self._inner.close()
