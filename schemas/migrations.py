"""Numbered, append-only ClickHouse migrations (`schemas/clickhouse/NNNN_name.sql`).

Each file is applied once, in order, and recorded in `holonograph.schema_migrations`
with a checksum; applying again on restart is a no-op. A recorded migration whose
file changed is an error: merged migrations are never edited, new ones are added.

A migration is recorded only after all its statements ran, so after a crash every
statement of it runs again: each must be safe to repeat from any point. Besides
ClickHouse SQL a file may hold statements of the runner's own:
`REBUILD <table> FROM <staging> ADDING <column>`, for a layout ClickHouse cannot
alter in place (a new sorting key prefix): see `rebuild`; `RELAYOUT <table> FROM
<staging> PLACED BY <owners>`, the same with every row given its event's placement:
see `relayout`; and `BACKFILL <view>`, a
materialized view's SELECT run over the rows its source held before the view
existed, so its mapping is written once: see `backfill`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from schemas.cluster import (
    CLUSTER_REBUILD,
    CLUSTER_RELAYOUT,
    ClusterSchema,
    cluster_of,
    local_name,
)
from schemas.cluster import LOCAL_SUFFIX as LOCAL
from schemas.cluster_relayout import CLUSTER_REPLICAS, Node, Shards, node_urls, relayout_shards
from schemas.readonce import table_names
from schemas.retention import apply_retention_ttl
from schemas.store import Store
from schemas.tables import DATABASE, Table
from schemas.tuning import MERGE_SELECTOR_BASE, TUNED_TABLES, apply_merge_tuning

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_IDENT = r"[a-z][a-z0-9_]*"
_REBUILD = re.compile(
    rf"^REBUILD\s+({_IDENT})\.({_IDENT})\s+FROM\s+({_IDENT})\.({_IDENT})\s+ADDING\s+({_IDENT})$"
)


_BACKFILL = re.compile(rf"^BACKFILL\s+({_IDENT})\.({_IDENT})$")
_RELAYOUT = re.compile(
    rf"^RELAYOUT\s+({_IDENT})\.({_IDENT})\s+FROM\s+({_IDENT})\.({_IDENT})"
    rf"\s+PLACED\s+BY\s+({_IDENT})\.({_IDENT})$"
)
# The columns a relaid table gains (`schemas.placement`); the first is the marker.
PLACEMENT_COLUMNS = ("placed_surface_id", "placed_hour")
_TARGET = re.compile(rf"\bTO\s+`?({_IDENT})`?\.`?({_IDENT})`?")


class MigrationError(RuntimeError):
    """The store's recorded migrations disagree with the files shipped."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    def statements(self) -> list[str]:
        """Split on `;` at line ends; comment lines are dropped first."""
        body = "\n".join(
            line for line in self.sql.splitlines() if not line.lstrip().startswith("--")
        )
        return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


def load_migrations() -> list[Migration]:
    folder = resources.files("schemas").joinpath("clickhouse")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration numbers in {versions}")
    return found


def table_exists(store: Store, table: Table) -> bool:
    """Has `table` been created? A reader of a server not migrated this far yet (its
    read-only user cannot run DDL) says what it could not read instead of failing."""
    return table.name in table_names(store)


def _columns(store: Store, database: str, table: str) -> list[str]:
    rows = store.query(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}"
        " ORDER BY position",
        {"db": database, "t": table},
    ).rows
    return [str(name) for (name,) in rows]


def rebuild(store: Store, table: str, staging: str, marker: str) -> None:
    """Swap `table` for `staging` (its new, empty layout) with every row copied,
    unless `table` already has the `marker` column the new layout adds. Safe to repeat
    after a crash at any step: an interrupted copy is truncated and redone; EXCHANGE
    TABLES swaps atomically, after which `table` has the marker and only the drop of
    the old rows (now under `staging`) is left. Columns the old layout lacks take their
    defaults; rows the new engine's key makes one collapse as it says. Needs an Atomic
    database (the default since ClickHouse 20.10)."""
    db, name = table.split(".")
    staging_db, staging_name = staging.split(".")
    old = _columns(store, db, name)
    if marker not in old:
        shared = [c for c in _columns(store, staging_db, staging_name) if c in old]
        if not shared:
            raise MigrationError(f"rebuild of {table}: {staging} does not exist")
        columns = ", ".join(shared)
        store.command(f"TRUNCATE TABLE {staging}")
        store.command(f"INSERT INTO {staging} ({columns}) SELECT {columns} FROM {table}")
        store.command(f"EXCHANGE TABLES {table} AND {staging}")
    store.command(f"DROP TABLE IF EXISTS {staging} SYNC")


