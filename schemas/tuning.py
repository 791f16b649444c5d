"""Merge tuning for the tables every accepted span writes to.

Each group commit writes one small part per table, and ClickHouse merges parts in
the background. With the default merge selector (`merge_selector_base` 5), small
parts are merged again and again as they grow: on the embedded store those merges
cost about as much CPU per span as the insert itself. A base of 10 merges parts of
more unequal sizes less often, lowering write amplification at the price of a few
more active parts (the figures: bench/RESULTS.md). Applied only where the server
knows the setting, so older ClickHouse servers keep their defaults.
"""

from __future__ import annotations

from schemas.store import Store
from schemas.tables import DATABASE, EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

MERGE_SELECTOR_BASE = 10
TUNED_TABLES = (EVALUATION_EVENTS.name, EVALUATION_DIMENSIONS.name, EMISSION_RECEIPTS.name)


def apply_merge_tuning(store: Store, cluster: str | None = None) -> bool:
    """Set the merge selector base on the ingest tables that lack it (every command that
    opens the store runs migrations, so this must cost one query when done); False
    when the server does not know the setting. On a cluster: on the local tables."""
    known = store.query(
        "SELECT count() FROM system.merge_tree_settings WHERE name = 'merge_selector_base'"
    ).scalar()
    if not known:
        return False
    tuned = {
        str(name)
        for (name,) in store.query(
            "SELECT name FROM system.tables WHERE database = {db:String}"
            " AND position(create_table_query, {setting:String}) > 0",
            {"db": DATABASE, "setting": f"merge_selector_base = {MERGE_SELECTOR_BASE}"},
        ).rows
    }
    for table in TUNED_TABLES:
        name = table + "_local" if cluster else table
        if name not in tuned:
            on = f" ON CLUSTER {cluster}" if cluster else ""
            store.command(
                f"ALTER TABLE {DATABASE}.{name}{on}"
                f" MODIFY SETTING merge_selector_base = {MERGE_SELECTOR_BASE}"
            )
    return True
