"""Store URLs: `chdb:///path` (embedded chDB) or `http(s)://user:pass@host:8123`, and
the one rule every command and service applies to `--store` / `--data-dir`.

Kept apart from the client (`ingest.store.clickhouse`) so reading a URL imports no
driver: light commands and config validation use it at start-up.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from ingest.redact import redact_url

DEFAULT_DATA_DIR = "./holonograph-data"


class StoreURLError(ValueError):
    """The store URL is neither `chdb:///path` nor `http(s)://host:port`."""


def chdb_url(data_dir: str | Path) -> str:
    return f"chdb://{Path(data_dir).resolve()}"


def normalize_store_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme == "chdb":
        path = (parsed.netloc + parsed.path) if parsed.netloc else parsed.path
        if not path:
            raise StoreURLError(
                f"{redact_url(url)!r}: a chdb store needs a directory, e.g. chdb:///var/lib/holo"
            )
        return chdb_url(path)
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname:
            raise StoreURLError(f"{redact_url(url)!r}: no host")
        return url
    raise StoreURLError(f"{redact_url(url)!r}: use chdb:///path or http(s)://host:8123")


def is_embedded(url: str) -> bool:
    return urlparse(url).scheme == "chdb"


def chdb_path(url: str) -> Path:
    return Path(urlparse(normalize_store_url(url)).path)


def store_url(store: str | None, data_dir: str | Path | None) -> str:
    """`--store` wins; `--data-dir` is shorthand for a chDB store; else `DEFAULT_DATA_DIR`."""
    if store:
        return normalize_store_url(store)
    return chdb_url(data_dir or DEFAULT_DATA_DIR)