def placed_copy(store: Store, table: str, staging: str, owners: str) -> None:
    """Insert every row of `table` into `staging` with its event's placement: the first
    claim with one in `owners`, so every version of an event gets one key; a row of an
    id without one (a dimension row without its event) is placed by its own surface and
    hour. On a cluster each shard runs it on its local tables (`schemas.cluster_relayout`)."""
    db, name = table.split(".")
    staging_db, staging_name = staging.split(".")
    old = _columns(store, db, name)
    shared = [c for c in _columns(store, staging_db, staging_name) if c in old]
    if not shared:
        raise MigrationError(f"relayout of {table}: {staging} does not exist")
    columns = ", ".join(shared)
    placed = ", ".join(f"t.{c}" for c in shared)
    store.command(
        f"INSERT INTO {staging} ({columns}, {', '.join(PLACEMENT_COLUMNS)})"
        f" SELECT {placed},"
        " if(p.p_surface = '', t.surface_id, p.p_surface),"
        " if(p.p_surface = '', toStartOfHour(t.timestamp), p.p_hour)"
        f" FROM {table} AS t LEFT ANY JOIN ("
        " SELECT tenant_id, event_id,"
        " argMin(placed_surface_id, _block_number) AS p_surface,"
        " argMin(placed_hour, _block_number) AS p_hour"
        f" FROM {owners} WHERE placed_surface_id != '' GROUP BY tenant_id, event_id"
        ") AS p ON t.tenant_id = p.tenant_id AND t.event_id = p.event_id"
    )


def relayout(store: Store, table: str, staging: str, owners: str) -> None:
    """`rebuild` into a layout sorted by placement (`schemas.placement`): each row
    copied with its event's placement (`placed_copy`; every stored event has one: the
    migration fills them first). Repeatable from any step, as `rebuild`: copied only
    while `table` lacks the placement columns."""
    db, name = table.split(".")
    if PLACEMENT_COLUMNS[0] not in _columns(store, db, name):
        store.command(f"TRUNCATE TABLE {staging}")
        placed_copy(store, table, staging, owners)
        store.command(f"EXCHANGE TABLES {table} AND {staging}")
    store.command(f"DROP TABLE IF EXISTS {staging} SYNC")


OpenNode = Callable[[str], Store]  # a store URL -> a connection (the caller's driver)
NodesOf = Callable[[Store, str], Shards]


def cluster_nodes(open_node: OpenNode | None) -> NodesOf:
    """Every replica of a cluster, by shard, each opened by `open_node` at the store's
    URL with its host (`schemas.cluster_relayout.node_urls`)."""

    def nodes(store: Store, cluster: str) -> Shards:
        if open_node is None:
            raise MigrationError(
                f"migration 0016 (event layout) on cluster {cluster}: its tables hold rows,"
                " and this caller cannot open the cluster's replicas; nothing was changed."
                " Run the migrations with `holonograph query --write --store URL 'SELECT 1'`"
            )
        rows = store.query(CLUSTER_REPLICAS, {"cluster": cluster}).rows
        if not rows:
            raise MigrationError(f"cluster {cluster}: not in system.clusters of this server")
        urls = node_urls(store.url, [(int(a), int(b), str(c)) for a, b, c in rows])
        return {
            shard: [Node(open_node(url), DATABASE, urlsplit(url).hostname or url) for url in urls]
            for shard, urls in urls.items()
        }

    return nodes


