"""Where an event's rows sit in the event and dimension tables: its *placement*
(docs/decisions/0014-event-layout-placement.md).

The tables are sorted by `(tenant_id, placed_surface_id, placed_hour, event_id[,
dimension_id])`. The placement is the event's surface and the hour of its timestamp at
its first receipt, recorded with its owner's claim (`event_owners`) and reused by
every re-send, whatever it carries: every version of one event has one sorting key,
so `FINAL` still collapses them, and a surface-and-window read prunes to that
surface's hours whatever the ids look like.

A re-send may carry another surface or timestamp than its placement. Such a row is a
*move*: the store's own materialized views (`event_moves_from_*`, migration 0016)
record its (surface, hour) in `event_moves`, whoever writes it. A read's pruning
predicate (`placed_in`) takes the rows placed in its surface and hours *or* listed
there, so it holds every row today's filters take: it only narrows what is read,
never what is answered. The filters on `surface_id` and `timestamp` stay as they were.
"""

from __future__ import annotations

import datetime as dt

from schemas.tables import EVENT_MOVES

HOUR_SECONDS = 3600
# DateTime('UTC') holds 1970-01-01 .. 2106-02-07; ClickHouse's toStartOfHour clamps
# there too. (A placement that differs from the store's toStartOfHour is a move, and
# stays found: exactness never depends on this function.)
_LAST_HOUR = (2**32 - 1) // HOUR_SECONDS * HOUR_SECONDS

Placement = tuple[str, int]  # (surface id, hour as epoch seconds)


def placed_hour(timestamp: int | dt.datetime) -> int:
    """The hour of a timestamp (DateTime64(9) ticks, or a datetime; naive is UTC) as
    epoch seconds, as `toStartOfHour` gives it."""
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.UTC)
        seconds = int(timestamp.timestamp() // 1)
    else:
        seconds = timestamp // 1_000_000_000
    hour = seconds // HOUR_SECONDS * HOUR_SECONDS
    return min(max(hour, 0), _LAST_HOUR)


def placed_in(
    tenant: str = "{tenant:String}",
    surface: str | None = "{surface:String}",
    since: str = "{since:DateTime64(3, 'UTC')}",
    until: str = "{until:DateTime64(3, 'UTC')}",
    *,
    other_surfaces: bool = False,
    prefix: str = "",
) -> str:
    """The pruning predicate of a read of `tenant` ('' : every tenant), `surface`
    (None: every surface; `other_surfaces`: every surface but it) over [since, until),
    each a SQL expression (by default the series' parameters). Exactly a superset of
    the rows `surface_id`/`timestamp` filters take (see the module doc), so AND it
    with them. `prefix`: the table's alias and a dot, in a join."""
    op = "!=" if other_surfaces else "="
    hours = f"BETWEEN toStartOfHour({since}) AND toStartOfHour({until})"
    placed = [f"{prefix}placed_hour {hours}"]
    moved = [f"({tenant} = '' OR tenant_id = {tenant})", f"hour {hours}"]
    if surface is not None:
        placed.insert(0, f"{prefix}placed_surface_id {op} {surface}")
        moved.insert(1, f"surface_id {op} {surface}")
    key = ", ".join(f"{prefix}{c}" for c in ("tenant_id", "placed_surface_id", "placed_hour"))
    return (
        f"(({' AND '.join(placed)})"
        f" OR ({key}, {prefix}event_id) IN ("
        f"SELECT tenant_id, placed_surface_id, placed_hour, event_id"
        f" FROM {EVENT_MOVES.qualified} WHERE {' AND '.join(moved)}))"
    )


__all__ = ["HOUR_SECONDS", "Placement", "placed_hour", "placed_in"]
