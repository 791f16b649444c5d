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