def relayout_on_cluster(
    store: Store,
    cluster: str,
    table: str,
    staging: str,
    owners: str,
    key: str,
    nodes: NodesOf,
) -> None:
    """`relayout` on a cluster: on tables that hold rows, each shard lays out its own
    local rows and each replica swaps its local tables (`schemas.cluster_relayout`,
    the plan and why it is exact and re-runnable; `nodes` opens the shards' replicas);
    on empty ones the local tables are exchanged on every node at once. Then the
    Distributed table is recreated over the new layout and the old tables dropped."""
    db, name = table.split(".")
    staging_db, staging_name = staging.split(".")
    local, staging_local = f"{db}.{local_name(name)}", f"{staging_db}.{local_name(staging_name)}"
    on = f"ON CLUSTER {cluster}"
    held = int(store.query(f"SELECT count() FROM {table}").scalar() or 0)
    marked = PLACEMENT_COLUMNS[0] in _columns(store, db, local_name(name))
    if held or not marked:
        shards = nodes(store, cluster) if held else {}
        if shards:
            relayout_shards(shards, name, staging_name, owners.split(".")[1], placed_copy)
        elif not marked:
            store.command(f"EXCHANGE TABLES {local} AND {staging_local} {on}")
    store.command(
        f"CREATE OR REPLACE TABLE {table} {on} AS {local}"
        f" ENGINE = Distributed({cluster}, {db}, {local_name(name)}, {key})"
    )
    store.command(f"DROP TABLE IF EXISTS {staging} {on} SYNC")
    store.command(f"DROP TABLE IF EXISTS {staging_local} {on} SYNC")


def backfill(store: Store, view: str, on_cluster: bool = False) -> None:
    """Insert into the target of the materialized view `view` what its SELECT gives
    over its source's rows now: what it would have written, had it existed when they
    were inserted. Create the view first, then backfill: a row inserted in between is
    written twice, so the target must collapse a repeated row (a ReplacingMergeTree
    keyed on a function of the source row), which also makes a re-run after a crash
    safe. `on_cluster`: the view reads and writes local tables (`schemas.cluster`);
    its SELECT runs once through the Distributed tables (each row lands on its shard)."""
    db, name = view.split(".")
    rows = store.query(
        "SELECT as_select, create_table_query FROM system.tables"
        " WHERE database = {db:String} AND name = {name:String}",
        {"db": db, "name": name},
    ).rows
    target = _TARGET.search(str(rows[0][1])) if rows else None
    if not rows or target is None:
        raise MigrationError(f"backfill of {view}: no materialized view TO a table by that name")
    columns = ", ".join(_columns(store, db, name))
    select, into = str(rows[0][0]), target[2]
    if on_cluster:
        select = re.sub(rf"\b({_IDENT}\.{_IDENT}){LOCAL}\b", r"\1", select)
        into = into.removesuffix(LOCAL)
    store.command(f"INSERT INTO {target[1]}.{into} ({columns}) {select}")


def rebuild_on_cluster(
    store: Store, cluster: str, table: str, staging: str, marker: str, key: str
) -> None:
    """`rebuild` on a cluster (`schemas.cluster`): the rows copied through the
    Distributed tables (each lands on its shard again: the key is the identity's),
    the local tables exchanged on every node, the Distributed table recreated over the
    new layout. Repeatable from any step: the marker is looked for on the local table."""
    db, name = table.split(".")
    staging_db, staging_name = staging.split(".")
    local, staging_local = f"{db}.{local_name(name)}", f"{staging_db}.{local_name(staging_name)}"
    on = f"ON CLUSTER {cluster}"
    old = _columns(store, db, local_name(name))
    if marker not in old:
        shared = [c for c in _columns(store, staging_db, local_name(staging_name)) if c in old]
        if not shared:
            raise MigrationError(f"rebuild of {table}: {staging} does not exist")
        columns = ", ".join(shared)
        store.command(f"TRUNCATE TABLE {staging_local} {on}")
        store.command(f"INSERT INTO {staging} ({columns}) SELECT {columns} FROM {table}")
        store.command(f"EXCHANGE TABLES {local} AND {staging_local} {on}")
    store.command(
        f"CREATE OR REPLACE TABLE {table} {on} AS {local}"
        f" ENGINE = Distributed({cluster}, {db}, {local_name(name)}, {key})"
    )
    store.command(f"DROP TABLE IF EXISTS {staging} {on} SYNC")
    store.command(f"DROP TABLE IF EXISTS {staging_local} {on} SYNC")


