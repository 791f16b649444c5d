"""Services the wiring runs beside the receiver (the scheduler of `serve --schedule`):
`ReceiverService(background=[...])`. `ingest` never imports `processors`, so what runs
jobs is handed in, like the routes (`ingest.service.routes`).

Each is started after the listeners, with the receiver's metrics registry (its metrics
appear on `/metrics`), and stopped first. `status()` is added to the `/readyz` body
under its `name`; `degraded()` says why it is degraded (still 200), or None.
"""

from __future__ import annotations

from typing import Any, Protocol

from prometheus_client import CollectorRegistry


class Background(Protocol):
    name: str

    async def start(self, registry: CollectorRegistry) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> Any: ...

    def degraded(self) -> str | None: ...
