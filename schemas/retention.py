"""Retention as ClickHouse TTL: the settings rows rendered into each retained table's
TTL, and applied again whenever they or the table changed.

Each tenant with a setting of its own gets a rule `toDateTime(<time>) +
toIntervalDay(N) WHERE cityHash64(tenant_id) = H`; the store's default (`serve
--retention`) covers every other tenant (`WHERE cityHash64(tenant_id) NOT IN (...)`),
so a tenant's setting wins whether it is shorter or longer. No setting at all: no TTL
(keep forever). The rules name tenants by the hash of their id, not the id: a table's
definition is readable in `system.tables` by every reader, a tenant's included, and
must not list the other tenants.

`apply_retention_ttl` runs after every migration run (`schemas.migrations`): a table
a later migration rebuilds (REBUILD creates it anew) gets its TTL back, and a store
whose settings did not change costs two queries. The comparison is ClickHouse's own
formatting of the current and the wanted clause, so a TTL is altered (and its
expired rows deleted by a mutation) only when it differs.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from schemas.cluster import cluster_of
from schemas.readonce import table_names
from schemas.store import Store
from schemas.tables import (
    DATABASE,
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    QUARANTINE,
    STORE_RETENTION,
    TENANT_RETENTION,
)

# table -> the time column its TTL counts from
RETAINED_TABLES: Mapping[str, str] = {
    EVALUATION_EVENTS.name: "timestamp",
    EVALUATION_DIMENSIONS.name: "timestamp",
    EMISSION_RECEIPTS.name: "received_at",
    QUARANTINE.name: "received_at",
}

_TTL = re.compile(r"\sTTL\s(.*?)(?:\sSETTINGS\s.*)?$", re.DOTALL)


@dataclass(frozen=True)
class RetentionRules:
    """Seconds kept after a row's time: the store's default (None: forever) and each
    tenant's own."""

    default: int | None = None
    tenants: Mapping[str, int] = field(default_factory=dict)

    def of(self, tenant: str | None) -> tuple[int | None, str]:
        """`tenant`'s retention in seconds and where it comes from ("tenant",
        "default", or "none": kept forever)."""
        if tenant is not None and tenant in self.tenants:
            return self.tenants[tenant], "tenant"
        if self.default is not None:
            return self.default, "default"
        return None, "none"


def _interval(seconds: int) -> str:
    """In the largest whole unit, as an operator reads it in SHOW CREATE TABLE."""
    for function, size in (("toIntervalDay", 86400), ("toIntervalHour", 3600)):
        if seconds % size == 0:
            return f"{function}({seconds // size})"
    return f"toIntervalSecond({seconds})"


def ttl_clause(column: str, rules: RetentionRules, hashes: Mapping[str, int]) -> str | None:
    """The TTL of a table whose rows' time is `column`, or None (no rule); `hashes`:
    ClickHouse's `cityHash64` of each tenant id of `rules`."""
    parts = [
        f"toDateTime({column}) + {_interval(seconds)} WHERE cityHash64(tenant_id) = {hashes[t]}"
        for t, seconds in sorted(rules.tenants.items(), key=lambda item: hashes[item[0]])
    ]
    if rules.default is not None:
        others = ", ".join(str(h) for h in sorted(hashes[t] for t in rules.tenants))
        rest = f" WHERE cityHash64(tenant_id) NOT IN ({others})" if others else ""
        parts.append(f"toDateTime({column}) + {_interval(rules.default)}{rest}")
    return ", ".join(parts) or None


def read_rules(store: Store) -> RetentionRules:
    """The settings as stored (a cleared tenant setting, 0 seconds, is none)."""
    tenants = {
        str(tenant): int(seconds)
        for tenant, seconds in store.query(
            f"SELECT tenant_id, seconds FROM {TENANT_RETENTION.qualified} FINAL WHERE seconds > 0"
        ).rows
    }
    rows = store.query(f"SELECT seconds FROM {STORE_RETENTION.qualified} FINAL").rows
    default = int(rows[0][0]) if rows and int(rows[0][0]) > 0 else None
    return RetentionRules(default, tenants)


