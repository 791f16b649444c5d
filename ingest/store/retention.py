"""`--retention`: a TTL on the event tables, or none (keep forever, the default)."""

from __future__ import annotations

import re

from schemas.store import Store
from schemas.tables import (
    DATABASE,
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    QUARANTINE,
)

_RETENTION = re.compile(r"^(\d+)\s*([hdw])$")
_RETENTION_UNITS = {"h": "HOUR", "d": "DAY", "w": "WEEK"}


def parse_retention(text: str | None) -> tuple[int, str] | None:
    """'30d' -> (30, 'DAY'); None or 'keep' -> None (keep forever)."""
    if text is None or text.strip().lower() in ("", "keep", "forever"):
        return None
    match = _RETENTION.match(text.strip().lower())
    if not match or int(match[1]) <= 0:
        raise ValueError(f"retention {text!r}: use a number with h, d or w (e.g. 30d) or 'keep'")
    return int(match[1]), _RETENTION_UNITS[match[2]]


# table -> the time column its TTL counts from
RETAINED_TABLES = {
    EVALUATION_EVENTS.name: "timestamp",
    EVALUATION_DIMENSIONS.name: "timestamp",
    EMISSION_RECEIPTS.name: "received_at",
    QUARANTINE.name: "received_at",
}


def apply_retention(store: Store, retention: str | None) -> None:
    parsed = parse_retention(retention)
    for table, column in RETAINED_TABLES.items():
        has_ttl = bool(
            store.query(
                "SELECT count() FROM system.tables WHERE database = {db:String}"
                " AND name = {t:String} AND position(create_table_query, ' TTL ') > 0",
                {"db": DATABASE, "t": table},
            ).scalar()
        )
        if parsed is None:
            if has_ttl:
                store.command(f"ALTER TABLE {DATABASE}.{table} REMOVE TTL")
            continue
        amount, unit = parsed
        store.command(
            f"ALTER TABLE {DATABASE}.{table} MODIFY TTL toDateTime({column})"
            f" + INTERVAL {amount} {unit}"
        )
