"""Shared fixtures: a real chDB store per test and the real receiver on free ports."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.service.config import ServeConfig
from ingest.service.periodic import Periodic
from ingest.service.receiver import ReceiverService
from ingest.store.clickhouse import ClickHouseStore, open_store
from schemas.migrations import apply_migrations
from schemas.store import Store
from schemas.times import Clock, utc_now
from testkit.faulty_store import FaultyStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ClickHouseStore]:
    """A fresh, migrated embedded store (chDB: one data directory per process)."""
    opened = open_store(f"chdb://{tmp_path / 'store'}")
    apply_migrations(opened)
    yield opened
    opened.close()


class RunningReceiver:
    """The real receiver service on its own event loop in a background thread."""

    def __init__(
        self,
        store: ClickHouseStore,
        periodic: list[Periodic] | None = None,
        clock: Clock = utc_now,
        job_store: Store | None = None,
        **config: Any,
    ) -> None:
        self.store = store
        self.faulty = FaultyStore(store)
        settings = {"grpc_port": 0, "http_port": 0, "admin_port": 0, "store": store.url}
        settings.update(config)
        self.config = ServeConfig(**settings)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.service = ReceiverService(
            self.config,
            store,
            handoff_store=self.faulty,
            periodic=periodic or [],
            clock=clock,
            job_store=job_store,
        )
        listeners = self.call(self.service.start())
        self.grpc_endpoint = f"127.0.0.1:{listeners.grpc_port}"
        self.http_endpoint = f"http://127.0.0.1:{listeners.http_port}"
        self.admin_endpoint = f"http://127.0.0.1:{listeners.admin_port}"

    def call(self, coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.call(self.service.stop(grace_seconds=5))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def receiver(store: ClickHouseStore) -> Iterator[RunningReceiver]:
    running = RunningReceiver(store)
    yield running
    running.stop()
