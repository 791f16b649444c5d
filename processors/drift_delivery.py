"""Delivery-loss windows of a surface, read from `holonograph.completeness_windows`.

That table belongs to the completeness job (issue 3) and is read tolerantly: its
columns are looked up first; without the table (or without `bucket_start` and
`bias_flag`) the answer is None and callers say so instead of pretending there was no
loss. Windows are per surface when the table has `surface_id`, else per emission stream
(the streams that carried the surface's events).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from processors.completeness import last_refresh
from processors.drift_series import BUCKETS, SeriesQuery
from schemas.store import Store
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


def completeness_columns(store: Store) -> dict[str, str]:
    rows = store.query(
        "SELECT name, type FROM system.columns"
        " WHERE database = 'holonograph' AND table = 'completeness_windows'"
    ).rows
    return {str(name): str(kind) for name, kind in rows}


def fetch_loss_windows(store: Store, query: SeriesQuery) -> list[LossWindow] | None:
    """Windows flagged `bias_flag` for the surface, merged when they touch; None when
    the completeness table is not there to ask. With several bucket granularities in the
    table, the query's own (or else the finest) is used."""
    cols = completeness_columns(store)
    if not {"bucket_start", "bias_flag"} <= cols.keys():
        return None
    where = [
        "bias_flag",
        "bucket_start < {until:DateTime64(3, 'UTC')}",
        "bucket_start >= {since:DateTime64(3, 'UTC')} - INTERVAL 1 DAY",
    ]
    if "tenant_id" in cols:
        where.append("({tenant:String} = '' OR tenant_id = {tenant:String})")
    if "surface_id" in cols:
        where.append("surface_id = {surface:String}")
        if "scope" in cols:
            where.append("toString(scope) = 'surface'")
    elif "emission_stream" in cols:
        where.append(_STREAMS_OF_SURFACE)
    else:
        return None
    table = "holonograph.completeness_windows" + (" FINAL" if _replacing(store) else "")
    granularity = next((c for c in ("bucket", "granularity") if c in cols), None)
    params = query.params()
    if granularity:
        chosen = _granularity(store, table, granularity, where, params, query.bucket)
        where.append(f"toString({granularity}) = {{granularity:String}}")
        params["granularity"] = chosen
    end = "bucket_end" if "bucket_end" in cols else "bucket_start"
    offered = "toFloat64(offered)" if "offered" in cols else "0"
    delivered = "toFloat64(delivered)" if "delivered" in cols else "0"
    sql = f"""
        SELECT bucket_start, {end}, {offered}, {delivered} FROM {table}
        WHERE {" AND ".join(where)} ORDER BY bucket_start
    """
    step = (
        dt.timedelta(seconds=_WIDTH_SQL.get(str(params.get("granularity")), 0))
        or (BUCKETS[query.bucket])
    )
    windows = []
    for start, stop, off, dlv in store.query(sql, params).rows:
        stop = stop if end == "bucket_end" and stop > start else start + step
        if stop > to_store_time(query.since):
            windows.append(LossWindow(start, stop, float(off), float(dlv)))
    return merge(windows)


_STREAMS_OF_SURFACE = """emission_stream IN (
    SELECT DISTINCT emission_stream FROM holonograph.evaluation_events FINAL
    WHERE ({tenant:String} = '' OR tenant_id = {tenant:String})
      AND surface_id = {surface:String}
      AND timestamp >= {since:DateTime64(3, 'UTC')}
      AND timestamp < {until:DateTime64(3, 'UTC')})"""


def _replacing(store: Store) -> bool:
    engine = store.query(
        "SELECT engine FROM system.tables"
        " WHERE database = 'holonograph' AND name = 'completeness_windows'"
    ).scalar()
    return "Replacing" in str(engine or "")


def _granularity(
    store: Store, table: str, column: str, where: list[str], params: dict[str, object], own: str
) -> str:
    found = {
        str(g)
        for (g,) in store.query(
            f"SELECT DISTINCT toString({column}) FROM {table} WHERE {' AND '.join(where)}", params
        ).rows
    }
    if own in found or not found:
        return own
    return min(found, key=lambda g: _WIDTH_SQL.get(g, 10**9))


def staleness_note(store: Store, query: SeriesQuery) -> str | None:
    """A note when loss after the last completeness refresh cannot be bracketed."""
    last = last_refresh(store)
    if last is None:
        return (
            "delivery-loss: the completeness job has never run on this store"
            " (`holonograph completeness --refresh`); no loss can be bracketed"
        )
    last = to_store_time(last)
    if last < to_store_time(query.until):
        return (
            f"delivery-loss: completeness windows last refreshed {last:%Y-%m-%dT%H:%M:%SZ};"
            " loss after that is not bracketed"
        )
    return None


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
