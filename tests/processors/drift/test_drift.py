"""Drift attribution on the store, over scenarios whose truth is known."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from processors.drift.job import DriftRequest, persist_drift, run_drift
from schemas.analysis import DriftReport
from schemas.store import Store
from schemas.tables import COMPLETENESS_WINDOWS
from testkit.backends import fresh_store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1)
HOURS = 240
SPECS = [
    SurfaceSpec("lens-surface", tau=0.015, events=(100, 300), buckets=HOURS,
                changes=(Change(120, -0.08, ("lens",)),)),
    SurfaceSpec("both-surface", tau=0.015, events=(100, 300), buckets=HOURS, alias="solo-1",
                changes=(Change(100, -0.08, ("lens", "light source")),)),
    SurfaceSpec("mix-surface", tau=0.0, events=(100, 300), buckets=HOURS, alias="solo-2",
                changes=(Change(140, -0.06, ("cohort-mix",)),)),
    SurfaceSpec("rollout-surface", tau=0.0, events=(150, 300), buckets=HOURS, alias="solo-3",
                changes=(Change(100, -0.08, ("substrate",), rollout=8),
                         Change(100, 0.0, ("light source",), rollout=8))),
    *[
        SurfaceSpec(f"vendor-{i}", tau=0.01, events=(100, 300), buckets=HOURS, alias="acme/pro",
                    changes=(Change(160, -0.07, ("silent",)),))
        for i in range(3)
    ],
    SurfaceSpec("lonely-surface", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-4",
                changes=(Change(160, -0.07, ("silent",)),)),
    SurfaceSpec("noise-surface", tau=0.03, events=(50, 300), buckets=HOURS, alias="solo-5"),
    SurfaceSpec("lossy-surface", tau=0.0, events=(100, 300), buckets=HOURS, alias="solo-7",
                loss=((60, 66, 0.6),)),
    SurfaceSpec("scored-surface", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo-6",
                scored=True, changes=(Change(120, -0.1, ("lens",), rollout=6),
                                      Change(120, 0.0, ("substrate",), rollout=6))),
]  # fmt: skip


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_server: str | None
) -> Iterator[Store]:
    path: Path = tmp_path_factory.mktemp("drift-store")
    store = fresh_store(path, clickhouse_server)
    cells = [c for spec in SPECS for c in generate(spec, seed=42)]
    write_cells(store, cells, ingested_at=dt.datetime(2026, 7, 1))
    yield store
    store.close()


def drift(store: Store, surface: str, **kw: object) -> DriftReport:
    request = DriftRequest(
        surface,
        START.replace(tzinfo=dt.UTC),
        (START + dt.timedelta(hours=HOURS)).replace(tzinfo=dt.UTC),
        **kw,
    )  # type: ignore[arg-type]
    return run_drift(store, request)


def only_point(report: DriftReport, at: int) -> dict[str, object]:
    assert len(report.change_points) == 1, report.change_points
    point = report.change_points[0]
    truth = START + dt.timedelta(hours=at)
    hours_off = (point.timestamp.replace(tzinfo=None) - truth) / dt.timedelta(hours=1)
    in_window = (
        point.window.from_.replace(tzinfo=None) <= truth < point.window.to.replace(tzinfo=None)
    )
    assert abs(hours_off) <= 3 or in_window
    assert point.window.from_ <= point.timestamp < point.window.to
    return point.to_json()


def test_lens_change_is_labelled_lens_with_evidence(store: Store) -> None:
    report = drift(store, "lens-surface")
    point = only_point(report, 120)
    assert point["source"] == "lens" and point["confident"] is True
    (change,) = point["layerChanges"]  # type: ignore[misc]
    assert change["column"] == "lens_version"
    assert change["before"] == {"lv_0": 1.0} and change["after"] == {"lv_1": 1.0}
    effect = point["effect"]
    assert effect["ciLow"] < -0.08 < effect["ciHigh"]  # type: ignore[index]
    assert report.bracketed_windows == []
    assert report.event_count == sum(c.delivered for c in generate(SPECS[0], seed=42))


def test_simultaneous_layer_changes_are_bracketed_as_confounded(store: Store) -> None:
    report = drift(store, "both-surface")
    point = only_point(report, 100)
    assert point["confident"] is False
    assert {c["layer"] for c in point["layerChanges"]} == {"lens", "light source"}  # type: ignore[union-attr]
    (bracket,) = report.bracketed_windows
    assert bracket.reason == "confounded"
    assert bracket.from_ <= report.change_points[0].timestamp < bracket.to


def test_cohort_mix_shift_is_bracketed(store: Store) -> None:
    report = drift(store, "mix-surface")
    point = only_point(report, 140)
    assert point["confident"] is False and point["layerChanges"] == []
    mix = point["cohortMix"]
    assert abs(mix["deltaFromMix"] + 0.06) < 0.02  # type: ignore[index]
    assert [b.reason for b in report.bracketed_windows] == ["cohort-mix"]


def test_overlapping_rollout_separates_the_layer_that_moved(store: Store) -> None:
    report = drift(store, "rollout-surface")
    sources = {p.source for p in report.change_points}
    assert sources == {"substrate"}, report.change_points
    contrasts = report.change_points[0].within_bucket_contrasts
    by_column = {c.column: c for c in contrasts}
    assert by_column["prompt_hash"].ci_high < 0
    assert by_column["light_source_id"].ci_low < 0 < by_column["light_source_id"].ci_high
    assert all(p.confident for p in report.change_points)


def test_silent_vendor_change_is_corroborated_across_the_alias(store: Store) -> None:
    report = drift(store, "vendor-0")
    point = only_point(report, 160)
    assert point["source"] == "light source" and point["confident"] is True
    corroboration = point["corroboration"]
    assert corroboration["alias"] == "acme/pro"  # type: ignore[index]
    assert set(corroboration["corroboratingSurfaces"]) == {"vendor-1", "vendor-2"}  # type: ignore[index]


def test_shift_without_recorded_change_or_corroboration_is_unattributed(store: Store) -> None:
    report = drift(store, "lonely-surface")
    point = only_point(report, 160)
    assert point["confident"] is False
    assert [b.reason for b in report.bracketed_windows] == ["unattributed"]


def test_pure_noise_has_no_change_points(store: Store) -> None:
    report = drift(store, "noise-surface")
    assert report.change_points == []
    assert report.dimensions[0].overdispersion_tau == pytest.approx(0.03, abs=0.01)


def test_practical_threshold_turns_small_shifts_into_noise(store: Store) -> None:
    report = drift(store, "lens-surface", delta_threshold=0.2)
    assert [p.source for p in report.change_points] == ["noise"]


@contextlib.contextmanager
def completeness_table_hidden(store: Store) -> Iterator[None]:
    """The store as it was before the completeness job's migration (0002)."""
    store.command(
        "RENAME TABLE holonograph.completeness_windows TO holonograph.completeness_windows_off"
    )
    try:
        yield
    finally:
        store.command(
            "RENAME TABLE holonograph.completeness_windows_off TO holonograph.completeness_windows"
        )


