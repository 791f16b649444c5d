"""The time conventions every package shares: aware UTC in code, naive UTC in the store,
RFC 3339 UTC in text.

ClickHouse binds and returns `DateTime64` values as naive datetimes that mean UTC
(`schemas.store.QueryResult`); code holds aware UTC datetimes and converts at the
store's door with `to_store_time` / `from_store_time`. A naive datetime handed to
either is taken to be UTC already, never local time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

# What services and jobs are given instead of reading the wall clock themselves, so
# tests can set the time.
Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def to_store_time(value: dt.datetime) -> dt.datetime:
    """Naive UTC, the form the store binds and returns."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def from_store_time(value: dt.datetime) -> dt.datetime:
    """Aware UTC, from the store's naive UTC (or any aware time)."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    """`2026-07-01T09:00:00Z`: a moment in UTC to the second, for log lines and messages."""
    return from_store_time(moment).isoformat(timespec="seconds").replace("+00:00", "Z")
