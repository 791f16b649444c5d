"""The change-point statistics against hand-computed cases and their calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from processors.series import changepoint as cp


def test_binomial_gain_matches_hand_computation() -> None:
    # ℓ(k, n) = k ln(k/n) + (n-k) ln(1-k/n); split [2/10 | 8/10] vs pooled 10/20.
    left = 2 * math.log(0.2) + 8 * math.log(0.8)
    pooled = 20 * math.log(0.5)
    expected = 2 * (2 * left - pooled)
    g = cp.gain_curve(np.array([2.0, 8.0]), np.array([10.0, 10.0]), True, 1)
    assert g[0] == -np.inf
    assert g[1] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(7.7098, abs=1e-3)


def test_gaussian_gain_is_the_between_segment_sum_of_squares() -> None:
    # x = [0, 0, 1, 1], unit weights: split in the middle explains SS 4 * 0.25 = 1.
    x = np.array([0.0, 0.0, 1.0, 1.0])
    g = cp.gain_curve(x, np.ones(4), False, 1)
    assert g[2] == pytest.approx(1.0)
    # split after one point: left mean 0 (1 pt), right mean 2/3 (3 pts): 3 * (2/3)^2 - 1 = 1/3
    assert g[1] == pytest.approx(1 / 3)


def test_min_size_masks_edges() -> None:
    g = cp.gain_curve(np.ones(10), np.full(10, 2.0), True, 3)
    assert np.all(np.isinf(g[:3])) and np.all(np.isinf(g[8:]))
    assert np.all(np.isfinite(g[3:8]))


def test_tau2_from_successive_differences_hand_case() -> None:
    # Huge n (no sampling noise) and rates alternating 0.5 ± a: every d^2 = 4a^2, so
    # median(4a^2 / (2 tau^2)) = median(chi2_1) gives tau^2 = 2a^2 / 0.45494.
    a = 0.01
    n = np.full(101, 1e12)
    rates = 0.5 + a * (-1.0) ** np.arange(101)
    series = cp.BucketSeries(n, rates * n)
    assert cp.estimate_tau2(series) == pytest.approx(2 * a * a / 0.4549364, rel=1e-4)


def test_tau2_is_zero_on_pure_binomial_noise_and_ignores_one_level_shift() -> None:
    rng = np.random.default_rng(3)
    n = np.full(400, 200.0)
    p = np.where(np.arange(400) < 200, 0.8, 0.65)
    series = cp.BucketSeries(n, rng.binomial(200, p).astype(float))
    assert cp.estimate_tau2(series) < 2e-4  # the 0.15 shift would add ~5.6e-3 to a variance


def test_quasi_binomial_weights_are_the_beta_binomial_dispersion() -> None:
    series = cp.BucketSeries(np.array([100.0, 400.0]), np.array([80.0, 320.0]))
    w = cp.weigh(series, tau2=0.0016)
    phi = 1 + np.array([100.0, 400.0]) * 0.0016 / 0.16
    np.testing.assert_allclose(w.v, series.n / phi)
    np.testing.assert_allclose(w.u, series.y / phi)


def _noise(rng: np.random.Generator, tau: float, length: int = 720) -> cp.BucketSeries:
    n = rng.integers(50, 501, length).astype(float)
    p = np.clip(0.8 + tau * rng.standard_normal(length), 0, 1)
    return cp.BucketSeries(n, rng.binomial(n.astype(int), p).astype(float))


@pytest.mark.parametrize("tau", [0.0, 0.03])
def test_false_alarms_stay_near_alpha_on_overdispersed_noise(tau: float) -> None:
    rng = np.random.default_rng(11)
    cfg = cp.DetectConfig(n_perm=99, n_boot=20)
    alarms = sum(
        bool(cp.detect(_noise(rng, tau, 240), cfg, seed=i).change_points) for i in range(40)
    )
    assert alarms <= 4  # alpha = 0.02: expect ~1 of 40


def test_bic_penalty_would_false_alarm_on_the_same_noise() -> None:
    # Why the penalty is calibrated: a plain binomial likelihood with a log(n) penalty
    # "finds" changes in most overdispersed pure-noise series.
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(20):
        s = _noise(rng, 0.03, 240)
        g = cp.gain_curve(s.y, s.n, True, 3)
        hits += bool(g.max() > math.log(len(s)))
    assert hits >= 15


def test_detects_a_step_with_window_effect_and_test() -> None:
    rng = np.random.default_rng(2)
    n = np.full(300, 200.0)
    p = np.clip(np.where(np.arange(300) < 120, 0.8, 0.7) + 0.015 * rng.standard_normal(300), 0, 1)
    series = cp.BucketSeries(n, rng.binomial(200, p).astype(float))
    found = cp.detect(series, seed=1)
    assert len(found.change_points) == 1
    point = found.change_points[0]
    assert abs(point.index - 120) <= 2
    assert point.lo <= point.index <= point.hi
    assert point.lo <= 120 <= point.hi
    assert point.delta == pytest.approx(-0.1, abs=0.02)
    assert point.delta - 1.96 * point.delta_se < -0.1 + 0.02
    assert point.gain > point.penalty and point.p_value <= 0.02
    assert found.levels[0] == pytest.approx(point.before)
    assert found.levels[-1] == pytest.approx(point.after)


def test_two_steps_on_scores() -> None:
    rng = np.random.default_rng(4)
    length, n = 300, np.full(300, 50.0)
    mean = np.select([np.arange(length) < 100, np.arange(length) < 200], [3.0, 3.5], 3.0)
    per_bucket = mean + 0.05 * rng.standard_normal(length)
    y = per_bucket * n + rng.standard_normal(length) * np.sqrt(n)  # within-sd 1
    yy = y**2 / n + (n - 1) * 1.0
    found = cp.detect(cp.BucketSeries(n, y, yy), seed=0)
    assert len(found.change_points) == 2
    assert all(abs(p.index - t) <= 2 for p, t in zip(found.change_points, [100, 200], strict=True))
    assert found.change_points[0].delta == pytest.approx(0.5, abs=0.05)


def _wander(
    rng: np.random.Generator, rho: float, spread: float, length: int = 720
) -> cp.BucketSeries:
    """Binomial buckets around 0.8 plus AR(1) wander of known rho and marginal spread."""
    n = rng.integers(100, 501, length).astype(float)
    path = cp.NoiseModel(spread**2, rho).simulate(rng, (1, length))[0]
    p = np.clip(0.8 + path, 0, 1)
    return cp.BucketSeries(n, rng.binomial(n.astype(int), p).astype(float))


def test_simulated_wander_has_the_model_autocorrelation_and_spread() -> None:
    paths = cp.NoiseModel(0.05**2, 0.9).simulate(np.random.default_rng(1), (400, 200))
    assert paths.std() == pytest.approx(0.05, rel=0.05)
    lag1 = np.mean(paths[:, 1:] * paths[:, :-1]) / np.mean(paths**2)
    assert lag1 == pytest.approx(0.9, abs=0.02)
    assert np.std(paths[:, 0]) == pytest.approx(0.05, rel=0.1)  # starts stationary


@pytest.mark.parametrize(("rho", "spread"), [(0.97, 0.05), (0.9, 0.02)])
def test_noise_estimator_recovers_ar1_rho_and_spread(rho: float, spread: float) -> None:
    rng = np.random.default_rng(21)
    fits = [cp.estimate_noise(_wander(rng, rho, spread)) for _ in range(15)]
    assert all(f.correlated for f in fits)
    assert np.median([f.rho for f in fits]) == pytest.approx(rho, abs=0.05)
    assert np.median([np.sqrt(f.spread2) for f in fits]) == pytest.approx(spread, rel=0.35)
    # Successive differences see only the fast part of the wander: far below its spread.
    tau = np.median([np.sqrt(cp.estimate_tau2(_wander(rng, rho, spread))) for _ in range(5)])
    assert tau < 0.5 * spread


def test_noise_estimator_keeps_independent_noise_independent() -> None:
    rng = np.random.default_rng(8)
    fits = [cp.fit_noise(_noise(rng, 0.03), cp.DetectConfig(), rng) for _ in range(10)]
    assert sum(f.correlated for f in fits) <= 1
    assert np.median([np.sqrt(f.spread2) for f in fits]) == pytest.approx(0.03, abs=0.005)


def test_steps_are_not_mistaken_for_wander() -> None:
    rng = np.random.default_rng(2)
    n = np.full(720, 200.0)
    p = 0.8 - 0.08 * (np.arange(720) >= 250) + 0.06 * (np.arange(720) >= 500)
    series = cp.BucketSeries(n, rng.binomial(200, p).astype(float))
    assert cp.estimate_noise(series).correlated  # the raw variograms grow with the lag...
    assert not cp.fit_noise(series, cp.DetectConfig(), rng).correlated  # ...because of steps


def test_the_correlated_null_holds_false_alarms_where_permutations_cry_wolf() -> None:
    rng = np.random.default_rng(13)
    cfg = cp.DetectConfig(n_perm=99, n_boot=20)
    series = [_wander(rng, 0.97, 0.05, 480) for _ in range(20)]
    calibrated = sum(bool(cp.detect(s, cfg, seed=i).change_points) for i, s in enumerate(series))
    exchangeable = sum(
        bool(cp.detect(s, cfg, seed=i, tau2=cp.estimate_tau2(s)).change_points)
        for i, s in enumerate(series)
    )
    assert exchangeable >= 15  # the permutation null cuts wander into "shifts"
    assert calibrated <= 3


def test_wander_keeps_a_large_step_detectable_with_a_wider_window() -> None:
    rng = np.random.default_rng(17)
    base = _wander(rng, 0.9, 0.02)
    shift = np.where(np.arange(720) >= 360, -0.15, 0.0)
    k = rng.binomial(base.n.astype(int), np.clip(base.rates + shift, 0, 1)).astype(float)
    found = cp.detect(cp.BucketSeries(base.n, k), seed=3)
    assert found.noise.correlated
    near = [p for p in found.change_points if p.lo - 2 <= 360 <= p.hi + 2]
    assert near and near[0].delta == pytest.approx(-0.15, abs=0.04)
