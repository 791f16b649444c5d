"""One way for every command to reach the store named by `--store`/`--data-dir`."""

from __future__ import annotations

from pathlib import Path

from holonograph.admin_client import AdminStore, read_admin_file
from ingest.store import chdb_path, chdb_url, is_embedded, normalize_store_url, open_store
from schemas.migrations import apply_migrations
from schemas.store import Store

DEFAULT_DATA_DIR = "./holonograph-data"


def store_url_from(store: str | None, data_dir: str | None) -> str:
    """`--store` wins; `--data-dir` is shorthand for a chDB store; default ./holonograph-data."""
    if store:
        return normalize_store_url(store)
    return chdb_url(data_dir or DEFAULT_DATA_DIR)


def connect(url: str, *, write: bool = False, migrate: bool = True) -> Store:
    """Open the store at `url`, through its owner's admin endpoint when a live
    process holds that embedded directory. Writes through an owner need `write`."""
    if is_embedded(url):
        info = read_admin_file(chdb_path(url))
        if info is not None:
            return AdminStore(url, info["url"], info["token"], write=write)
        if not Path(chdb_path(url)).exists() and not write:
            raise FileNotFoundError(
                f"no store at {chdb_path(url)} (start `holonograph serve` first)"
            )
    store = open_store(url)
    if migrate:
        apply_migrations(store)
    store.readonly = not write
    return store
