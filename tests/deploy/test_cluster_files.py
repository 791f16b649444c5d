"""`docker-compose.cluster.yml` and deploy/clickhouse-cluster/ agree, checked everywhere
(the cluster itself runs in tests/e2e/kafka/test_cluster.py where Docker exists): the
cluster's 2 shards x 2 replicas are the compose file's servers, each with its own
shard and replica macros, Keeper where the servers look for it, every server mounting
the users and the cluster configuration, and the sink's store naming the cluster."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from schemas.cluster import cluster_of

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())
CONFIG = ET.parse(ROOT / "deploy/clickhouse-cluster/config.d/cluster.xml").getroot()


def test_the_clusters_replicas_are_the_compose_files_servers() -> None:
    cluster = CONFIG.find("remote_servers/holonograph")
    assert cluster is not None
    shards = cluster.findall("shard")
    assert len(shards) == 2
    replicas = []
    for shard in shards:
        assert shard.findtext("internal_replication") == "true"
        hosts = [r.findtext("host") for r in shard.findall("replica")]
        assert len(hosts) == 2
        replicas.append(hosts)
    services = COMPOSE["services"]
    macros = set()
    for number, hosts in enumerate(replicas, start=1):
        for host in hosts:
            environment = services[host]["environment"]
            assert int(environment["HOLONOGRAPH_SHARD"]) == number, host
            assert environment["HOLONOGRAPH_REPLICA"] == host
            macros.add((environment["HOLONOGRAPH_SHARD"], environment["HOLONOGRAPH_REPLICA"]))
            mounts = " ".join(services[host]["volumes"])
            for mounted in ("deploy/clickhouse/users.d/holonograph.xml",
                            "deploy/clickhouse-cluster/users.d/cluster.xml",
                            "deploy/clickhouse-cluster/config.d/cluster.xml"):  # fmt: skip
                assert f"./{mounted}:" in mounts, (host, mounted)
    assert len(macros) == 4  # every server its own (shard, replica)


def test_keeper_and_the_macros_are_where_the_servers_look() -> None:
    assert CONFIG.findtext("zookeeper/node/host") == COMPOSE["services"]["keeper"]["hostname"]
    assert CONFIG.find("macros/shard").get("from_env") == "HOLONOGRAPH_SHARD"  # type: ignore[union-attr]
    assert CONFIG.find("macros/replica").get("from_env") == "HOLONOGRAPH_REPLICA"  # type: ignore[union-attr]
    keeper = ET.parse(ROOT / "deploy/clickhouse-cluster/keeper/keeper.xml").getroot()
    assert keeper.findtext("keeper_server/tcp_port") == CONFIG.findtext("zookeeper/node/port")


def test_the_writer_inserts_synchronously_with_a_quorum_and_the_sink_names_the_cluster() -> None:
    users = ET.parse(ROOT / "deploy/clickhouse-cluster/users.d/cluster.xml").getroot()
    writer = users.find("profiles/holonograph_writer")
    assert writer is not None
    assert writer.findtext("distributed_foreground_insert") == "1"
    assert writer.findtext("insert_quorum") == "auto"
    store = COMPOSE["services"]["sink"]["environment"]["HOLONOGRAPH_STORE"]
    assert cluster_of(store.replace("${HOLONOGRAPH_WRITER_PASSWORD:-holonograph-writer}", "p")) == (
        "holonograph"
    )