def _run(store: Store, statement: str, open_node: OpenNode | None = None) -> None:
    match = CLUSTER_RELAYOUT.match(statement)
    if match is not None:
        cluster, db, table, staging_db, staging, owners_db, owners, key = match.groups()
        relayout_on_cluster(
            store, cluster, f"{db}.{table}", f"{staging_db}.{staging}",
            f"{owners_db}.{owners}", key, cluster_nodes(open_node),
        )  # fmt: skip
        return
    match = _RELAYOUT.match(statement)
    if match is not None:
        db, table, staging_db, staging, owners_db, owners = match.groups()
        relayout(store, f"{db}.{table}", f"{staging_db}.{staging}", f"{owners_db}.{owners}")
        return
    match = CLUSTER_REBUILD.match(statement)
    if match is not None:
        cluster, db, table, staging_db, staging, marker, key = match.groups()
        rebuild_on_cluster(store, cluster, f"{db}.{table}", f"{staging_db}.{staging}", marker, key)
        return
    match = _REBUILD.match(statement)
    if match is not None:
        db, table, staging_db, staging, marker = match.groups()
        rebuild(store, f"{db}.{table}", f"{staging_db}.{staging}", marker)
        return
    match = _BACKFILL.match(statement)
    if match is not None:
        view = f"{match[1]}.{match[2]}"
        backfill(store, view, on_cluster=cluster_of(store.url) is not None)
        return
    store.command(statement)


def apply_migrations(
    store: Store, migrations: Sequence[Migration] | None = None, open_node: OpenNode | None = None
) -> list[Migration]:
    """Apply every migration (of `migrations`, default all shipped) not yet recorded;
    return the ones applied now. On a cluster (the store URL's `cluster` parameter)
    each statement runs as `schemas.cluster` renders it; `open_node` opens the
    cluster's replicas for a step that runs on each (the relayout of rows held). A
    store already current costs one query (`is_current`): every command that opens the
    store comes here first."""
    shipped = load_migrations() if migrations is None else list(migrations)
    if is_current(store, shipped):
        return []
    cluster = cluster_of(store.url)
    schema = ClusterSchema(cluster) if cluster else None

    def statements(texts: Sequence[str]) -> list[str]:
        if schema is None:
            return list(texts)
        return [out for text in texts for out in schema.render(text)]

    for statement in statements(
        [
            f"CREATE DATABASE IF NOT EXISTS {DATABASE}",
            f"CREATE TABLE IF NOT EXISTS {DATABASE}.schema_migrations"
            " (version UInt32, name String, checksum String,"
            " applied_at DateTime64(3, 'UTC') DEFAULT now64(3))"
            " ENGINE = MergeTree ORDER BY version",
        ]
    ):
        store.command(statement)
    recorded = {
        int(v): c
        for v, c in store.query(f"SELECT version, checksum FROM {DATABASE}.schema_migrations").rows
    }
    applied = []
    for migration in shipped:
        rendered = statements(migration.statements())  # recorded too: the schema so far
        if migration.version in recorded:
            if recorded[migration.version] != migration.checksum:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} was edited after"
                    " it was applied; add a new migration instead"
                )
            continue
        for statement in rendered:
            _run(store, statement, open_node)
        store.insert(
            f"{DATABASE}.schema_migrations",
            [[migration.version, migration.name, migration.checksum]],
            ["version", "name", "checksum"],
        )
        applied.append(migration)
    apply_merge_tuning(store, cluster)
    apply_retention_ttl(store, cluster)  # a table a migration rebuilt gets its TTL back
    return applied


def is_current(store: Store, migrations: Sequence[Migration]) -> bool:
    """One query: is each of `migrations` recorded with its checksum, and are the ingest
    tables tuned (`schemas.tuning`)? False on any doubt (no bookkeeping table yet, a
    checksum that differs, a server without the setting), and the full path decides
    and says what is wrong."""
    try:
        rows = store.query(
            "SELECT version, checksum,"
            " (SELECT count() FROM system.tables WHERE database = {db:String}"
            " AND has({tuned:Array(String)}, name)"
            " AND position(create_table_query, {setting:String}) > 0)"
            f" FROM {DATABASE}.schema_migrations",
            {
                "db": DATABASE,
                "tuned": list(TUNED_TABLES),
                "setting": f"merge_selector_base = {MERGE_SELECTOR_BASE}",
            },
        ).rows
    except Exception:  # the full path meets the same error, and says it
        return False
    recorded = {int(version): str(checksum) for version, checksum, _ in rows}
    tuned = int(rows[0][2]) if rows else 0
    return tuned == len(TUNED_TABLES) and all(
        recorded.get(m.version) == m.checksum for m in migrations
    )
