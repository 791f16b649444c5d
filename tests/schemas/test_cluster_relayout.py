"""Migration 0016's RELAYOUT on a cluster holding rows, shard by shard
(`schemas.cluster_relayout`): the per-shard plan run against two databases of one
store standing for two shards (each its own local tables), proving the copy, the
exactness check, the resume after a crash at each step, and that no row changes shard;
the cluster step's ON CLUSTER statements rendered and parsed by ClickHouse."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.cluster_relayout import ClusterRelayoutError, Node, node_urls, relayout_shards
from schemas.migrations import MigrationError, cluster_nodes, placed_copy, relayout_on_cluster
from schemas.store import Store

pytestmark = pytest.mark.clickhouse

SHARDS = ("s1", "s2")
EVENTS = 400
COLUMNS = "tenant_id String, event_id String, surface_id String, timestamp DateTime64(9, 'UTC')"


class Crash(RuntimeError):
    """The fault the seam raises between two steps (a migrating process killed)."""


def _make_shard(store: Store, db: str) -> None:
    store.command(f"CREATE DATABASE IF NOT EXISTS {db}")
    store.command(
        f"CREATE TABLE {db}.evaluation_events_local ({COLUMNS}, ingest_version UInt64)"
        " ENGINE = ReplacingMergeTree(ingest_version) ORDER BY (tenant_id, event_id)"
    )
    store.command(
        f"CREATE TABLE {db}.evaluation_events__v16_local ({COLUMNS}, ingest_version UInt64,"
        " placed_surface_id String, placed_hour DateTime('UTC'))"
        " ENGINE = ReplacingMergeTree(ingest_version)"
        " ORDER BY (tenant_id, placed_surface_id, placed_hour, event_id)"
    )
    store.command(
        f"CREATE TABLE {db}.event_owners_local (tenant_id String, event_id String,"
        " placed_surface_id String, placed_hour DateTime('UTC'))"
        " ENGINE = MergeTree ORDER BY (tenant_id, event_id)"
        " SETTINGS enable_block_number_column = 1"
    )


@pytest.fixture
def shards(store: ClickHouseStore) -> dict[int, list[Node]]:
    """Two shards of one replica each, their rows put where the Distributed table's key,
    cityHash64(tenant_id, event_id) % 2, puts them: every version of an event, and its
    placement, on one shard. Every tenth event was re-sent on another surface and a day
    later; every owner row is followed by a later claim that must not win."""
    for db in SHARDS:
        _make_shard(store, db)
    for i, db in enumerate(SHARDS):
        mine = f"cityHash64(tenant_id, event_id) % 2 = {i}"
        store.command(
            f"INSERT INTO {db}.evaluation_events_local SELECT * FROM (SELECT"
            " if(number % 3 = 0, 'acme', 'globex') AS tenant_id,"
            " concat('evt_', toString(number)) AS event_id,"
            " concat('surface-', toString(number % 4)) AS surface_id,"
            " toDateTime64('2026-11-01 00:00:00', 9, 'UTC') + toIntervalMinute(number * 7)"
            f" AS timestamp, toUInt64(1) AS ingest_version FROM numbers({EVENTS})) WHERE {mine}"
        )
        store.command(
            f"INSERT INTO {db}.event_owners_local SELECT tenant_id, event_id, surface_id,"
            f" toStartOfHour(timestamp) FROM {db}.evaluation_events_local"
        )
        store.command(
            f"INSERT INTO {db}.evaluation_events_local SELECT tenant_id, event_id, 'moved',"
            " timestamp + toIntervalDay(1), 2 FROM {db}.evaluation_events_local"
            " WHERE toUInt64(substring(event_id, 5)) % 10 = 0".replace("{db}", db)
        )
        store.command(
            f"INSERT INTO {db}.event_owners_local SELECT tenant_id, event_id, 'later-claim',"
            f" toDateTime('2030-01-01 00:00:00', 'UTC') FROM {db}.event_owners_local"
        )
    return {n: [Node(store, db, db)] for n, db in enumerate(SHARDS, start=1)}


def _rows(store: Store, db: str, table: str, placed: bool) -> list[tuple[Any, ...]]:
    extra = ", placed_surface_id, placed_hour" if placed else ""
    return [
        tuple(r)
        for r in store.query(
            f"SELECT tenant_id, event_id, surface_id, timestamp, ingest_version{extra}"
            f" FROM {db}.{table} FINAL ORDER BY tenant_id, event_id"
        ).rows
    ]


def _expected(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Each shard's rows after FINAL with their event's first placement claim."""
    out = {}
    for db in SHARDS:
        first = {
            (t, e): (s, h)
            for t, e, s, h in store.query(
                "SELECT tenant_id, event_id, argMin(placed_surface_id, _block_number),"
                f" argMin(placed_hour, _block_number) FROM {db}.event_owners_local"
                " GROUP BY tenant_id, event_id"
            ).rows
        }
        out[db] = [
            (*row, *first[(row[0], row[1])])
            for row in _rows(store, db, "evaluation_events_local", placed=False)
        ]
    return out


