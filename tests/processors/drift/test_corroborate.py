"""The sibling step test behind a silent-vendor label, on simulated AR(1) siblings."""

from __future__ import annotations

import numpy as np

from processors.drift.corroborate import CorroborationConfig, sibling, step_p_value
from processors.series import changepoint as cp


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
