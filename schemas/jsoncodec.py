"""JSON for store values crossing the admin endpoint: datetimes, dates, UUIDs,
decimals and bytes are tagged so rows come back with the types they left with."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from typing import Any

from schemas.times import from_store_time


def _tag(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"$dec": str(value)}
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        ((key, value),) = obj.items()
        if key == "$dt":
            return dt.datetime.fromisoformat(value)
        if key == "$date":
            return dt.date.fromisoformat(value)
        if key == "$uuid":
            return uuid.UUID(value)
        if key == "$dec":
            return decimal.Decimal(value)
        if key == "$b64":
            return base64.b64decode(value)
    return obj


def dumps(value: Any) -> str:
    return json.dumps(value, default=_tag, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    return json.loads(text, object_hook=_untag)


def plain(value: Any) -> Any:
    """A JSON-ready copy for people and dashboards: datetimes as RFC 3339 UTC strings."""
    if isinstance(value, dt.datetime):
        return from_store_time(value).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value
