"""Migration 0016's RELAYOUT on a cluster whose tables hold rows, shard by shard.

The sharding key is the identity, `cityHash64(tenant_id, event_id)`, for the event
tables and for `event_owners` (where each event's placement is), so an event's rows
and its placement are on one shard, and the placement changes the sorting key, never
the shard: each shard lays out its own local rows, and no row crosses the network.
The plan, for one table (its local table `t_local`, the new layout `t__v16_local`):

1. per shard, on one of its replicas, unless a replica of it has already swapped:
   `TRUNCATE` the new local table, copy the shard's rows into it with their
   placement (`schemas.migrations.placed_copy`, the single server's statement on
   the local tables), and check that it holds as many rows as the old one (after
   FINAL: one per identity). The new table is Replicated: the shard's other replicas
   fetch the copy through Keeper;
2. per replica, once every shard is copied: wait until it holds the shard's copy
   (`SYSTEM SYNC REPLICA`), then `EXCHANGE TABLES t_local AND t__v16_local` on it (a
   replica that has the placement column on `t_local` has swapped already);
3. once: the Distributed table recreated over the new layout and the old tables
   (now under the staging names) dropped, `ON CLUSTER`.

Re-runnable after a crash at any step: a shard none of whose replicas has swapped is
copied again from the start (its old table is untouched until the swap); a shard one
of whose replicas swapped is never copied again (its new table is live there), its
other replicas only swap. The sinks must be stopped for the relayout (Kafka holds
the records): a row inserted into an old local table after its shard's copy would be
left behind by the swap. `Node` is the seam: a connection to one server and the
database its tables are in, so the plan runs against any stores standing for shards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from schemas.cluster import local_name
from schemas.store import Store

# The column a relaid table gains first (`schemas.migrations.PLACEMENT_COLUMNS`).
MARKER = "placed_surface_id"


class ClusterRelayoutError(RuntimeError):
    """A shard's relayout cannot go on: nothing of that shard was swapped."""


@dataclass(frozen=True)
class Node:
    """One server of a shard (a replica): a connection to it, and the database its
    local tables are in (`holonograph` on a cluster; another in a test)."""

    store: Store
    database: str
    name: str

    def local(self, table: str) -> str:
        return f"{self.database}.{local_name(table)}"

    def has_marker(self, table: str) -> bool:
        rows = self.store.query(
            "SELECT count() FROM system.columns WHERE database = {db:String}"
            " AND table = {t:String} AND name = {c:String}",
            {"db": self.database, "t": local_name(table), "c": MARKER},
        ).scalar()
        return bool(rows)

    def count(self, table: str) -> int:
        """Its rows after FINAL: one per identity in either layout (an event's placement
        is one), whatever merges have collapsed so far."""
        sql = f"SELECT count() FROM {self.local(table)} FINAL"
        return int(self.store.query(sql).scalar() or 0)

    def replicated(self, table: str) -> bool:
        engine = self.store.query(
            "SELECT engine FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": self.database, "t": local_name(table)},
        ).scalar()
        return str(engine or "").startswith("Replicated")


Shards = Mapping[int, Sequence[Node]]  # shard number -> its replicas
Copy = Callable[[Store, str, str, str], None]  # (store, source, staging, owners)
Step = Callable[[str], None]  # told "copied shard N" / "swapped NAME" after each step


def relayout_shards(
    shards: Shards,
    table: str,
    staging: str,
    owners: str,
    copy: Copy,
    after_step: Step | None = None,
) -> dict[str, int]:
    """Steps 1 and 2 of the module's plan for `table` (unqualified names: each node's
    database qualifies them); returns the rows copied per shard (0: not copied now)."""
    copied: dict[str, int] = {}
    for number, replicas in sorted(shards.items()):
        if not replicas:
            raise ClusterRelayoutError(f"relayout of {table}: shard {number} has no replica")
        if any(node.has_marker(table) for node in replicas):
            copied[str(number)] = 0  # swapped on a replica: its copy is live, never redone
            continue
        node = replicas[0]
        source, target = node.local(table), node.local(staging)
        node.store.command(f"TRUNCATE TABLE {target}")
        copy(node.store, source, target, node.local(owners))
        held, wrote = node.count(table), node.count(staging)
        if held != wrote:
            raise ClusterRelayoutError(
                f"relayout of {table}: shard {number} ({node.name}) holds {held} rows,"
                f" its copy {wrote}; nothing of it was swapped (is a sink still writing?"
                " stop the sinks, Kafka holds the records) and a re-run copies it again"
            )
        copied[str(number)] = wrote
        if after_step is not None:
            after_step(f"copied shard {number}")
    for _, replicas in sorted(shards.items()):
        for node in replicas:
            if node.has_marker(table):
                continue
            if node.replicated(staging):  # holds the shard's copy before it swaps
                node.store.command(f"SYSTEM SYNC REPLICA {node.local(staging)}")
            node.store.command(f"EXCHANGE TABLES {node.local(table)} AND {node.local(staging)}")
            if after_step is not None:
                after_step(f"swapped {node.name}")
    return copied


def node_urls(store_url: str, replicas: Sequence[tuple[int, int, str]]) -> dict[int, list[str]]:
    """The URL of each replica, by shard, from `system.clusters` rows (shard_num,
    replica_num, host_name): the store's URL with the replica's host (every server of
    the cluster serves HTTP on the same port, with the same users: the compose file's
    topology and `deploy/clickhouse-cluster`)."""
    parts = urlsplit(store_url)
    credentials, _, hostport = parts.netloc.rpartition("@")
    port = hostport.rpartition(":")[2] if ":" in hostport else ""
    out: dict[int, list[str]] = {}
    for shard, _replica, host in sorted(replicas):
        netloc = (f"{credentials}@" if credentials else "") + host + (f":{port}" if port else "")
        out.setdefault(int(shard), []).append(urlunsplit(parts._replace(netloc=netloc)))
    return out


CLUSTER_REPLICAS = (
    "SELECT shard_num, replica_num, host_name FROM system.clusters"
    " WHERE cluster = {cluster:String} ORDER BY shard_num, replica_num"
)
