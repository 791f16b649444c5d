"""Which Kafka broker and which ClickHouse the test suites run against.

    default     Tansu (`testkit.tansu`) and a fresh chDB directory per test
    containers  Apache Kafka (KRaft, idempotent producer on) and a ClickHouse server,
                one container each per session, started through testcontainers;
                needs a reachable Docker engine, else the tests that need them skip
                with the reason (`docker_unreachable`)

Chosen with `--backend` or `HOLONOGRAPH_TEST_BACKEND`. Servers of one's own replace
either half on any backend: `HOLONOGRAPH_TEST_KAFKA=host:port` and
`HOLONOGRAPH_TEST_CLICKHOUSE=http://user:pass@host:8123`. On a ClickHouse server every
test gets the fixed database `holonograph` dropped and migrated afresh, so tests
against a server run one at a time, and a server whose `holonograph` the suite did
not create is refused (`refuse_foreign_database`).

The images are the ones `docker-compose.yml` deploys, so the suites test what ships;
`compose_service` reads a service's image, environment and checkout mounts from it
(the Grafana test starts Grafana and ClickHouse as compose does, on one network).
testcontainers is imported only when a container is started: the default run never
loads it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import yaml

from ingest.redact import redact_url
from schemas.migrations import apply_migrations
from schemas.store import Store
from schemas.tables import DATABASE
from testkit.tansu import free_port

if TYPE_CHECKING:
    from testcontainers.core.network import Network

    from ingest.store.clickhouse import ClickHouseStore

Backend = Literal["default", "containers"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

BACKEND_ENV = "HOLONOGRAPH_TEST_BACKEND"
KAFKA_ENV = "HOLONOGRAPH_TEST_KAFKA"
CLICKHOUSE_ENV = "HOLONOGRAPH_TEST_CLICKHOUSE"

KAFKA_IMAGE = "apache/kafka:3.9.1"
CLICKHOUSE_IMAGE = "clickhouse/clickhouse-server:24.8"
CLICKHOUSE_USER = "holonograph_test"
CLICKHOUSE_PASSWORD = "holonograph-test"

# Created on a server the first time the suite resets `holonograph` there, never
# dropped: it tells a server the suite may reset from one that holds someone's data.
MARKER_DATABASE = "holonograph_test_suite"

STARTUP_TIMEOUT_SECONDS = 180

COMPOSE_FILE = Path(__file__).resolve().parents[1] / "docker-compose.yml"


class BackendError(ValueError):
    """An unknown backend name: a usage error of the test run, reported before any test."""


@dataclass(frozen=True)
class Backends:
    """The run's choice: the backend and any servers of one's own named."""

    name: Backend = "default"
    kafka: str | None = None  # an external broker's bootstrap, host:port
    clickhouse: str | None = None  # an external server's http(s) URL

    @property
    def real_kafka(self) -> bool:
        """Apache Kafka (or compatible) rather than Tansu: idempotent producer on,
        and a broker the tests cannot stop, pause or restart."""
        return self.kafka is not None or self.name == "containers"

    @property
    def server_store(self) -> bool:
        """The `store` fixture is a ClickHouse server rather than a chDB directory."""
        return self.clickhouse is not None or self.name == "containers"

    def describe(self) -> str:
        kafka = self.kafka or ("an Apache Kafka container" if self.real_kafka else "Tansu")
        store = (
            redact_url(self.clickhouse)
            if self.clickhouse
            else ("a ClickHouse server container" if self.server_store else "chDB")
        )
        return f"backend {self.name}: Kafka {kafka}, ClickHouse {store}"


def choose(option: str | None, environ: Mapping[str, str]) -> Backends:
    """The pytest option wins over the environment; empty values count as unset."""
    name = option or environ.get(BACKEND_ENV) or "default"
    if name not in BACKENDS:
        raise BackendError(
            f"unknown test backend {name!r} (--backend or {BACKEND_ENV}): use one of "
            + ", ".join(BACKENDS)
        )
    backend: Backend = "containers" if name == "containers" else "default"
    return Backends(
        name=backend,
        kafka=environ.get(KAFKA_ENV) or None,
        clickhouse=environ.get(CLICKHOUSE_ENV) or None,
    )


def docker_unreachable() -> str | None:
    """None when a Docker engine answers; otherwise why not, as the skip reason."""
    try:
        from testcontainers.core.docker_client import DockerClient, get_docker_host
    except ImportError as err:
        return f"the containers backend needs testcontainers ({err}): pip install -e '.[test]'"
    where = "unix:///var/run/docker.sock"
    try:
        where = get_docker_host() or where
        DockerClient().client.ping()
    except Exception as err:  # docker.errors.DockerException and whatever the socket raises
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        return (
            f"Docker engine not reachable at {where} ({detail}): the containers backend"
            f" needs Docker; without {BACKEND_ENV}=containers the tests run on Tansu + chDB"
        )
    return None


def kafka_environment(host: str, port: int) -> dict[str, str]:
    """One KRaft node, broker and controller, advertising `host:port` — the port it
    listens on inside the container too, so the address is right before it starts.
    The settings `docker-compose.yml` gives its broker, minus persistence."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_MESSAGE_MAX_BYTES": "1048588",
    }


