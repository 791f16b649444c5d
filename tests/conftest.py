"""Shared fixtures: a real store per test and the real receiver on free ports.

The store is a fresh chDB directory per test, or with the containers backend (or
`HOLONOGRAPH_TEST_CLICKHOUSE`) a ClickHouse server whose `holonograph` database is
dropped and migrated afresh per test: `testkit/backends.py`. Tests that only make
sense on one backend say so with `@pytest.mark.chdb_only(why)` or
`@pytest.mark.tansu_only(why)` and skip, with that reason, on the other.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ingest.service.config import ServeConfig
from ingest.service.periodic import Periodic
from ingest.service.receiver import ReceiverService
from ingest.service.routes import Mount
from ingest.store.clickhouse import ClickHouseStore, open_store
from schemas.store import Store
from schemas.times import Clock, utc_now
from testkit.backends import (
    BACKENDS,
    BackendError,
    Backends,
    choose,
    clickhouse_container,
    container_image,
    docker_unreachable,
    fresh_store,
    refuse_foreign_database,
)
from testkit.faulty_store import FaultyStore

BACKENDS_KEY = pytest.StashKey[Backends]()
MAX_WORKERS = 4  # each worker holds a chDB engine and starts its own servers

# One BLAS thread per process (set before any test module imports numpy; subprocesses
# inherit it). The analyses solve many small systems, and OpenBLAS's threads spinning for
# a shared, loaded pair of cores made each 150x150 solve take 0.17 s instead of 1 ms;
# with several test workers they would also fight each other.
for _blas in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas, "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="Kafka and ClickHouse for the tests: default (Tansu + chDB) or containers"
        " (Apache Kafka + ClickHouse server through testcontainers; needs Docker)."
        " Default: $HOLONOGRAPH_TEST_BACKEND, else default.",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's own (CPU count), however this is loaded
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default, pyproject's addopts): one worker per available CPU, at
    most `MAX_WORKERS`, and none (serial) on a ClickHouse server of one's own
    (`HOLONOGRAPH_TEST_CLICKHOUSE`): every test re-creates its one `holonograph`
    database, which workers would drop under each other. Containers are per worker;
    an external Kafka is shared safely (every test has its own topics and group).
    `PYTEST_XDIST_AUTO_NUM_WORKERS` still overrides."""
    if "PYTEST_XDIST_AUTO_NUM_WORKERS" in os.environ:
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    try:
        backends = choose(config.getoption("--backend"), os.environ)
    except BackendError:
        return 0  # pytest_configure says why
    if backends.clickhouse is not None:
        return 0
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.stash[BACKENDS_KEY] = choose(config.getoption("--backend"), os.environ)
    except BackendError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_report_header(config: pytest.Config) -> str:
    return config.stash[BACKENDS_KEY].describe()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test on the store or broker fixture carries its marker, so `-m "kafka or
    clickhouse"` selects every test the backend choice changes; a one-backend test
    on the other backend is skipped with its reason, before any fixture starts."""
    backends = config.stash[BACKENDS_KEY]
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "store" in fixtures and item.get_closest_marker("clickhouse") is None:
            item.add_marker(pytest.mark.clickhouse)
        if "broker" in fixtures and item.get_closest_marker("kafka") is None:
            item.add_marker(pytest.mark.kafka)
        chdb_only = item.get_closest_marker("chdb_only")
        if chdb_only is not None and backends.server_store:
            reason = f"chDB only: {_why(chdb_only)}; this run's store is a ClickHouse server"
            item.add_marker(pytest.mark.skip(reason=reason))
        tansu_only = item.get_closest_marker("tansu_only")
        if tansu_only is not None and backends.real_kafka:
            reason = f"Tansu only: {_why(tansu_only)}; this run's broker is Apache Kafka"
            item.add_marker(pytest.mark.skip(reason=reason))


def _why(mark: pytest.Mark) -> str:
    return str(mark.args[0]) if mark.args else mark.name


@pytest.fixture(scope="session")
def backends(pytestconfig: pytest.Config) -> Backends:
    return pytestconfig.stash[BACKENDS_KEY]


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Skips every test that needs a container when no Docker engine answers."""
    reason = docker_unreachable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def clickhouse_server(backends: Backends, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The ClickHouse server of this run (its store URL), or None for chDB."""
    if not backends.server_store:
        yield None
        return
    if backends.clickhouse is not None:
        probe = open_store(backends.clickhouse)
        try:
            reason = refuse_foreign_database(probe, backends.clickhouse)
        finally:
            probe.close()
        if reason is not None:
            pytest.skip(reason)
        yield backends.clickhouse
        return
    request.getfixturevalue("docker_engine")
    with clickhouse_container(container_image("clickhouse")) as url:
        yield url


@pytest.fixture
def store(tmp_path: Path, clickhouse_server: str | None) -> Iterator[ClickHouseStore]:
    """A fresh, migrated store: a chDB directory of this test (one data directory per
    process), or the run's ClickHouse server with `holonograph` re-created."""
    opened = fresh_store(tmp_path / "store", clickhouse_server)
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
        routes: Sequence[Mount] = (),
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
            routes=routes,
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
