"""One way for every command to reach the store named by `--store`/`--data-dir`."""

from __future__ import annotations

from pathlib import Path

from holonograph.admin_client import AdminStore, read_admin_file
from ingest.store.clickhouse import ClickHouseStore, connect_client, open_store
from ingest.store.limits import LimitRequest, ReadLimits
from ingest.store.url import chdb_path, is_embedded, normalize_store_url
from schemas.migrations import apply_migrations
from schemas.store import Store


def connect(
    url: str,
    *,
    write: bool = False,
    migrate: bool = True,
    tenant: str | None = None,
    limits: LimitRequest | None = None,
) -> Store:
    """Open the store at `url`, through its owner's admin endpoint when a live
    process holds that embedded directory.

    Without `write` the store is read-only, enforced by the server side
    (`ingest.store.reader`), within the read limits, those named in `limits` as given
    (through an owner's endpoint: the owner's for the others, and never above them);
    `tenant` (read-only only) hides every other tenant's rows.
    Migrations run only where this command may write: with `write`, or on a chDB
    directory no process holds (a server's reader user cannot run DDL)."""
    if write and tenant is not None:
        raise ValueError("a tenant's view of the store is read-only")
    if is_embedded(url):
        info = read_admin_file(chdb_path(url))
        if info is not None:
            token = info.get("write_token" if write else "read_token")
            if not isinstance(token, str):
                raise ConnectionError(f"{chdb_path(url)} is held by a process without tokens")
            return AdminStore(url, info["url"], token, tenant=tenant, limits=limits)
        if not Path(chdb_path(url)).exists() and not write:
            raise FileNotFoundError(
                f"no store at {chdb_path(url)} (start `holonograph serve` first)"
            )
    from ingest.store.reader import open_reader, read_only

    if write:
        store = open_store(url)
        if migrate:
            apply_migrations(store)
        return store
    if migrate and is_embedded(url):
        # One connection: migrated, then made read-only for good (opening chDB costs
        # more than anything a light command does; `ingest.store.reader.read_only`).
        url = normalize_store_url(url)
        client = connect_client(url)
        try:
            apply_migrations(ClickHouseStore(url, client))
        except BaseException:
            client.close()
            raise
        return read_only(url, client, tenant, ReadLimits.from_mapping(limits or {}))
    return open_reader(url, tenant, ReadLimits.from_mapping(limits or {}))