def _relaid(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {db: _rows(store, db, "evaluation_events_local", placed=True) for db in SHARDS}


def _relayout(shards: dict[int, list[Node]], after_step: Any = None) -> dict[str, int]:
    return relayout_shards(
        shards, "evaluation_events", "evaluation_events__v16", "event_owners", placed_copy,
        after_step,
    )  # fmt: skip


def test_each_shard_lays_out_its_own_rows_with_their_first_placement(
    store: ClickHouseStore, shards: dict[int, list[Node]]
) -> None:
    expected = _expected(store)
    assert sum(len(rows) for rows in expected.values()) == EVENTS
    assert all(len(rows) > EVENTS / 4 for rows in expected.values())  # both shards hold rows

    copied = _relayout(shards)

    assert copied == {"1": len(expected["s1"]), "2": len(expected["s2"])}
    assert _relaid(store) == expected  # the same rows on the same shard, placed
    moved = [r for rows in expected.values() for r in rows if r[2] == "moved"]
    assert moved and all(r[5] != "moved" for r in moved)  # a re-send keeps its placement
    for db in SHARDS:  # the old layout is kept under the staging name until it is dropped
        assert store.query(f"SELECT count() FROM {db}.evaluation_events__v16_local").scalar()


@pytest.mark.parametrize("crash_at", ["copied shard 1", "copied shard 2", "swapped s1"])
def test_a_relayout_interrupted_at_any_step_finishes_exactly_when_run_again(
    store: ClickHouseStore, shards: dict[int, list[Node]], crash_at: str
) -> None:
    expected = _expected(store)
    steps: list[str] = []

    def crash(step: str) -> None:
        steps.append(step)
        if step == crash_at:
            raise Crash(step)

    with pytest.raises(Crash):
        _relayout(shards, crash)

    again = _relayout(shards, steps.append)

    assert _relaid(store) == expected
    if crash_at == "swapped s1":  # s1's new table is live: never truncated and copied again
        assert again == {"1": 0, "2": len(expected["s2"])}
    assert steps.count("swapped s1") == 1 and steps.count("swapped s2") == 1
    assert _relayout(shards) == {"1": 0, "2": 0}  # done: a third run changes nothing
    assert _relaid(store) == expected


def test_a_row_written_during_the_copy_stops_its_shard_before_any_swap(
    store: ClickHouseStore, shards: dict[int, list[Node]]
) -> None:
    def copy_while_a_sink_writes(on: Store, table: str, staging: str, owners: str) -> None:
        placed_copy(on, table, staging, owners)
        on.command(
            f"INSERT INTO {table} VALUES ('acme', 'evt_late', 'surface-0',"
            " '2026-11-02 00:00:00', 1)"
        )

    with pytest.raises(ClusterRelayoutError, match=r"shard 1 \(s1\) holds \d+ rows, its copy"):
        relayout_shards(
            shards, "evaluation_events", "evaluation_events__v16", "event_owners",
            copy_while_a_sink_writes,
        )  # fmt: skip
    for node in (n for replicas in shards.values() for n in replicas):
        assert not node.has_marker("evaluation_events")  # nothing swapped anywhere


def test_replica_urls_come_from_the_cluster_with_the_store_urls_port_and_users() -> None:
    urls = node_urls(
        "http://holonograph_writer:pw@ch-s1r1:8123/?cluster=holonograph",
        [(2, 1, "ch-s2r1"), (1, 2, "ch-s1r2"), (1, 1, "ch-s1r1"), (2, 2, "ch-s2r2")],
    )
    assert urls == {
        1: [
            "http://holonograph_writer:pw@ch-s1r1:8123/?cluster=holonograph",
            "http://holonograph_writer:pw@ch-s1r2:8123/?cluster=holonograph",
        ],
        2: [
            "http://holonograph_writer:pw@ch-s2r1:8123/?cluster=holonograph",
            "http://holonograph_writer:pw@ch-s2r2:8123/?cluster=holonograph",
        ],
    }


class OnClusterParsed:
    """The store, except that an ON CLUSTER statement (no cluster here) is parsed by
    ClickHouse and recorded instead of run."""

    def __init__(self, store: ClickHouseStore) -> None:
        self._store = store
        self.url = store.url
        self.on_cluster: list[str] = []

    def query(self, sql: str, parameters: Any = None) -> Any:
        return self._store.query(sql, parameters)

    def command(self, sql: str, parameters: Any = None) -> None:
        if " ON CLUSTER " not in sql:
            self._store.command(sql, parameters)
            return
        self._store.query("SELECT formatQuerySingleLine({sql:String})", {"sql": sql})
        self.on_cluster.append(sql)


def test_the_cluster_step_relays_every_shard_then_swaps_the_distributed_table(
    store: ClickHouseStore, shards: dict[int, list[Node]]
) -> None:
    expected = _expected(store)
    store.command("CREATE DATABASE holonograph_relay")  # the Distributed tables' stand-in
    store.command(
        "CREATE VIEW holonograph_relay.evaluation_events AS"
        " SELECT * FROM s1.evaluation_events_local UNION ALL"
        " SELECT * FROM s2.evaluation_events_local"
    )
    recording = OnClusterParsed(store)
    _make_shard(store, "holonograph_relay")  # the coordinator's own local tables

    relayout_on_cluster(
        recording,  # type: ignore[arg-type]
        "holonograph",
        "holonograph_relay.evaluation_events",
        "holonograph_relay.evaluation_events__v16",
        "holonograph_relay.event_owners",
        "cityHash64(tenant_id, event_id)",
        nodes=lambda _store, cluster: shards if cluster == "holonograph" else {},
    )

    assert _relaid(store) == expected
    assert recording.on_cluster == [
        "CREATE OR REPLACE TABLE holonograph_relay.evaluation_events ON CLUSTER holonograph"
        " AS holonograph_relay.evaluation_events_local ENGINE = Distributed(holonograph,"
        " holonograph_relay, evaluation_events_local, cityHash64(tenant_id, event_id))",
        "DROP TABLE IF EXISTS holonograph_relay.evaluation_events__v16 ON CLUSTER holonograph SYNC",
        "DROP TABLE IF EXISTS holonograph_relay.evaluation_events__v16_local ON CLUSTER"
        " holonograph SYNC",
    ]


def test_a_caller_that_cannot_open_the_replicas_changes_nothing(
    store: ClickHouseStore, shards: dict[int, list[Node]]
) -> None:
    _make_shard(store, "holonograph_relay")
    store.command(
        "CREATE VIEW holonograph_relay.evaluation_events AS"
        " SELECT * FROM s1.evaluation_events_local"
    )
    with pytest.raises(MigrationError, match="cannot open the cluster's replicas; nothing"):
        relayout_on_cluster(
            store,
            "holonograph",
            "holonograph_relay.evaluation_events",
            "holonograph_relay.evaluation_events__v16",
            "holonograph_relay.event_owners",
            "cityHash64(tenant_id, event_id)",
            cluster_nodes(None),
        )
    assert not any(n.has_marker("evaluation_events") for r in shards.values() for n in r)
    assert store.query("SELECT count() FROM holonograph_relay.evaluation_events").scalar()
