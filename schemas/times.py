"""The time conventions every package shares: aware UTC in code, naive UTC in the store,
RFC 3339 UTC in text.

Nothing here imports pydantic: the command group and light commands read times
without it. The request field type `UtcTime` is `schemas.utctime`'s.

ClickHouse binds and returns `DateTime64` values as naive datetimes that mean UTC
(`schemas.store.QueryResult`); code holds aware UTC datetimes and converts at the
store's door with `to_store_time` / `from_store_time`. A naive datetime handed to
either is taken to be UTC already, never local time.
"""

from __future__ import annotations

import datetime as dt
import re
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


_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_utc(text: str) -> dt.datetime:
    """An RFC 3339 time with its offset (`Z` or `+hh:mm`), or a bare date (the Guide's
    `2026-06-01`: midnight UTC), as aware UTC; `ValueError` names what is wrong. A time
    without an offset is refused: it would be read in some unknown zone."""
    value = text.strip()
    if _DATE_ONLY.match(value):
        try:
            return dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC)
        except ValueError:
            raise ValueError(f"{text!r} is not a date") from None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset (write it as ...Z)")
    return parsed.astimezone(dt.UTC)


_RELATIVE = re.compile(r"^(?:now\s*-\s*)?(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_moment(text: str, now: dt.datetime) -> dt.datetime:
    """A time as a person types it on a flag: `now`, a span before now (`24h`, `7d`,
    `90m`, `30s`, `2w`, or Grafana's `now-24h`), or what `parse_utc` takes. Relative
    spellings are `now` minus the span, so `--since 24h --until now` is the same window
    as the two absolute times those name."""
    value = text.strip().lower()
    if value == "now":
        return from_store_time(now)
    matched = _RELATIVE.match(value)
    if matched is None:
        try:
            return parse_utc(text)
        except ValueError as err:
            message = str(err)
            if message.endswith("is not an RFC 3339 time"):
                message += " (2026-06-01T00:00:00Z), a date, now, or a span before now (24h, 7d)"
            raise ValueError(message) from None
    amount, unit = float(matched.group(1)), matched.group(2)
    return from_store_time(now) - dt.timedelta(seconds=amount * _UNIT_SECONDS[unit])


# The validation context key under which a caller gives the request's "now" (the HTTP
# API: its clock, once per request); with it a request's time may also be relative.
NOW = "now"
