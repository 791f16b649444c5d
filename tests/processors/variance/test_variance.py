"""Variance isolation: the estimator against hand cases, coverage, and the store jobs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import stats

from bench.variance_coverage import clustered, coverage, fast
from processors.variance.decompose import (
    DecomposeRequest,
    decompose,
    decompose_buckets,
    fetch_clustered,
    from_sums,
    generalised_q,
    load_reading,
    paule_mandel,
    persist_reading,
    unclustered,
)
from processors.variance.verdict import LifecycleError, evaluate, lifecycle, persist_evaluation
from schemas.analysis import VarianceReading
from schemas.store import Store
from schemas.tables import COMPLETENESS_WINDOWS
from testkit.backends import fresh_store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 7, 2, tzinfo=dt.UTC)


def test_paule_mandel_hand_case() -> None:
    # Two buckets 0.1 and 0.3 with v = 0.01: Q(0) = 0.02 / 0.01 = 2 > 1 dof;
    # Q(t) = 0.02 / (0.01 + t) = 1 gives t = 0.01; the Q-profile bounds solve
    # Q = chi2(1) quantiles: lower 0 (Q(0) < 5.02), upper 0.02 / chi2_0.025 - 0.01.
    x, v = np.array([0.1, 0.3]), np.array([0.01, 0.01])
    assert generalised_q(x, v, 0.0) == pytest.approx(2.0)
    d = paule_mandel(x, v)
    assert d.tau2 == pytest.approx(0.01, rel=1e-9)
    assert d.ci[0] == 0.0
    assert d.ci[1] == pytest.approx(0.02 / stats.chi2.ppf(0.025, 1) - 0.01, rel=1e-6)
    assert d.mean == pytest.approx(0.2) and d.observed == pytest.approx(0.02)


def test_no_excess_spread_means_zero_real_variance() -> None:
    # x = 0.5, 0.55, 0.45, 0.5 with v = 0.01: Q(t) = 0.005 / (0.01 + t), Q(0) = 0.5 < 3 dof
    # -> tau^2 = 0; the upper bound solves Q = chi2_3(0.025).
    x = np.array([0.5, 0.5 + 0.05, 0.5 - 0.05, 0.5])
    d = paule_mandel(x, np.full(4, 0.01))
    assert generalised_q(x, np.full(4, 0.01), 0.0) == pytest.approx(0.5)
    assert d.tau2 == 0.0 and d.ci[0] == 0.0
    assert d.ci[1] == pytest.approx(0.005 / stats.chi2.ppf(0.025, 3) - 0.01, rel=1e-6)


def test_spread_below_every_quantile_gives_the_point_interval_at_zero() -> None:
    d = paule_mandel(np.array([0.5, 0.51, 0.49, 0.5]), np.full(4, 0.01))
    assert d.tau2 == 0.0 and d.ci == (0.0, 0.0)


def test_interval_keeps_nominal_coverage() -> None:
    rng = np.random.default_rng(8)
    tau = 0.02
    covered = 0
    for _ in range(300):
        n = rng.integers(50, 501, 96).astype(float)
        p = 0.8 + tau * rng.standard_normal(96)
        x = rng.binomial(n.astype(int), p) / n
        unit = np.sum(n * x * (1 - x)) / np.sum(n - 1)
        lo, hi = paule_mandel(x, unit / n).ci
        covered += lo <= tau**2 <= hi
    assert 0.92 <= covered / 300 <= 0.98


@pytest.mark.parametrize("tau", [0.0, 0.015, 0.03])
def test_coverage_on_scenario_noise_is_inside_the_band(tau: float) -> None:
    # 1000 pure-noise months of the scenario model per tau (standard error ~0.007),
    # judged against the generator's tau^2: the target band is 0.92-0.98.
    cell = coverage(fast, tau, series=1000, buckets=720, seed=5)
    assert 0.92 <= cell["coverage"] <= 0.98
    assert cell["mean_design_effect"] == 1.0


def test_coverage_holds_with_clustered_events_and_needs_the_design_effect() -> None:
    # Sessions sharing a correlation id (design effect ~1.75): with it the interval keeps
    # its coverage; scoring the same series with design effect 1 collapses it.
    cell = coverage(clustered(0.5), 0.015, series=300, buckets=240, seed=6)
    assert 1.6 <= cell["mean_design_effect"] <= 1.9
    assert 0.92 <= cell["coverage"] <= 0.98
    rng, hits = np.random.default_rng(6), 0
    for _ in range(100):
        data = clustered(0.5)(rng, 0.015, 240)
        low, high = paule_mandel(data.x, data.sampling_variance(1.0)).ci
        hits += low <= 0.015**2 <= high
    assert hits / 100 < 0.5


def test_cluster_residuals_are_corrected_for_leverage() -> None:
    # One bucket, clusters (m=1, k=1) and (m=3, k=0): x = 1/4, residuals about the mean
    # (1 - 1/4)^2 + (0 - 3/4)^2 = 1.125, leverage sum(m^2)/n^2 = 10/16 -> 1.125 / 0.375.
    one = np.array([1.0])
    data = from_sums([], 4 * one, one, one, one, one * 1.0, 10 * one, 2 * one)
    assert data.cluster_ss.tolist() == pytest.approx([3.0])
    assert data.within_ss.tolist() == pytest.approx([4 * 0.25 * 0.75])
    # Every event its own cluster: the leverage correction is n / (n - 1), design effect 1.
    n, y = np.array([10.0, 20.0]), np.array([7.0, 15.0])
    plain = unclustered(n, y, y)
    assert plain.cluster_ss == pytest.approx(plain.within_ss * n / (n - 1))
    assert plain.design_effect() == pytest.approx(1.0)
    d = decompose_buckets(plain)
    assert d is not None and d.tau2 == paule_mandel(plain.x, plain.sampling_variance()).tau2
    assert decompose_buckets(unclustered(n[:1], y[:1], y[:1])) is None


SPECS = [
    SurfaceSpec("steady", tau=0.03, buckets=240, events=(100, 300)),
    SurfaceSpec("lens-shift", tau=0.01, buckets=240, events=(100, 300),
                changes=(Change(120, -0.1, ("lens",)),)),
    SurfaceSpec("lens-then-silent", tau=0.01, buckets=240, events=(100, 300),
                changes=(Change(80, -0.05, ("lens",)), Change(160, -0.1, ("silent",)))),
    SurfaceSpec("lens-flat", tau=0.01, buckets=240, events=(100, 300),
                changes=(Change(120, 0.0, ("lens",)),)),
    SurfaceSpec("lossy", tau=0.01, buckets=240, events=(100, 300), loss=((60, 90, 0.6),)),
    SurfaceSpec("scored", tau=0.02, buckets=240, events=(100, 300), scored=True),
]  # fmt: skip


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_server: str | None
) -> Iterator[Store]:
    store = fresh_store(tmp_path_factory.mktemp("variance-store"), clickhouse_server)
    write_cells(store, [c for s in SPECS for c in generate(s, seed=9)], dt.datetime(2026, 7, 1))
    # Clustered traffic: 4 events per correlation id share one outcome.
    rng = np.random.default_rng(1)
    rows = []
    base = START.replace(tzinfo=None)
    for h in range(48):
        for c in range(50):
            passed = bool(rng.random() < 0.8)
            for j in range(4):
                rows.append([f"cl-{h}-{c}-{j}", "correctness", passed, "clustered", f"corr-{h}-{c}",
                             "production", "production-state",
                             base + dt.timedelta(hours=h, minutes=c)])  # fmt: skip
    store.insert(
        "holonograph.evaluation_dimensions", rows,
        ["event_id", "dimension_id", "passed", "surface_id", "correlation_id", "run_mode",
         "provenance", "timestamp"],
    )  # fmt: skip
    yield store
    store.close()


def read(store: Store, surface: str, hours: int = 240) -> VarianceReading:
    request = DecomposeRequest(surface, "correctness", START, START + dt.timedelta(hours=hours))
    reading = decompose(store, request, NOW)
    persist_reading(store, reading)
    return reading


def test_design_effect_of_perfectly_correlated_clusters_is_the_cluster_size(store: Store) -> None:
    request = DecomposeRequest("clustered", "correctness", START, START + dt.timedelta(hours=48))
    data = fetch_clustered(store, request.query(), True)
    assert data.n.tolist() == [200.0] * 48 and data.clusters.tolist() == [50.0] * 48
    assert data.design_effect() == pytest.approx(4.0, rel=0.05)
    reading = read(store, "clustered", 48)
    # Clusters explain the spread: without them tau^2 would be ~3x the binomial noise.
    assert reading.cleaned_variance_ci is not None and reading.cleaned_variance_ci.ci_low == 0.0


def test_decompose_recovers_real_variance_and_stores_the_reading(store: Store) -> None:
    reading = read(store, "steady")
    assert reading.buckets == 240 and reading.outcome == "passed"
    ci = reading.cleaned_variance_ci
    assert ci is not None and ci.ci_low <= 0.03**2 <= ci.ci_high
    assert reading.noise_variance is not None and reading.observed_variance is not None
    assert reading.observed_variance == pytest.approx(
        reading.noise_variance + (reading.cleaned_variance or 0.0), rel=0.25
    )
    assert 0.0 < (reading.noise_share or 0.0) < 1.0
    assert load_reading(store, reading.event_id) == reading


def test_scored_dimension_matches_a_decomposition_by_hand(store: Store) -> None:
    # score = 3 + 2 * passed: the reading must equal the pass-rate decomposition of the
    # generated cells, with every variance scaled by 4.
    reading = read(store, "scored")
    n, k = np.zeros(240), np.zeros(240)
    for cell in generate(next(s for s in SPECS if s.surface_id == "scored"), seed=9):
        t = int((cell.bucket_start - START.replace(tzinfo=None)) / dt.timedelta(hours=1))
        n[t] += cell.delivered
        k[t] += cell.passes
    x = k / n
    hand = paule_mandel(x, np.sum(n * x * (1 - x)) / np.sum(n - 1) / n)
    assert reading.outcome == "score"
    assert reading.mean == pytest.approx(3 + 2 * hand.mean)
    assert reading.cleaned_variance == pytest.approx(4 * hand.tau2)
    ci = reading.cleaned_variance_ci
    assert ci is not None
    assert (ci.ci_low, ci.ci_high) == pytest.approx((4 * hand.ci[0], 4 * hand.ci[1]))
    assert reading.noise_variance == pytest.approx(4 * hand.noise)


def test_verdicts_in_order(store: Store) -> None:
    short = evaluate(store, read(store, "steady", 6), NOW)
    assert short.verdict == "insufficient-data" and "widen the window" in short.guidance[0]

    steady = evaluate(store, read(store, "steady"), NOW)
    assert steady.verdict == "viable", steady
    assert steady.checks["lossWindows"] == 0 and steady.checks["completeness"] == 1.0

    shifted = evaluate(store, read(store, "lens-then-silent"), NOW)
    assert shifted.verdict == "confounded"
    assert shifted.checks["varyingLayers"] == ["lens_version"] and shifted.checks["changePoints"]
    assert any("narrower window" in g for g in shifted.guidance)
    assert [s.viable for s in shifted.strata] == [True, False]

    # The lens switch explains the shift completely: each lens is viable on its own.
    split = evaluate(store, read(store, "lens-shift"), NOW)
    assert split.verdict == "viable" and len(split.strata) == 2
    means = sorted(s.mean or 0.0 for s in split.strata)
    assert means[1] - means[0] == pytest.approx(0.1, abs=0.01)

    flat = evaluate(store, read(store, "lens-flat"), NOW)
    assert flat.verdict == "viable" and len(flat.strata) == 2
    assert all(s.viable for s in flat.strata)
    assert {s.layers["lens_version"] for s in flat.strata} == {"lv_0", "lv_1"}


def test_delivery_bias_found_by_the_completeness_job(store: Store) -> None:
    # "lossy" drops 60 % of its failed events in hours 60-90: gaps in the ordinals, which
    # the completeness job turns into biased windows, and a higher pass rate there.
    from processors.completeness.job import recompute_completeness

    recompute_completeness(store, NOW)
    try:
        reading = read(store, "lossy")
        evaluation = evaluate(store, reading, NOW)
        persist_evaluation(store, evaluation, reading)
        steady = evaluate(store, read(store, "steady"), NOW)
    finally:
        for table in ("completeness_windows", "stream_status", "completeness_refreshes"):
            store.command(f"TRUNCATE TABLE holonograph.{table}")
    assert evaluation.verdict == "delivery-biased", evaluation
    assert any("outcome differs" in r for r in evaluation.reasons)
    assert any("leaves out the delivery-loss windows" in g for g in evaluation.guidance)
    assert steady.verdict == "viable" and steady.checks["lossWindows"] == 0
    stored = store.query(
        "SELECT verdict, target_event_id FROM holonograph.analysis_events FINAL"
        " WHERE event_id = {id:String}",
        {"id": evaluation.event_id},
    ).rows
    assert stored == [("delivery-biased", reading.event_id)]


def test_completeness_table_missing_or_read_by_its_migration(store: Store) -> None:
    store.command(
        "RENAME TABLE holonograph.completeness_windows TO holonograph.completeness_windows_off"
    )
    try:
        missing = evaluate(store, read(store, "steady"), NOW)
    finally:
        store.command(
            "RENAME TABLE holonograph.completeness_windows_off TO holonograph.completeness_windows"
        )
    base = START.replace(tzinfo=None)
    rows = [
        ["hour", "surface", base + dt.timedelta(hours=h), "steady", 250, 150, True]
        for h in range(240)
    ]
    columns = COMPLETENESS_WINDOWS.pick(
        "bucket", "scope", "bucket_start", "surface_id", "offered", "delivered", "bias_flag"
    )
    store.insert(COMPLETENESS_WINDOWS.qualified, rows, columns)
    try:
        minimal = evaluate(store, read(store, "steady"), NOW)
    finally:
        store.command(f"TRUNCATE TABLE {COMPLETENESS_WINDOWS.qualified}")
    assert missing.verdict == "viable" and "not checked" in str(missing.checks["delivery"])
    assert minimal.verdict == "delivery-biased"
    assert minimal.reasons[0].startswith("completeness 0.")


def test_lifecycle_rules(store: Store) -> None:
    first, second = read(store, "steady").event_id, read(store, "steady").event_id
    locked = lifecycle(store, first, "lock", "brian", NOW, pinned_label="q3-baseline")
    assert locked.target_event_id == first and locked.status == "lock"
    with pytest.raises(LifecycleError, match="pinnedLabel"):
        lifecycle(store, first, "pin", "brian", NOW)
    with pytest.raises(LifecycleError, match="supersededBy"):
        lifecycle(store, first, "supersede", "brian", NOW)
    with pytest.raises(LifecycleError, match="not another reading"):
        lifecycle(store, first, "supersede", "brian", NOW, superseded_by="evt_nope")
    with pytest.raises(LifecycleError, match="no variance reading"):
        lifecycle(store, "evt_nope", "lock", "brian", NOW)
    done = lifecycle(store, first, "supersede", "brian", NOW + dt.timedelta(seconds=1),
                     superseded_by=second)  # fmt: skip
    assert done.superseded_by == second
    with pytest.raises(LifecycleError, match="already superseded"):
        lifecycle(store, first, "lock", "brian", NOW + dt.timedelta(seconds=2))
