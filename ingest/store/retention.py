"""Retention: the store's default (`serve --retention`) and each tenant's own
(`holonograph retention set`), stored in the settings tables (migration 0018) and
applied as ClickHouse TTL on the event, dimension, receipt and quarantine tables
(`schemas.retention`, which renders and re-applies them)."""

from __future__ import annotations

import re

from schemas.retention import RETAINED_TABLES as RETAINED_TABLES
from schemas.retention import apply_retention_ttl
from schemas.store import Store
from schemas.tables import STORE_RETENTION

_RETENTION = re.compile(r"^(\d+)\s*([hdw])$")
_RETENTION_UNITS = {"h": "HOUR", "d": "DAY", "w": "WEEK"}
_SECONDS = {"HOUR": 3600, "DAY": 86400, "WEEK": 7 * 86400}


def parse_retention(text: str | None) -> tuple[int, str] | None:
    """'30d' -> (30, 'DAY'); None or 'keep' -> None (keep forever)."""
    if text is None or text.strip().lower() in ("", "keep", "forever"):
        return None
    match = _RETENTION.match(text.strip().lower())
    if not match or int(match[1]) <= 0:
        raise ValueError(f"retention {text!r}: use a number with h, d or w (e.g. 30d) or 'keep'")
    return int(match[1]), _RETENTION_UNITS[match[2]]


def apply_retention(store: Store, retention: str | None) -> None:
    """The store's default retention (`serve --retention`; None: keep forever) saved,
    and every retained table's TTL made to agree with it and the tenants' own."""
    parsed = parse_retention(retention)
    seconds = 0 if parsed is None else parsed[0] * _SECONDS[parsed[1]]
    store.command(
        f"INSERT INTO {STORE_RETENTION.qualified} ({STORE_RETENTION.column_list()})"
        " SELECT {seconds:UInt64}, now64(3)",
        {"seconds": seconds},
    )
    apply_retention_ttl(store)
