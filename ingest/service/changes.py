"""Where the receiver's change records go: the store it owns, through `schemas.changelog`
(the HTTP endpoint is `ingest.edge.change_api`). One write at a time, so two requests
with one id are one change; a store that fails is `Unavailable` (503, retry), an id
recorded with other content stays a `ChangeConflict` (409)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from ingest.errors import Unavailable
from ingest.store.errors import describe
from schemas.changelog import (
    ChangeConflict,
    ChangeQuery,
    list_changes,
    mark_availability,
    record_change,
)
from schemas.changes import AvailabilityMark, ChangeEvent, ChangeRecord
from schemas.store import Store
from schemas.times import Clock, utc_now

T = TypeVar("T")


class StoreChangeLog:
    def __init__(self, store: Store, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()

    async def _run(self, work: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work()

        try:
            return await asyncio.to_thread(locked)
        except ChangeConflict:
            raise
        except Exception as err:
            raise Unavailable(f"the change log is unavailable: {describe(err)}") from err

    async def record(self, tenant_id: str, record: ChangeRecord) -> tuple[ChangeEvent, bool]:
        return await self._run(lambda: record_change(self._store, tenant_id, record, self._clock()))

    async def mark(self, tenant_id: str, mark: AvailabilityMark) -> tuple[ChangeEvent, bool]:
        return await self._run(
            lambda: mark_availability(self._store, tenant_id, mark, self._clock())
        )

    async def changes(self, query: ChangeQuery) -> list[ChangeEvent]:
        return await self._run(lambda: list_changes(self._store, query))
