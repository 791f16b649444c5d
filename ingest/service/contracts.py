"""Where the receiver's contract registrations go: the registrars the HTTP endpoint
(`ingest.edge.contract_api`) calls, one per delivery path.

Embedded (`StoreRegistrar`): the store is the registry; a registration is written
there and put into the receiver's `ContractBook` at once, and the receiver's refresh
brings registrations made elsewhere within `--contract-refresh-seconds`.
"""

from __future__ import annotations

import asyncio
import threading

from ingest.errors import Unavailable
from ingest.export.contracts import ContractBook
from ingest.store.errors import describe
from schemas.contracts import Contract, ContractSummary
from schemas.registry import active_version, find_version, register, summary_of
from schemas.store import Store
from schemas.times import Clock, utc_now


class StoreRegistrar:
    """Registrations into the store the receiver owns."""

    def __init__(self, store: Store, book: ContractBook, clock: Clock = utc_now) -> None:
        self._store = store
        self._book = book
        self._clock = clock
        # One registration at a time: each reads the active version it replaces.
        self._lock = threading.Lock()

    def _register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        with self._lock:
            registration = register(self._store, tenant_id, contract, self._clock())
        self._book.put(registration.version)
        return registration.summary, registration.created

    def _summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None:
        found = (
            find_version(self._store, tenant_id, agent_id, version_id)
            if version_id
            else active_version(self._store, tenant_id, agent_id)
        )
        return summary_of(self._store, found) if found is not None else None

    async def register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        try:
            return await asyncio.to_thread(self._register, tenant_id, contract)
        except Exception as err:
            raise Unavailable(f"the contract registry is unavailable: {describe(err)}") from err

    async def summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None:
        try:
            return await asyncio.to_thread(self._summary, tenant_id, agent_id, version_id)
        except Exception as err:
            raise Unavailable(f"the contract registry is unavailable: {describe(err)}") from err