def test_filters_sparse_buckets_and_missing_completeness_table(store: Store) -> None:
    with completeness_table_hidden(store):
        report = drift(store, "lens-surface", run_modes=("test",))
    assert report.event_count == 0 and report.change_points == []
    assert any("completeness_windows" in n for n in report.notes)
    report = drift(store, "lens-surface", sparse_min_events=120)
    assert report.bracketed_windows and {b.reason for b in report.bracketed_windows} == {"sparse"}
    assert [n for n in report.notes if n.startswith("stale: the completeness windows were never")]
    assert report.freshness is not None and report.freshness.stale
    assert report.freshness.refreshed_at is None and report.freshness.newest_arrival is not None


COMPLETENESS_COLUMNS = COMPLETENESS_WINDOWS.pick(
    "bucket", "scope", "surface_id", "emission_stream", "bucket_start", "offered", "delivered",
    "missing", "completeness_lower_bound", "bias_flag", "version",
)  # fmt: skip


def test_delivery_loss_windows_come_from_completeness_windows(store: Store) -> None:
    hour = dt.timedelta(hours=1)
    rows = [["hour", "surface", "lens-surface", "", START + h * hour, 100, 90, 10, 0.9, True, 1]
            for h in (30, 31, 50)]  # fmt: skip
    rows += [
        ["hour", "surface", "lens-surface", "", START + 60 * hour, 100, 100, 0, 1.0, False, 1],
        ["day", "surface", "lens-surface", "", START, 2000, 1970, 30, 0.985, True, 1],
        ["hour", "stream", "", "s-1", START + 70 * hour, 100, 90, 10, 0.9, True, 1],
        ["hour", "surface", "other", "", START + 80 * hour, 100, 90, 10, 0.9, True, 1],
    ]
    store.insert(COMPLETENESS_WINDOWS.qualified, rows, COMPLETENESS_COLUMNS)
    try:
        report = drift(store, "lens-surface")
        daily = drift(store, "lens-surface", bucket="day")
    finally:
        store.command("TRUNCATE TABLE holonograph.completeness_windows")
    loss = [b for b in report.bracketed_windows if b.reason == "delivery-loss"]
    assert [(b.from_.replace(tzinfo=None), b.to.replace(tzinfo=None)) for b in loss] == [
        (START + dt.timedelta(hours=30), START + dt.timedelta(hours=32)),
        (START + dt.timedelta(hours=50), START + dt.timedelta(hours=51)),
    ]
    loss = [b for b in daily.bracketed_windows if b.reason == "delivery-loss"]
    assert [(b.from_.replace(tzinfo=None), b.to.replace(tzinfo=None)) for b in loss] == [
        (START, START + dt.timedelta(days=1))
    ]


