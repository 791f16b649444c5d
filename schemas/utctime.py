"""The request field type for a moment: RFC 3339 in, aware UTC held, RFC 3339 UTC out.

Apart from `schemas.times` because it needs pydantic, which the command group and the
light commands never import.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo, WithJsonSchema

from schemas.times import NOW, parse_moment, parse_utc


def _utc(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        now = info.context.get(NOW) if isinstance(info.context, dict) else None
        return parse_moment(value, now) if isinstance(now, dt.datetime) else parse_utc(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError("a time needs its UTC offset")
        return value.astimezone(dt.UTC)
    return value


# A request's time: RFC 3339 with an offset or a bare date (with a `NOW` context also
# `now` or `24h`), held as aware UTC, written back as RFC 3339 UTC (`...Z`).
UtcTime = Annotated[
    dt.datetime,
    BeforeValidator(_utc),
    PlainSerializer(lambda moment: moment.isoformat().replace("+00:00", "Z"), return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "description": "RFC 3339 with an offset (2026-06-01T00:00:00Z), a date"
            " (2026-06-01: midnight UTC), now, or a span before now (24h, 7d)",
            "anyOf": [{"format": "date-time"}, {"format": "date"}],
        }
    ),
]
