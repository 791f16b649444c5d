"""The sibling step test behind a silent-vendor label, on simulated AR(1) siblings."""

from __future__ import annotations

import numpy as np

from processors.drift.corroborate import (
    CorroborationConfig,
    SiblingNoise,
    placebo_scale,
    sibling,
    step_p_value,
    without_cycle,
)
from processors.series import changepoint as cp
from schemas.analysis import Corroboration


def _sibling_series(
    rng: np.random.Generator, rho: float, spread: float, step: float = 0.0, at: int = 360
) -> tuple[np.ndarray, np.ndarray]:
    n = rng.integers(100, 301, 720).astype(float)
    path = cp.NoiseModel(spread**2, rho).simulate(rng, (1, 720))[0]
    p = np.clip(0.8 + path + step * (np.arange(720) >= at), 0, 1)
    return n, rng.binomial(n.astype(int), p).astype(float)


def test_wandering_siblings_rarely_step_beyond_their_own_noise() -> None:
    rng = np.random.default_rng(5)
    cfg = CorroborationConfig()
    p_values = []
    for _ in range(40):
        n, k = _sibling_series(rng, 0.97, 0.05)
        p_values.append(step_p_value(sibling(n, k), 358, 361, -0.05, cfg))
    assert all(p is not None for p in p_values)
    assert sum(p <= cfg.level for p in p_values if p is not None) <= 2


def test_a_shared_step_is_corroborated_in_its_direction_only() -> None:
    rng = np.random.default_rng(6)
    cfg = CorroborationConfig()
    n, k = _sibling_series(rng, 0.9, 0.02, step=-0.1)
    sib = sibling(n, k)
    down = step_p_value(sib, 358, 361, -0.1, cfg)
    up = step_p_value(sib, 358, 361, 0.1, cfg)
    assert down is not None and down < 1e-4
    assert up is not None and up > 0.99


def test_too_little_data_says_nothing() -> None:
    n, k = np.zeros(720), np.zeros(720)
    n[:5], k[:5] = 100.0, 80.0
    assert step_p_value(sibling(n, k), 358, 361, -0.1, CorroborationConfig()) is None


def _cycled(rng: np.random.Generator, amplitude: float) -> tuple[np.ndarray, np.ndarray]:
    """A month of hours: mild wander plus a daily cycle (the users' day)."""
    n = rng.integers(100, 301, 720).astype(float)
    path = cp.NoiseModel(0.01**2, 0.9).simulate(rng, (1, 720))[0]
    season = amplitude * np.sin(2 * np.pi * (np.arange(720) % 24) / 24)
    return n, rng.binomial(n.astype(int), np.clip(0.8 + path + season, 0, 1)).astype(float)


def test_a_cycle_the_siblings_share_does_not_corroborate() -> None:
    # Across hours 8-16 the cycle falls from its peak to its trough, every day, on every
    # surface behind the alias.
    rng = np.random.default_rng(8)
    cfg = CorroborationConfig()
    p_values = []
    for _ in range(20):
        n, k = _cycled(rng, 0.05)
        p_values.append(step_p_value(sibling(n, k, 24), 15 * 24 + 8, 15 * 24 + 16, -0.05, cfg))
    assert all(p is not None for p in p_values)
    assert sum(p <= cfg.level for p in p_values if p is not None) <= 1, p_values


def test_the_cycle_is_removed_and_a_step_kept() -> None:
    rng = np.random.default_rng(11)
    n, k = _cycled(rng, 0.05)
    hours = np.arange(720)
    stepped = rng.binomial(n.astype(int), np.clip(k / n - 0.06 * (hours >= 400), 0, 1))
    x = without_cycle(n, stepped.astype(float), 24)
    by_hour = [float(np.average(x[hours % 24 == h], weights=n[hours % 24 == h])) for h in range(24)]
    assert max(by_hour) - min(by_hour) < 0.01  # was 0.1 peak to trough
    step = np.average(x[400:], weights=n[400:]) - np.average(x[:400], weights=n[:400])
    assert abs(step + 0.06) < 0.01
    assert np.array_equal(without_cycle(n[:100], k[:100], 24), k[:100] / n[:100])  # < 8 days


def test_a_real_step_is_not_mistaken_for_wander() -> None:
    # A single large step makes a series' variogram grow with the lag, as slow wander
    # does; the sibling's noise is modelled with the tested step taken out.
    rng = np.random.default_rng(9)
    cfg = CorroborationConfig()
    for _ in range(10):
        n = rng.integers(100, 301, 240).astype(float)
        p = 0.8 + 0.01 * rng.standard_normal(240) - 0.07 * (np.arange(240) >= 160)
        k = rng.binomial(n.astype(int), p).astype(float)
        assert (step_p_value(sibling(n, k, 24), 158, 161, -0.07, cfg) or 1.0) < cfg.level / 10


def test_placebo_windows_shrink_the_z_of_an_understated_noise_model() -> None:
    rng = np.random.default_rng(10)
    cfg = CorroborationConfig()
    n, k = _sibling_series(rng, 0.97, 0.05)
    sib = sibling(n, k)
    unit = 0.16
    right = placebo_scale(
        sib, sib.x, SiblingNoise(cp.NoiseModel(0.05**2, 0.97), unit), 358, 361, cfg
    )
    under = placebo_scale(
        sib, sib.x, SiblingNoise(cp.NoiseModel(0.005**2, 0.97), unit), 358, 361, cfg
    )
    assert 1.0 <= right < 1.6
    assert under > 3.0


def test_one_sibling_of_several_does_not_make_a_vendor_change() -> None:
    checked = ["a", "b", "c"]
    one = Corroboration(alias="acme/pro", surfaces_checked=checked, corroborating_surfaces=["a"],
                        p_values={"a": 1e-5, "b": 0.4, "c": 0.7}, required=2)  # fmt: skip
    two = one.model_copy(update={"corroborating_surfaces": ["a", "b"]})
    alone = Corroboration(alias="acme/pro", surfaces_checked=["a"], corroborating_surfaces=["a"],
                          p_values={"a": 1e-5}, required=1)  # fmt: skip
    assert (one.corroborated, two.corroborated, alone.corroborated) == (False, True, True)
    assert not Corroboration(
        alias="x", surfaces_checked=[], corroborating_surfaces=[], p_values={}, required=0
    ).corroborated
