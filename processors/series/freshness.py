"""How far the stored completeness windows lag the events an analysis reads.

Drift and variance bracket delivery loss from `completeness_windows`, which only the
completeness refresh rewrites (`serve`/`sink` every refresh period, or
`holonograph completeness --refresh`). Events that arrived after the last refresh began
(a backfill of last week, sent a minute ago) are in the series but their loss is not in
the windows yet: the answer is stale, and says so with how far behind it is. Callers
that may write refresh first (`holonograph.runner`), then read a fresh answer.
"""

from __future__ import annotations

import datetime as dt

from processors.series.cells import SeriesQuery
from processors.series.refreshes import last_refresh_began
from schemas.completeness import WindowsFreshness
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import from_store_time


def newest_arrival(store: Store, query: SeriesQuery, on_streams: bool = True) -> dt.datetime | None:
    """The newest ingest time of the query's events (`on_streams`: only those on an
    emission stream, the ones windows count); None when it has none."""
    sql = f"""
        SELECT max(ingested_at), count() FROM {EVALUATION_EVENTS.qualified}
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND surface_id = {{surface:String}}
          AND (NOT {{on_streams:Bool}} OR emission_stream != '')
          AND timestamp >= {{since:DateTime64(3, 'UTC')}}
          AND timestamp < {{until:DateTime64(3, 'UTC')}}
    """
    newest, events = store.query(sql, {**query.params(), "on_streams": on_streams}).rows[0]
    return from_store_time(newest) if events else None


def read_freshness(store: Store, query: SeriesQuery) -> WindowsFreshness:
    """The windows' freshness for the events `query` reads."""
    began = last_refresh_began(store)
    arrived = newest_arrival(store, query)
    return judge(began, arrived)


def judge(began: dt.datetime | None, arrived: dt.datetime | None) -> WindowsFreshness:
    if arrived is None:  # nothing the windows could count
        return WindowsFreshness(refreshed_at=began, newest_arrival=None, stale=False)
    if began is None:
        return WindowsFreshness(refreshed_at=None, newest_arrival=arrived, stale=True)
    behind = (arrived - began).total_seconds()
    return WindowsFreshness(
        refreshed_at=began,
        newest_arrival=arrived,
        stale=behind > 0,
        behind_seconds=round(behind, 3) if behind > 0 else None,
    )


def stale_note(freshness: WindowsFreshness) -> str | None:
    """The line an analysis shows when its delivery-loss brackets may be missing."""
    if not freshness.stale:
        return None
    arrived = f"{freshness.newest_arrival:%Y-%m-%dT%H:%M:%SZ}"
    if freshness.refreshed_at is None:
        return (
            "stale: the completeness windows were never refreshed, and events of this range"
            f" arrived up to {arrived}: delivery loss is not bracketed"
            " (`holonograph completeness --refresh`, or wait for serve/sink's refresh)"
        )
    return (
        f"stale: completeness windows refreshed {freshness.refreshed_at:%Y-%m-%dT%H:%M:%SZ},"
        f" {freshness.behind_seconds:g}s before the newest event of this range arrived"
        f" ({arrived}): its delivery loss is not bracketed yet"
        " (`holonograph completeness --refresh`, or wait for serve/sink's refresh)"
    )