def test_delivery_loss_found_by_the_completeness_job(store: Store) -> None:
    # Failed events dropped in hours 60-66 leave gaps in the emission ordinals; the
    # completeness job flags those hours and drift brackets them.
    from processors.completeness.job import recompute_completeness

    recompute_completeness(store, dt.datetime(2026, 7, 2, tzinfo=dt.UTC))
    try:
        report = drift(store, "lossy-surface")
        clean = drift(store, "lens-surface")
    finally:
        for table in ("completeness_windows", "stream_status", "completeness_refreshes"):
            store.command(f"TRUNCATE TABLE holonograph.{table}")
    assert not report.notes  # refreshed after the window ended
    loss = [b for b in report.bracketed_windows if b.reason == "delivery-loss"]
    assert loss, report.bracketed_windows
    hours = {(b.from_.replace(tzinfo=None) - START) // dt.timedelta(hours=1) for b in loss}
    assert min(hours) >= 60 and max(hours) < 67
    assert not [b for b in clean.bracketed_windows if b.reason == "delivery-loss"]
    # The selective loss lifts the pass rate inside the window; whatever the detector
    # finds there sits inside a delivery-loss bracket.
    for point in report.change_points:
        at = point.timestamp.replace(tzinfo=None)
        assert any(b.from_.replace(tzinfo=None) <= at <= b.to.replace(tzinfo=None) for b in loss)


def test_run_is_persisted_with_its_parameters(store: Store) -> None:
    report = drift(store, "both-surface", delta_threshold=0.01)
    persist_drift(store, report, lambda: dt.datetime(2026, 7, 2, tzinfo=dt.UTC))
    rows = store.query(
        "SELECT kind, source, reason, confident, delta_threshold, bucket, provenances"
        " FROM holonograph.drift_change_points FINAL WHERE run_id = {r:String} ORDER BY kind",
        {"r": report.run_id},
    ).rows
    assert rows == [
        ("change_point", report.change_points[0].source, report.change_points[0].reason, False,
         0.01, "hour", ["production-state"]),
        ("bracketed_window", "", "confounded", False, 0.01, "hour", ["production-state"]),
    ]  # fmt: skip
    payload = store.query(
        "SELECT payload FROM holonograph.analysis_events FINAL WHERE event_id = {r:String}",
        {"r": report.run_id},
    ).scalar()
    assert json.loads(payload)["surfaceId"] == "both-surface"


def test_scored_dimension_uses_score_sums(store: Store) -> None:
    report = drift(store, "scored-surface")
    assert report.dimensions[0].outcome == "score"
    (point,) = report.change_points
    assert point.source == "lens" and point.confident
    assert point.effect.delta == pytest.approx(-0.2, abs=0.03)  # score = 3 + 2 * passed
    lens = next(c for c in point.within_bucket_contrasts if c.column == "lens_version")
    assert lens.ci_low < -0.2 < lens.ci_high < 0


def test_same_bucket_contrast_hand_case() -> None:
    import numpy as np

    from processors.drift.evidence import Context, contrast
    from processors.series.cells import Cell, build_series
    from schemas.analysis import LayerChange

    def cell(lens: str, n: float, y: float) -> Cell:
        return Cell(START, lens, "m", "", (), "production", (), n, y, y)

    series = build_series([START], [cell("new", 100, 60), cell("old", 100, 80)], True)
    ctx = Context(series, 0, 0, 0, (0, 0), (0, 1))
    change = LayerChange(layer="lens", column="lens_version", from_value="old", to_value="new",
                         before={"old": 1.0}, after={"new": 1.0})  # fmt: skip
    result = contrast(ctx, change, [])
    assert result is not None
    # One stratum: risk difference 0.6 - 0.8; variance p(1-p)(1/n1 + 1/n0) at p = 0.7.
    assert result.delta == pytest.approx(-0.2)
    se = np.sqrt(0.7 * 0.3 * (1 / 100 + 1 / 100))
    assert result.z == pytest.approx(-0.2 / se)
    assert (result.ci_low, result.ci_high) == pytest.approx((-0.2 - 1.96 * se, -0.2 + 1.96 * se))
    assert result.overlap_events == 100 and result.strata == 1
    assert contrast(ctx, change, [], min_overlap=101) is None
