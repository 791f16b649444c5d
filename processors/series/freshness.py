"""How far the stored completeness windows lag the events an analysis reads.

Drift and variance bracket delivery loss from `completeness_windows`, which only the
completeness refresh rewrites (`serve`/`sink` every refresh period, or
`holonograph completeness --refresh`). Events that arrived after the last refresh began
into windows it had already counted (a backfill of last week, sent a minute ago; a
delivery hours late) are in the series but their loss is not in the windows yet: the
answer is stale, and says so with how far behind it is. Callers that may write refresh
first (`holonograph.runner`), then read a fresh answer.

Live traffic is not staleness: while `serve` ingests, some event has always arrived
since the last refresh began, but one that happened within the tolerance (two refresh
periods) before that refresh lands in a window still being filled, which the next
refresh counts as the cadence promises. Only an event older than that, arriving after
the refresh, makes the answer stale.
"""

from __future__ import annotations

import datetime as dt
import os

from processors.series.cells import SeriesQuery
from processors.series.refreshes import last_refresh_began
from schemas.completeness import WindowsFreshness
from schemas.readonce import remembered
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import from_store_time, to_store_time


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


# The refresh cadence of `serve`/`sink` (their `status_refresh_seconds`, this variable).
REFRESH_SECONDS_ENV = "HOLONOGRAPH_STATUS_REFRESH_SECONDS"
DEFAULT_REFRESH_SECONDS = 60.0


def live_tolerance(refresh_seconds: float | None = None) -> dt.timedelta:
    """How long before a refresh began an event may have happened and still count as
    live traffic when it arrives after it: two refresh periods (`refresh_seconds`,
    default the cadence `serve` and `sink` run at, from their environment), the same
    margin at which `completeness` calls its tables stale."""
    if refresh_seconds is None:
        try:
            refresh_seconds = float(os.environ.get(REFRESH_SECONDS_ENV, DEFAULT_REFRESH_SECONDS))
        except ValueError:
            refresh_seconds = DEFAULT_REFRESH_SECONDS
        if not refresh_seconds > 0:
            refresh_seconds = DEFAULT_REFRESH_SECONDS
    return dt.timedelta(seconds=2 * refresh_seconds)


def late_arrival(
    store: Store, query: SeriesQuery, began: dt.datetime, tolerance: dt.timedelta
) -> dt.datetime | None:
    """The newest ingest time of the query's stream events that arrived after `began`
    although they happened more than `tolerance` before it: late into windows the
    refresh had already counted (None: none did)."""
    sql = f"""
        SELECT max(ingested_at), count() FROM {EVALUATION_EVENTS.qualified}
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND surface_id = {{surface:String}}
          AND emission_stream != ''
          AND timestamp >= {{since:DateTime64(3, 'UTC')}}
          AND timestamp < {{until:DateTime64(3, 'UTC')}}
          AND ingested_at > {{began:DateTime64(3, 'UTC')}}
          AND timestamp < {{happened_before:DateTime64(3, 'UTC')}}
    """
    params = {
        **query.params(),
        "began": to_store_time(began),
        "happened_before": to_store_time(began - tolerance),
    }
    newest, events = store.query(sql, params).rows[0]
    return from_store_time(newest) if events else None


def read_freshness(
    store: Store, query: SeriesQuery, tolerance: dt.timedelta | None = None
) -> WindowsFreshness:
    """The windows' freshness for the events `query` reads (`tolerance`: how old an
    event arriving after the last refresh may be and still be live traffic; default
    `live_tolerance()`); read once per store and query in a
    `schemas.readonce.read_once` block."""
    return remembered(
        store, ("freshness", query, tolerance), lambda: _read_freshness(store, query, tolerance)
    )


def _read_freshness(
    store: Store, query: SeriesQuery, tolerance: dt.timedelta | None
) -> WindowsFreshness:
    began = last_refresh_began(store)
    arrived = newest_arrival(store, query)
    if began is None or arrived is None or arrived <= began:
        return judge(began, arrived)
    late = late_arrival(store, query, began, tolerance or live_tolerance())
    return judge(began, arrived, late)


def judge(
    began: dt.datetime | None,
    arrived: dt.datetime | None,
    late: dt.datetime | None = None,
) -> WindowsFreshness:
    """Stale when the windows were never refreshed, or when `late` (the newest arrival
    after the refresh of an event older than the live tolerance) is given: behind by
    how long after the refresh began it arrived. An `arrived` after `began` without a
    `late` one is live traffic the next refresh counts: fresh."""
    if arrived is None:  # nothing the windows could count
        return WindowsFreshness(refreshed_at=began, newest_arrival=None, stale=False)
    if began is None:
        return WindowsFreshness(refreshed_at=None, newest_arrival=arrived, stale=True)
    if late is None or late <= began:
        return WindowsFreshness(refreshed_at=began, newest_arrival=arrived, stale=False)
    behind = (late - began).total_seconds()
    return WindowsFreshness(
        refreshed_at=began, newest_arrival=arrived, stale=True, behind_seconds=round(behind, 3)
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
    late = freshness.refreshed_at + dt.timedelta(seconds=freshness.behind_seconds or 0.0)
    return (
        f"stale: completeness windows refreshed {freshness.refreshed_at:%Y-%m-%dT%H:%M:%SZ},"
        f" {freshness.behind_seconds:g}s before the newest event of this range arrived"
        f" that happened before that refresh ({late:%Y-%m-%dT%H:%M:%SZ}, a backfill or a late"
        " delivery): its delivery loss is not bracketed yet"
        " (`holonograph completeness --refresh`, or wait for serve/sink's refresh)"
    )
