"""What every lessons job shares: canonical JSON and its digest, store-precision times,
and the bounds of a window."""

from __future__ import annotations

import datetime as dt

from processors.jobs import JobError
from schemas.overrides import canonical, digest, short_id, to_millisecond

# The longest window a lessons read covers, so a mistyped year is refused, not scanned.
MAX_WINDOW = dt.timedelta(days=366)

__all__ = ["MAX_WINDOW", "canonical", "check_window", "digest", "short_id", "to_millisecond"]


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