class RetentionReach(BaseModel):
    """An analysis's window beside its tenant's retention: rows older than `horizon`
    (the analysis's now minus the retention) are deleted by the store's TTL, so a
    window that starts before it (`window_reaches_past`) reads only what is left."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    days: float
    source: Literal["tenant", "default"]
    horizon: dt.datetime
    window_reaches_past: bool

    def line(self) -> str:
        """The report's text line."""
        whose = "the tenant's setting" if self.source == "tenant" else "the store's default"
        kept = f"retention: {self.days:g} days ({whose}); rows before {_rfc3339(self.horizon)}"
        if not self.window_reaches_past:
            return f"{kept} are deleted; this window is within it"
        return (
            f"{kept} are deleted: this window reaches past retention and reads only what is"
            " left of its start"
        )


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def retention_reach(
    store: Store, tenant: str | None, since: dt.datetime | None, now: dt.datetime
) -> RetentionReach | None:
    """`tenant`'s retention beside a window from `since` (None: from the beginning) read
    at `now`; None when its rows are kept forever (or the store predates 0018). A
    tenant's reader sees its own setting and the store's default, no other tenant's."""
    if not {TENANT_RETENTION.name, STORE_RETENTION.name} <= table_names(store):
        return None
    seconds, source = read_rules(store).of(tenant)
    if seconds is None or source == "none":
        return None
    horizon = now - dt.timedelta(seconds=seconds)
    return RetentionReach(
        days=seconds / 86400,
        source="tenant" if source == "tenant" else "default",
        horizon=horizon,
        window_reaches_past=since is None or since < horizon,
    )


def apply_retention_ttl(store: Store, cluster: str | None = None) -> list[str]:
    """Make every retained table's TTL the settings' (a no-op where it is); the tables
    altered. Nothing before migration 0018 created the settings tables. On a cluster
    the TTL is the local tables' (`schemas.cluster`), altered ON CLUSTER."""
    cluster = cluster or cluster_of(getattr(store, "url", ""))
    suffix = "_local" if cluster else ""
    on = f" ON CLUSTER {cluster}" if cluster else ""
    wanted_tables = [
        *(t + suffix for t in RETAINED_TABLES),
        TENANT_RETENTION.name,
        STORE_RETENTION.name,
    ]
    found = {
        str(name): str(query)
        for name, query in store.query(
            "SELECT name, create_table_query FROM system.tables"
            " WHERE database = {db:String} AND has({names:Array(String)}, name)",
            {"db": DATABASE, "names": wanted_tables},
        ).rows
    }
    if TENANT_RETENTION.name not in found or STORE_RETENTION.name not in found:
        return []
    rules = read_rules(store)
    names = sorted(rules.tenants)
    hashes: dict[str, int] = {}
    if names:
        found_hashes = store.query(
            "SELECT arrayMap(t -> cityHash64(t), {names:Array(String)})", {"names": names}
        ).scalar()
        hashes = {name: int(h) for name, h in zip(names, found_hashes, strict=True)}
    pairs: list[tuple[str, str | None, str | None]] = []
    for table, column in RETAINED_TABLES.items():
        if table + suffix not in found:
            continue
        match = _TTL.search(found[table + suffix])
        pairs.append((table, match[1] if match else None, ttl_clause(column, rules, hashes)))
    altered = []
    for table, _current, wanted in _differing(store, pairs):
        qualified = f"{DATABASE}.{table}{suffix}{on}"
        if wanted is None:
            store.command(f"ALTER TABLE {qualified} REMOVE TTL")
        else:
            store.command(f"ALTER TABLE {qualified} MODIFY TTL {wanted}")
        altered.append(table)
    return altered


def _differing(
    store: Store, pairs: list[tuple[str, str | None, str | None]]
) -> list[tuple[str, str | None, str | None]]:
    """The (table, current, wanted) whose TTLs differ, as ClickHouse formats them."""
    compare = [(t, c, w) for t, c, w in pairs if c is not None and w is not None and c != w]
    out = [(t, c, w) for t, c, w in pairs if (c is None) != (w is None)]
    if not compare:
        return out
    texts = [f"ALTER TABLE t MODIFY TTL {text}" for _, c, w in compare for text in (c, w)]
    formatted = store.query(
        "SELECT arrayMap(q -> formatQuerySingleLine(q), {texts:Array(String)})", {"texts": texts}
    ).scalar()
    for i, pair in enumerate(compare):
        if formatted[2 * i] != formatted[2 * i + 1]:
            out.append(pair)
    return out
