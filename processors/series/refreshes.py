"""When the completeness job last rewrote its windows (`holonograph.completeness_refreshes`).

The completeness job writes the record and reads it for its own report's age; the
readings that weigh delivery loss (`series.delivery`) read it too. It lives here, among
what the jobs share, so that no shared module imports a job (tests/test_architecture.py),
and imports nothing heavy so that `completeness --help` stays light.
"""

from __future__ import annotations

import datetime as dt

from schemas.migrations import table_exists
from schemas.store import Store
from schemas.tables import COMPLETENESS_REFRESHES
from schemas.times import from_store_time


def last_refresh(store: Store) -> dt.datetime | None:
    """The last refresh's time (None: never, or the table is not in the store)."""
    if not table_exists(store, COMPLETENESS_REFRESHES):
        return None
    value = store.query(f"SELECT max(now), count() FROM {COMPLETENESS_REFRESHES.qualified}").rows[0]
    return value[0] if value[1] else None


def last_refresh_began(store: Store) -> dt.datetime | None:
    """When the latest refresh began, on the wall clock that stamps arrivals
    (`ingested_at`): everything that arrived before it is in the windows it wrote."""
    if not table_exists(store, COMPLETENESS_REFRESHES):
        return None
    began, runs = store.query(
        "SELECT max(computed_at - toIntervalMillisecond(toInt64(duration_ms))), count()"
        f" FROM {COMPLETENESS_REFRESHES.qualified}"
    ).rows[0]
    return from_store_time(began) if runs else None
