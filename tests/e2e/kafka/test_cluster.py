"""The whole scale-out path on a ClickHouse cluster, where Docker exists: the 2 shards x
2 replicas and Keeper of `docker-compose.cluster.yml` (started through testcontainers'
compose), `serve --kafka` and `sink --store ...?cluster=holonograph` as real processes
of this checkout, OTLP in, every analysis out through the Distributed tables.

A replica is killed while the sink loads and started again: every event whose export
was acknowledged is in the store, and none twice after FINAL (re-sends included: the
sharding key is the identity's, so every version of an event is on one shard).
Without a Docker engine the suite is skipped with that reason (`docker_engine`); the
cluster DDL itself is tested everywhere by tests/schemas/test_cluster.py."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from tests.e2e.kafka.conftest import Broker
from tests.e2e.kafka.helpers import wait_until
from tests.e2e.kafka.test_cli_processes import ROOT, Process, _kafka_flags, holonograph
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]

COMPOSE_FILE = "docker-compose.cluster.yml"
SERVERS = ("ch-s1r1", "ch-s1r2", "ch-s2r1", "ch-s2r2")
CLUSTER = "holonograph"
ADMIN = "holonograph_admin:holonograph"
WRITER = "holonograph_writer:holonograph-writer"
READER = "holonograph_reader:holonograph-reader"
SURFACE = "classify-intent"
EVENTS = 400
BATCH = 20
ANALYSES = (
    ["status"],
    ["completeness"],
    ["drift", "--surface", SURFACE, "--since", "24h", "--no-save"],
    ["compare", "--surface", SURFACE, "--since", "24h"],
    ["events", "--surface", SURFACE, "--since", "24h"],
    ["quarantine"],
    ["topology", "scan", "--since", "24h"],
    ["report", "--since", "24h"],
)


@dataclass
class Cluster:
    compose: Any
    hosts: dict[str, str]  # server -> host:port of its HTTP interface

    def url(self, user: str, server: str = "ch-s1r1") -> str:
        return f"http://{user}@{self.hosts[server]}/?cluster={CLUSTER}"

    def compose_command(self, *args: str) -> None:
        subprocess.run(
            ["docker", "compose", "-f", str(ROOT / COMPOSE_FILE), *args],
            cwd=ROOT, check=True, capture_output=True, timeout=120,
        )  # fmt: skip


def _ping(host: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}/ping", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(docker_engine: None) -> Iterator[Cluster]:
    from testcontainers.compose import DockerCompose

    compose = DockerCompose(
        ROOT, compose_file_name=COMPOSE_FILE, services=["keeper", *SERVERS], wait=False
    )
    with compose:
        hosts = {}
        for server in SERVERS:
            host, port = compose.get_service_host_and_port(server, 8123)
            hosts[server] = f"{host}:{port}"
        for host in hosts.values():
            wait_until(lambda host=host: _ping(host), timeout=120, what=f"{host} up")
        yield Cluster(compose, hosts)


def _count(cluster: Cluster, sql: str, server: str = "ch-s1r1") -> int:
    store = open_store(cluster.url(ADMIN, server))
    try:
        return int(store.query(sql).scalar())
    finally:
        store.close()


def test_migrations_create_replicated_tables_on_every_server(cluster: Cluster) -> None:
    store = open_store(cluster.url(ADMIN))
    try:
        apply_migrations(store)
        assert apply_migrations(store) == []  # once is enough, everywhere
    finally:
        store.close()
    for server in SERVERS:
        engine = _count(
            cluster,
            "SELECT count() FROM system.tables WHERE database = 'holonograph'"
            " AND name = 'evaluation_events_local' AND engine = 'ReplicatedReplacingMergeTree'",
            server,
        )
        assert engine == 1, server
        distributed = _count(
            cluster,
            "SELECT count() FROM system.tables WHERE database = 'holonograph'"
            " AND name = 'evaluation_events' AND engine = 'Distributed'",
            server,
        )
        assert distributed == 1, server


def test_a_replica_killed_mid_load_loses_nothing_acknowledged_and_duplicates_nothing(
    cluster: Cluster, broker: Broker, names: dict[str, str], tmp_path: Path
) -> None:
    kafka = _kafka_flags(broker, names)
    serve = Process(
        ["serve", *kafka, "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"], 5
    )
    sink = Process(
        ["sink", *kafka, "--store", cluster.url(WRITER), "--group", names["sink_group"],
         "--batch-seconds", "0.2", "--metrics-port", "0"],
        5,
    )  # fmt: skip
    acknowledged: set[str] = set()
    try:
        endpoint = f"127.0.0.1:{serve.port('OTLP/gRPC')}"
        for start in range(0, EVENTS, BATCH):
            if start == EVENTS // 2:
                cluster.compose_command("kill", "ch-s2r2")  # a replica gone mid-load
            items = [
                Evaluation("cluster", seq, surface=SURFACE) for seq in range(start, start + BATCH)
            ]
            payload = export_request(record_spans(items)).SerializeToString()
            if grpc_export(endpoint, payload).code is grpc.StatusCode.OK:
                acknowledged |= {f"evt_cluster_{item.seq}" for item in items}
                if start % (4 * BATCH) == 0:  # a client's re-send of an acknowledged batch
                    grpc_export(endpoint, payload)
        # The load is done; the replica comes back.
        cluster.compose_command("start", "ch-s2r2")
        wait_until(lambda: _ping(cluster.hosts["ch-s2r2"]), timeout=120, what="replica back")
        stored = (
            "SELECT uniqExact(event_id) FROM holonograph.evaluation_events"
            " WHERE emission_stream = 'cluster'"
        )
        wait_until(
            lambda: _count(cluster, stored) >= len(acknowledged), timeout=300, what="sink caught up"
        )
        assert len(acknowledged) == EVENTS  # the edge (Kafka) took every export
        final = _count(
            cluster,
            "SELECT count() FROM holonograph.evaluation_events FINAL"
            " WHERE emission_stream = 'cluster'",
        )
        assert final == _count(cluster, stored) == EVENTS  # none lost, none twice
        # Every replica of every shard holds its shard's rows: the killed one caught up.
        local = (
            "SELECT uniqExact(event_id) FROM holonograph.evaluation_events_local"
            " WHERE emission_stream = 'cluster'"
        )
        for server in SERVERS:
            wait_until(
                lambda server=server: _count(cluster, local, server) > 0, timeout=120,
                what=f"{server} replicated",
            )  # fmt: skip
        shards = _count(cluster, "SELECT uniqExact(_shard_num) FROM holonograph.evaluation_events")
        assert shards == 2  # the identity's hash spread the events over both shards
        for command in ANALYSES:
            done = holonograph(*command, "--store", cluster.url(READER), "--json")
            assert done.returncode in (0, 1), (command, done.stderr)
            json.loads(done.stdout)
            assert "Traceback" not in done.stderr
    finally:
        serve_code, serve_err = serve.stop()
        sink_code, sink_err = sink.stop()
    assert serve_code == 0, serve_err
    assert sink_code == 0, sink_err
