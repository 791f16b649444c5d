"""Delivery-loss windows of a surface, read from `holonograph.completeness_windows`, and
the buckets whose events carry no emission ordinals, where no loss can be measured.

That table belongs to the completeness job and is read by the columns its migration
gives it: the surface-scope rows flagged `bias_flag`, at the query's bucket
granularity (or else the finest the table holds). Without the table (a store the
completeness migration never reached) the answer is None and callers say so instead of
pretending there was no loss.

Events without emission ordinals (OpenTelemetry GenAI evaluations, stored with
`emission_stream = ''`) are on no stream, so no completeness window can count their
loss: `fetch_without_ordinals` finds the buckets holding them, from the series' own rows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from processors.series.cells import (
    BUCKET_SQL,
    BUCKETS,
    SELECTION_FILTER,
    SERIES_FILTER,
    SeriesQuery,
)
from schemas.migrations import table_exists
from schemas.store import Store
from schemas.tables import COMPLETENESS_WINDOWS, EVALUATION_DIMENSIONS
from schemas.times import to_store_time

_WIDTH_SQL = {
    "minute": 60,
    "hour": 3600,
    "day": 86400,
}


@dataclass(frozen=True)
class LossWindow:
    start: dt.datetime
    end: dt.datetime
    offered: float
    delivered: float

    @property
    def completeness(self) -> float:
        return self.delivered / self.offered if self.offered > 0 else 1.0


def fetch_loss_windows(store: Store, query: SeriesQuery) -> list[LossWindow] | None:
    """Windows flagged `bias_flag` for the surface, merged when they touch; None when
    the completeness table is not there to ask. With several bucket granularities in the
    table, the query's own (or else the finest) is used."""
    if not table_exists(store, COMPLETENESS_WINDOWS):
        return None
    where = [
        "bias_flag",
        "bucket_start < {until:DateTime64(3, 'UTC')}",
        "bucket_start >= {since:DateTime64(3, 'UTC')} - INTERVAL 1 DAY",
        "({tenant:String} = '' OR tenant_id = {tenant:String})",
        "surface_id = {surface:String}",
        "toString(scope) = 'surface'",
    ]
    table = f"{COMPLETENESS_WINDOWS.qualified} FINAL"
    params = query.params()
    chosen = _granularity(store, table, where, params, query.bucket)
    where.append("toString(bucket) = {granularity:String}")
    params["granularity"] = chosen
    sql = f"""
        SELECT bucket_start, toFloat64(offered), toFloat64(delivered) FROM {table}
        WHERE {" AND ".join(where)} ORDER BY bucket_start
    """
    step = dt.timedelta(seconds=_WIDTH_SQL[chosen])
    windows = []
    for start, off, dlv in store.query(sql, params).rows:
        stop = start + step
        if stop > to_store_time(query.since):
            windows.append(LossWindow(start, stop, float(off), float(dlv)))
    return merge(windows)


@dataclass(frozen=True)
class Unmeasured:
    """A run of consecutive buckets holding events without emission ordinals: `events`
    read there, `without_ordinals` of them with none."""

    start: dt.datetime
    end: dt.datetime
    events: int
    without_ordinals: int


def fetch_without_ordinals(store: Store, query: SeriesQuery) -> list[Unmeasured]:
    """The query's buckets (its series: filters, role, dimension) with events that carry
    no emission ordinals, consecutive ones merged; events counted once per (tenant,
    event) as `event_count` counts them."""
    sql = f"""
        SELECT {BUCKET_SQL[query.bucket]} AS bucket_start,
               uniqExact(tenant_id, event_id) AS events,
               uniqExactIf(tenant_id, event_id, emission_stream = '') AS without_ordinals
        FROM {EVALUATION_DIMENSIONS.qualified} FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER}
          AND ({{dimension:String}} = '' OR dimension_id = {{dimension:String}})
        GROUP BY bucket_start HAVING without_ordinals > 0 ORDER BY bucket_start
    """
    step = BUCKETS[query.bucket]
    out: list[Unmeasured] = []
    for start, events, without in store.query(sql, query.params()).rows:
        if out and out[-1].end == start:
            last = out[-1]
            out[-1] = Unmeasured(
                last.start, start + step, last.events + events, last.without_ordinals + without
            )
        else:
            out.append(Unmeasured(start, start + step, int(events), int(without)))
    return out


def _granularity(
    store: Store, table: str, where: list[str], params: dict[str, object], own: str
) -> str:
    found = {
        str(g)
        for (g,) in store.query(
            f"SELECT DISTINCT toString(bucket) FROM {table} WHERE {' AND '.join(where)}", params
        ).rows
    }
    if own in found or not found:
        return own
    return min(found, key=lambda g: _WIDTH_SQL.get(g, 10**9))


def merge(windows: list[LossWindow]) -> list[LossWindow]:
    out: list[LossWindow] = []
    for w in sorted(windows, key=lambda w: w.start):
        if out and w.start <= out[-1].end:
            last = out[-1]
            out[-1] = LossWindow(
                last.start,
                max(last.end, w.end),
                last.offered + w.offered,
                last.delivered + w.delivered,
            )
        else:
            out.append(w)
    return out
