"""Readers of a process whose embedded hand-off logs commits (`ingest.handoff.smalllog`)
read what was acknowledged: every session, and every statement of the periodic jobs,
first waits for the log to be drained up to the last acknowledged commit. A writing
session may claim event ids itself (an override through the API or the admin
endpoint): the log's claim index reads those claims before its next decision. A job's
insert claims only when it writes a table that claims (`CLAIMING`): the completeness
job's inserts every refresh did not, and each made the index re-read every claim the
log had drained since the last one, on the log's thread (bench/RESULTS.md, "Tenth
round")."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ingest.handoff.smalllog import SmallLog
from ingest.service.workers import Sessions
from ingest.store.limits import LimitRequest
from schemas.store import QueryResult, Store
from schemas.tables import EVALUATION_EVENTS, EVENT_OWNERS, STREAM_OWNERS

# Tables an insert into which claims a key: the claims' own, and the events' (migration
# 0016's `event_owners_mv` claims every event id written).
CLAIMING = frozenset(
    name
    for table in (EVENT_OWNERS, STREAM_OWNERS, EVALUATION_EVENTS)
    for name in (table.name, table.qualified)
)


def claims(table: str) -> bool:
    """Whether an insert into `table` (named as an insert names it) may claim a key."""
    name = table.replace("`", "").replace('"', "").strip().lower()
    return name in CLAIMING


class LoggedSessions:
    """`Sessions` whose connections open once the store holds what was acknowledged.
    `log` may be a function giving the log once the receiver has opened it (None:
    no log, nothing to wait for), for sessions made before the receiver (the
    scheduler's)."""

    def __init__(self, inner: Sessions, log: SmallLog | Callable[[], SmallLog | None]) -> None:
        self._inner = inner
        self._log = log

    def _current(self) -> SmallLog | None:
        return self._log if isinstance(self._log, SmallLog) else self._log()

    @contextmanager
    def reading(
        self, tenant: str | None = None, limits: LimitRequest | None = None
    ) -> Iterator[Store]:
        log = self._current()
        if log is not None:
            log.wait_drained()
        with self._inner.reading(tenant, limits) as store:
            yield store

    @contextmanager
    def writing(self) -> Iterator[Store]:
        log = self._current()
        if log is not None:
            log.wait_drained()
        try:
            with self._inner.writing() as store:
                yield store
        finally:
            if log is not None:
                log.index.foreign_write()

    def cancel(self, marker: str) -> None:
        self._inner.cancel(marker)

    def close(self) -> None:
        self._inner.close()


class DrainedStore:
    """A `Store` (the periodic jobs') whose every statement waits for the drain."""

    def __init__(self, inner: Store, log: SmallLog) -> None:
        self._inner = inner
        self._log = log
        self.url = getattr(inner, "url", "")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self._log.wait_drained()
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._log.wait_drained()
        self._inner.command(sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._log.wait_drained()
        self._inner.insert(table, rows, column_names, settings)
        if claims(table):
            self._log.index.foreign_write()

    def close(self) -> None:
        self._inner.close()
