"""Drift on the store in the regimes that broke it: serially correlated wander (alone and
on several surfaces of one alias), rollouts over days, and day buckets whose change
falls inside a day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from processors.drift.job import DriftRequest, run_drift
from schemas.analysis import DriftReport
from schemas.migrations import apply_migrations
from schemas.store import Store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1)
HOURS = 720
WANDER = [
    SurfaceSpec(f"wander-{i}", tau=0.05, rho=0.97, events=(100, 300), buckets=HOURS,
                alias="acme/wander")
    for i in range(4)
]  # fmt: skip
# Wander plus the daily cycle every surface behind the alias shares (the users' day).
CYCLED = [
    SurfaceSpec(f"cycled-{i}", tau=0.02, rho=0.97, seasonal=0.03, events=(100, 300),
                buckets=HOURS, alias="acme/cycled")
    for i in range(4)
]  # fmt: skip
SPECS = [
    *WANDER,
    *CYCLED,
    SurfaceSpec("rollout-days", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-1",
                changes=(Change(300, -0.07, ("substrate",), rollout=48),)),
    SurfaceSpec("rollout-week", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-2",
                changes=(Change(250, -0.08, ("lens",), rollout=168),)),
    # A prompt rolls out over two days while something unrecorded moves the rate.
    SurfaceSpec("rollout-innocent", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-4",
                changes=(Change(300, 0.0, ("substrate",), rollout=48),
                         Change(324, -0.08, ("silent",)))),
    # Changes at 14:00 on day 12 of a 30-day series read in day buckets.
    SurfaceSpec("afternoon", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-3",
                changes=(Change(12 * 24 + 14, -0.1, ("lens",)),)),
]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    from ingest.store.clickhouse import open_store

    path: Path = tmp_path_factory.mktemp("drift-regimes")
    store = open_store(f"chdb://{path}")
    apply_migrations(store)
    # The cycled group's draw is one on which corroboration that ignored the cycle read it
    # as a vendor change on three of the four surfaces.
    cells = [c for spec in SPECS for c in generate(spec, seed=12 if spec in CYCLED else 7)]
    write_cells(store, cells, ingested_at=dt.datetime(2026, 7, 1))
    yield store
    store.close()


def drift(store: Store, surface: str, bucket: str = "hour") -> DriftReport:
    request = DriftRequest(
        surface,
        START.replace(tzinfo=dt.UTC),
        (START + dt.timedelta(hours=HOURS)).replace(tzinfo=dt.UTC),
        bucket=bucket,
    )
    return run_drift(store, request)


@pytest.mark.parametrize("surface", [s.surface_id for s in WANDER])
def test_correlated_wander_without_change_says_nothing_confident(
    store: Store, surface: str
) -> None:
    report = drift(store, surface)
    confident = [p for p in report.change_points if p.confident and p.source != "noise"]
    assert confident == [], confident
    # Siblings on the same alias wander independently: never a silent vendor change.
    assert not [p for p in report.change_points if p.source == "light source"]
    noise = report.to_json()["dimensions"][0]["noiseModel"]
    assert noise["kind"] == "ar1" and noise["null"] == "simulated"
    assert noise["rho"] > 0.8 and 0.02 < noise["spread"] < 0.1


@pytest.mark.parametrize("bucket", ["hour", "day"])
@pytest.mark.parametrize("surface", [s.surface_id for s in CYCLED])
def test_a_shared_daily_cycle_is_not_a_vendor_change(
    store: Store, surface: str, bucket: str
) -> None:
    report = drift(store, surface, bucket)
    assert [p for p in report.change_points if p.confident and p.source != "noise"] == []
    for point in report.change_points:
        assert point.source != "light source", point
        assert point.corroboration is None or not point.corroboration.corroborated
    # Detection ran on the series less its daily cycle; a month of days is too short to
    # estimate a weekly one.
    cycle = report.to_json()["dimensions"][0]["cycle"]
    if bucket == "hour":
        assert cycle == {"periodBuckets": 24, "peakToTrough": pytest.approx(0.06, abs=0.02)}
    else:
        assert cycle is None


def test_rollout_over_two_days_is_labelled_with_its_layer(store: Store) -> None:
    report = drift(store, "rollout-days")
    (point,) = report.change_points
    assert point.source == "substrate" and point.confident, point
    (change,) = point.layer_changes
    assert change.column == "prompt_hash" and change.to_value == "ph_1"
    assert any(c.column == "prompt_hash" and c.ci_high < 0 for c in point.within_bucket_contrasts)
    start, end = START + dt.timedelta(hours=300), START + dt.timedelta(hours=348)
    assert point.window.from_.replace(tzinfo=None) <= end
    assert point.window.to.replace(tzinfo=None) >= start
    assert report.bracketed_windows == []


def test_rollout_over_a_week_is_labelled_with_its_layer(store: Store) -> None:
    report = drift(store, "rollout-week")
    assert report.change_points, report
    assert all(p.source == "lens" and p.confident for p in report.change_points)
    assert {c.to_value for p in report.change_points for c in p.layer_changes} == {"lv_1"}
    assert report.bracketed_windows == []


def test_rollout_refuted_within_buckets_stays_unattributed(store: Store) -> None:
    report = drift(store, "rollout-innocent")
    (point,) = report.change_points
    assert point.source == "substrate" and not point.confident, point
    (contrast,) = point.within_bucket_contrasts
    assert contrast.ci_low <= 0.0 <= contrast.ci_high
    assert [b.reason for b in report.bracketed_windows] == ["unattributed"]


def test_day_bucket_window_contains_an_afternoon_change(store: Store) -> None:
    truth = START + dt.timedelta(days=12, hours=14)
    report = drift(store, "afternoon", bucket="day")
    (point,) = report.change_points
    assert point.source == "lens" and point.confident
    assert point.window.from_.replace(tzinfo=None) <= truth < point.window.to.replace(tzinfo=None)
    hourly = drift(store, "afternoon")
    (point,) = hourly.change_points
    assert point.window.from_.replace(tzinfo=None) <= truth < point.window.to.replace(tzinfo=None)


def test_independent_noise_reports_the_permutation_null(store: Store) -> None:
    noise = drift(store, "afternoon").to_json()["dimensions"][0]["noiseModel"]
    assert noise == {
        "kind": "independent",
        "spread": pytest.approx(0.01, abs=0.01),
        "rho": 0.0,
        "longRunSd": pytest.approx(noise["spread"]),
        "null": "permutation",
    }
