"""What the store's columns can hold (`schemas/clickhouse/*.sql`), checked at the door.

A value outside a column's domain must be a rejected span with a precise reason
before the client is answered, never an insert that fails (or, worse, a value the
store silently wraps): a failed insert would fail every request sharing its group
commit and stall a Kafka sink on every retry. The limits, as `schemas/WIRE.md`
states them:

- times: `DateTime64(9, 'UTC')` holds 1900-01-01T00:00:00Z to
  2262-04-11T23:47:16.854775807Z (signed 64-bit nanoseconds; ClickHouse's lower
  bound is 1900); Python datetimes carry microseconds, so the last one is .854775;
- integers: every OTLP int is 64-bit signed, which fits the `Int64` columns; the
  `UInt64` ones (`emission_seq`, `sentinel_interval_ms`) also need it to be >= 0;
- doubles: one policy for NaN and ±Infinity anywhere a span's value is stored
  (`latency_ms`, `cost_usd`, dimension scores, and inside extras and resource
  attributes): the span is rejected. JSON has no such numbers, so the two paths
  could not store them alike, and no analysis has a meaning for them;
- nesting: open-ended values (extras, resource attributes) are stored as JSON up to
  `MAX_NESTING` levels of arrays and kvlists; deeper, the span is rejected.

Strings and arrays have no limit of the store's below the request limit
(`--max-request-bytes`), so they are bounded there (and by the message limit on the
Kafka path).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

TIME_MIN = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
TIME_MAX = dt.datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=dt.UTC)
TIME_RANGE = "1900-01-01T00:00:00Z to 2262-04-11T23:47:16.854775Z"
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
MAX_NESTING = 16


def time_problem(value: dt.datetime) -> str | None:
    """Why the store cannot hold `value` (an aware datetime), or None."""
    if TIME_MIN <= value <= TIME_MAX:
        return None
    return f"{_rfc3339(value)} is outside the times the store holds ({TIME_RANGE})"


def nanos_problem(nanos: int) -> str | None:
    """Why the store cannot hold unix nanoseconds `nanos` (a uint64 OTLP time), or None."""
    if nanos <= INT64_MAX:
        return None
    return f"after the last time the store holds (2262-04-11T23:47:16.854775807Z), got {nanos}"


def float_problem(value: float) -> str | None:
    if math.isfinite(value):
        return None
    return f"{float_name(value)} is not a finite number"


def float_name(value: float) -> str:
    """NaN, Infinity, -Infinity: the spellings of OTLP/JSON (and JavaScript)."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why an open-ended value (already JSON-safe) cannot be stored as JSON, or None:
    a non-finite double anywhere in it, or nesting deeper than `MAX_NESTING`."""
    if isinstance(value, float):
        return float_problem(value)
    if isinstance(value, (list, dict)):
        if depth >= MAX_NESTING:
            return f"nested deeper than {MAX_NESTING} levels of arrays and kvlists"
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            problem = json_problem(item, depth + 1)
            if problem is not None:
                return problem
    return None


def attributes_problem(attrs: dict[str, Any]) -> str | None:
    """The first attribute of an open-ended map the store cannot hold, as
    `<key>: <problem>`, or None."""
    for key, value in attrs.items():
        if isinstance(value, (float, list, dict)):
            problem = json_problem(value)
            if problem is not None:
                return f"{key}: {problem}"
    return None


def _rfc3339(value: dt.datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")
