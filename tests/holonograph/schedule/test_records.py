"""The lease rule: of the claims on a fire time, the first inserted holds it."""

from __future__ import annotations

import datetime as dt

import pytest

from holonograph.schedule.records import claim, holder, last_claimed
from ingest.store.clickhouse import ClickHouseStore
from schemas.tables import SCHEDULE_CLAIMS

pytestmark = pytest.mark.clickhouse

FIRE = dt.datetime(2026, 7, 1, 9, 5, tzinfo=dt.UTC)


def test_two_claims_that_raced_agree_on_the_first_inserted(store: ClickHouseStore) -> None:
    # Both looked, saw no claim, and inserted; west's clock read earlier, but east's
    # insert came first: insert order decides, not the claimants' clocks.
    for claimant, at in (("east", FIRE), ("west", FIRE - dt.timedelta(seconds=5))):
        store.insert(
            SCHEDULE_CLAIMS.qualified,
            [["default", "nightly", FIRE, claimant, at]],
            SCHEDULE_CLAIMS.columns,
        )
    assert holder(store, "default", "nightly", FIRE) == "east"
    assert claim(store, "default", "nightly", FIRE, "west", FIRE) is False
    assert claim(store, "default", "nightly", FIRE, "east", FIRE) is True
    rows = store.query(f"SELECT count() FROM {SCHEDULE_CLAIMS.qualified}").scalar()
    assert rows == 2  # a fire time already claimed is not claimed again


def test_a_claim_is_per_tenant_schedule_and_fire_time(store: ClickHouseStore) -> None:
    assert holder(store, "default", "nightly", FIRE) is None
    assert last_claimed(store, "default", "nightly") is None
    assert claim(store, "default", "nightly", FIRE, "east", FIRE) is True
    later = FIRE + dt.timedelta(days=1)
    assert claim(store, "default", "nightly", later, "west", later) is True
    assert claim(store, "acme", "nightly", FIRE, "west", FIRE) is True
    assert claim(store, "default", "hourly", FIRE, "west", FIRE) is True
    assert last_claimed(store, "default", "nightly") == later
    assert last_claimed(store, "acme", "nightly") == FIRE
