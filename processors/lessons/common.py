"""What every lessons job shares: canonical JSON and its digest, store-precision times,
and the bounds of a window."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from processors.jobs import JobError

# The longest window a lessons read covers, so a mistyped year is refused, not scanned.
MAX_WINDOW = dt.timedelta(days=366)


def canonical(value: Any) -> str:
    """Key-sorted compact JSON: equal documents have equal text (and digest)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(value).encode()).hexdigest()


def short_id(prefix: str, value: Any, length: int = 24) -> str:
    """`prefix_<hex>`: an id that is a function of `value` (the same input, the same id)."""
    return f"{prefix}_{hashlib.sha256(canonical(value).encode()).hexdigest()[:length]}"


def to_millisecond(moment: dt.datetime) -> dt.datetime:
    """Aware UTC at the store's millisecond precision: an answer says what a read will."""
    moment = moment.astimezone(dt.UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def check_window(since: dt.datetime, until: dt.datetime) -> None:
    """Refuse an empty, inverted or over-long [since, until)."""
    if since >= until:
        raise JobError(
            f"empty window: since {since.isoformat()} is not before until {until.isoformat()}",
            "invalid_window",
        )
    if until - since > MAX_WINDOW:
        raise JobError(
            f"the window is longer than {MAX_WINDOW.days} days: narrow since/until",
            "invalid_window",
        )
