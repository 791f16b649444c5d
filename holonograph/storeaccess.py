"""One way for every command to reach the store named by `--store`/`--data-dir`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.handoff.segments import LOG_DIRECTORY, pending
from ingest.service.admin_file import ADMIN_FILE
from ingest.store.clickhouse import ClickHouseStore, connect_client, open_store
from ingest.store.limits import LimitRequest, ReadLimits
from ingest.store.url import chdb_path, is_embedded, normalize_store_url
from schemas.migrations import apply_migrations
from schemas.store import Store
from schemas.tables import DATABASE

if TYPE_CHECKING:
    from holonograph.admin_client import AdminStore


def connect(
    url: str,
    *,
    write: bool = False,
    migrate: bool = True,
    tenant: str | None = None,
    limits: LimitRequest | None = None,
    only_tenant: bool = False,
    own_statements: bool = False,
) -> Store:
    """Open the store at `url`, through its owner's admin endpoint when a live
    process holds that embedded directory.

    Without `write` the store is read-only, enforced by the server side
    (`ingest.store.reader`), within the read limits, those named in `limits` as given
    (through an owner's endpoint: the owner's for the others, and never above them);
    `tenant` (read-only only) hides every other tenant's rows.
    Migrations run only where this command may write: with `write`, or on a chDB
    directory no process holds (a server's reader user cannot run DDL).
    `only_tenant` (read-only, no `tenant`), on such a directory: when every row of the
    store is one tenant's, the reader is scoped to it, found on the migrating
    connection before it is made read-only (it sees what an unscoped one would); its
    `tenant` says which, and a command's reads of that tenant can share it (opening a
    chDB connection costs a tenth of a second: bench/RESULTS.md).
    A chDB directory this command opens itself is reached through chDB's own
    connection (`ingest.store.embedded`), without clickhouse-connect.
    `own_statements` (read-only): the caller runs only statements its own code writes
    (a job's, every value bound on the server), never a user's or a client's text, so
    its reader skips the statement gate (`ingest.store.reader`); the server still
    refuses every write. Through an owner's endpoint the owner's gate decides."""
    if write and tenant is not None:
        raise ValueError("a tenant's view of the store is read-only")
    if is_embedded(url):
        owner = _owner(url, write=write, tenant=tenant, limits=limits)
        if owner is not None:
            return owner
        if not Path(chdb_path(url)).exists() and not write:
            raise FileNotFoundError(
                f"no store at {chdb_path(url)} (start `holonograph serve` first)"
            )
    from ingest.store.reader import open_reader, read_only

    embedded = is_embedded(url)
    if write:
        store = open_store(url, direct=embedded)
        if migrate:
            apply_migrations(store, open_node=open_store)
            if embedded:
                _replay_log(store, url)
        return store
    if migrate and embedded:
        # One connection: migrated, then made read-only for good (opening chDB costs
        # more than anything a light command does; `ingest.store.reader.read_only`).
        url = normalize_store_url(url)
        client = connect_client(url, direct=True)
        try:
            migrated = ClickHouseStore(url, client)
            apply_migrations(migrated, open_node=open_store)
            _replay_log(migrated, url)
            found = _only_tenant(migrated) if only_tenant and tenant is None else None
        except BaseException:
            client.close()
            raise
        return read_only(
            url,
            client,
            found.tenant if found is not None else tenant,
            ReadLimits.from_mapping(limits or {}),
            gate=not own_statements,
            tenant_tables=found.tables if found is not None else None,
        )
    return open_reader(
        url,
        tenant,
        ReadLimits.from_mapping(limits or {}),
        direct=embedded,
        gate=not own_statements,
    )


def _owner(
    url: str, *, write: bool, tenant: str | None, limits: LimitRequest | None
) -> AdminStore | None:
    """The store through the admin endpoint of the live process holding the directory
    of embedded `url`, if one does. The admin client (with its HTTP stack, a few tens
    of milliseconds to import) is imported only when an endpoint file is there."""
    data_dir = chdb_path(url)
    if not os.path.lexists(data_dir / ADMIN_FILE):  # a link too: refused below
        return None
    from holonograph.admin_client import AdminStore, read_admin_file

    info: dict[str, Any] | None = read_admin_file(data_dir)
    if info is None:
        return None
    token = info.get("write_token" if write else "read_token")
    if not isinstance(token, str):
        raise ConnectionError(f"{data_dir} is held by a process without tokens")
    return AdminStore(url, info["url"], token, tenant=tenant, limits=limits)


def _replay_log(store: Store, url: str) -> None:
    """What a killed `serve` acknowledged and did not drain from its small-request log
    (`ingest.handoff.smalllog`), written into the store before this command reads it:
    an acknowledged span is in every answer, whoever opens the directory next. A
    store with nothing pending costs a few `stat`s and imports nothing."""
    directory = Path(chdb_path(url)) / LOG_DIRECTORY
    if pending(directory):
        from ingest.handoff.smalllog import replay_pending

        replay_pending(store, directory)


@dataclass(frozen=True)
class _Tenancy:
    """What `_only_tenant` read: `tables`, every table and view with a tenant column
    (the tenant filter's); `tenant`, the tenant of every row if there is exactly one."""

    tables: tuple[str, ...]
    tenant: str | None


def _only_tenant(store: Store) -> _Tenancy:
    """The store's tenancy, in two queries (a reader scoped to the only tenant sees
    what an unscoped one would); the tables are the reader's tenant filter's. Views are
    left out of the tenants: their rows are their tables' (the filter applies to both)."""
    from ingest.store.reader import TENANT_COLUMN

    found = store.query(
        "SELECT c.table, t.engine LIKE '%View' FROM system.columns AS c"
        " INNER JOIN system.tables AS t ON t.database = c.database AND t.name = c.table"
        " WHERE c.database = {db:String} AND c.name = {col:String} ORDER BY c.table",
        {"db": DATABASE, "col": TENANT_COLUMN},
    ).rows
    tables = tuple(str(name) for name, _ in found)
    stored = [str(name) for name, view in found if not view]
    if not stored:
        return _Tenancy(tables, None)
    union = " UNION ALL ".join(
        f"SELECT DISTINCT {TENANT_COLUMN} FROM {DATABASE}.{table}" for table in stored
    )
    rows = store.query(f"SELECT DISTINCT {TENANT_COLUMN} FROM ({union}) LIMIT 2").rows
    return _Tenancy(tables, str(rows[0][0]) if len(rows) == 1 else None)