@contextmanager
def kafka_container(image: str = KAFKA_IMAGE) -> Iterator[str]:
    """An Apache Kafka container for the session; yields its bootstrap address."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.docker_client import DockerClient
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    host = DockerClient().host()
    port = free_port()
    container = (
        DockerContainer(image)
        .with_envs(**kafka_environment(host, port))
        .with_bind_ports(port, port)
        .waiting_for(
            LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(
                STARTUP_TIMEOUT_SECONDS
            )
        )
    )
    with container:
        yield f"{host}:{port}"


@dataclass(frozen=True)
class Mount:
    """A bind mount of the checkout, as `docker-compose.yml` declares it."""

    host: Path
    container: str
    mode: str


@dataclass(frozen=True)
class ComposeService:
    """One service of `docker-compose.yml`: its image, its environment with every
    `${VAR:-default}` at its default (the laptop values), its mounts of the checkout."""

    image: str
    environment: dict[str, str]
    mounts: tuple[Mount, ...]


_DEFAULTED = re.compile(r"\$\{\w+:-([^}]*)\}")


def compose_service(name: str, compose_file: Path = COMPOSE_FILE) -> ComposeService:
    """The service `name` of the compose file; named volumes are left out."""
    service: dict[str, Any] = yaml.safe_load(compose_file.read_text())["services"][name]
    environment = {
        key: _DEFAULTED.sub(lambda m: m[1], str(value))
        for key, value in (service.get("environment") or {}).items()
    }
    mounts = []
    for volume in service.get("volumes") or []:
        source, target, *mode = str(volume).split(":")
        if source.startswith("."):
            host = (compose_file.parent / source).resolve()
            mounts.append(Mount(host, target, mode[0] if mode else "rw"))
    return ComposeService(str(service["image"]), environment, tuple(mounts))


@contextmanager
def clickhouse_container(
    image: str = CLICKHOUSE_IMAGE,
    *,
    network: Network | None = None,
    aliases: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
    mounts: Sequence[Mount] = (),
) -> Iterator[str]:
    """A ClickHouse server container; yields its HTTP store URL (the suite's
    administrator). On `network` under `aliases`, with extra `environment` and
    `mounts`, it is compose's server for other containers (the Grafana test)."""
    from testcontainers.community.clickhouse import ClickHouseContainer

    container = ClickHouseContainer(
        image, username=CLICKHOUSE_USER, password=CLICKHOUSE_PASSWORD, dbname="default"
    ).with_env("CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT", "1")
    for key, value in (environment or {}).items():
        container.with_env(key, value)
    for mount in mounts:
        container.with_volume_mapping(mount.host, mount.container, mount.mode)
    if network is not None:
        container.with_network(network).with_network_aliases(*aliases)
    with container:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(8123)
        yield f"http://{CLICKHOUSE_USER}:{CLICKHOUSE_PASSWORD}@{host}:{port}"


def refuse_foreign_database(store: Store, url: str) -> str | None:
    """None when the suite may drop `holonograph` on this server (absent, or created
    by the suite before); otherwise why not, as the skip reason."""
    databases = {row[0] for row in store.query("SELECT name FROM system.databases").rows}
    if DATABASE in databases and MARKER_DATABASE not in databases:
        return (
            f"{redact_url(url)} holds a database {DATABASE} the test suite did not create"
            f" (no database {MARKER_DATABASE} there); the tests drop and re-create it, so"
            f" point {CLICKHOUSE_ENV} at a server for tests, or drop it yourself"
        )
    return None


def reset_database(store: Store) -> None:
    """Drop what a previous test left (the migrated database and the scenario
    builders' staging database) before a test migrates `holonograph` afresh."""
    from testkit.scenarios import STAGING_DATABASE  # numpy: only where a server is used

    store.command(f"CREATE DATABASE IF NOT EXISTS {MARKER_DATABASE}")
    for database in (DATABASE, STAGING_DATABASE):
        store.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def fresh_store(directory: Path, server: str | None) -> ClickHouseStore:
    """A migrated store: a new chDB directory under `directory` (one per process), or
    the run's ClickHouse `server` with `holonograph` dropped and migrated afresh."""
    from ingest.store.clickhouse import open_store

    if server is None:
        opened = open_store(f"chdb://{directory}")
    else:
        opened = open_store(server)
        reset_database(opened)
    apply_migrations(opened)
    return opened


@contextmanager
def migrated_store(directory: Path) -> Iterator[ClickHouseStore]:
    """A migrated chDB store in `directory` (reopened as it is when it exists), closed
    on exit."""
    store = fresh_store(directory, None)
    try:
        yield store
    finally:
        store.close()


def container_image(name: Literal["kafka", "clickhouse"]) -> str:
    """The pinned image, or the one `HOLONOGRAPH_TEST_KAFKA_IMAGE` /
    `HOLONOGRAPH_TEST_CLICKHOUSE_IMAGE` names (to try another server version)."""
    default = KAFKA_IMAGE if name == "kafka" else CLICKHOUSE_IMAGE
    return os.environ.get(f"HOLONOGRAPH_TEST_{name.upper()}_IMAGE") or default
