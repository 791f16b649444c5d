"""Corroboration of a silent vendor change: did the other surfaces served under the same
model alias shift in the same direction, at the same time, beyond their own noise?

Each sibling's noise is modelled on its own whole series (`changepoint.estimate_noise`:
sampling noise plus AR(1) wander), and its shift across the change window is the
generalised-least-squares step estimate under that covariance, tested one-sided in the
direction of the change; Bonferroni over the surfaces checked. Independently wandering
siblings move by their wander's amount at any time, and in either direction: the
covariance makes the first count, the direction the second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from processors.drift.attribution import Corroborate
from processors.series import changepoint as cp
from processors.series.cells import SeriesQuery, fetch_alias_series
from schemas.analysis import Corroboration
from schemas.store import Store


@dataclass(frozen=True)
class CorroborationConfig:
    seed: int = 0
    neighbourhood: int = 72  # buckets each side of the change read on the other surfaces
    slack: int = 2  # buckets either side of the change window left out as ambiguous
    min_segment: int = 3
    permutations: int = 999  # kept for the run's parameters; the test is analytic now
    level: float = 0.01  # family-wise, Bonferroni over the surfaces checked


@dataclass(frozen=True)
class _Sibling:
    n: np.ndarray
    k: np.ndarray
    noise: cp.NoiseModel
    unit: float


def alias_corroborator(store: Store, query: SeriesQuery, cfg: CorroborationConfig) -> Corroborate:
    """A check, per change window, that other surfaces served under the same model alias
    stepped the same way across it beyond their own autocorrelated noise."""
    cache: dict[str, dict[str, _Sibling]] = {}

    def check(alias: str, lo: int, hi: int, delta: float) -> Corroboration | None:
        if not alias:
            return None
        if alias not in cache:
            cache[alias] = {
                surface: sibling(n, k)
                for surface, (n, k) in fetch_alias_series(store, query, alias).items()
            }
        checked: list[str] = []
        p_values: dict[str, float] = {}
        for surface, sib in sorted(cache[alias].items()):
            p = step_p_value(sib, lo, hi, delta, cfg)
            if p is not None:
                checked.append(surface)
                p_values[surface] = p
        level = cfg.level / max(len(checked), 1)
        hits = [s for s in checked if p_values[s] <= level]
        return Corroboration(
            alias=alias, surfaces_checked=checked, corroborating_surfaces=hits, p_values=p_values
        )

    return check


def sibling(n: np.ndarray, k: np.ndarray) -> _Sibling:
    """A sibling surface's series and the noise model of its buckets with events."""
    present = n > 0
    if present.sum() < 3:
        return _Sibling(n, k, cp.NoiseModel(0.0), 0.25)
    series = cp.BucketSeries(n[present], k[present])
    unit = cp.within_variance(series)
    noise = cp.estimate_noise(series, unit)
    if not noise.correlated:  # memory unresolved (or none): take the whole variance
        noise = cp.NoiseModel(cp.marginal_spread2(series, unit))
    return _Sibling(n, k, noise, unit)


def step_p_value(
    sib: _Sibling, lo: int, hi: int, delta: float, cfg: CorroborationConfig
) -> float | None:
    """One-sided p-value that the sibling stepped in `delta`'s direction across the
    window [lo, hi] (grid rows): GLS fit of level + step on the `neighbourhood` buckets
    each side (the window and `slack` around it left out), with covariance
    diag(sampling) + spread^2 rho^|i-j|. None when there is too little data to say."""
    n, k = sib.n, sib.k
    length = len(n)
    before = np.arange(max(0, lo - cfg.slack - cfg.neighbourhood), max(0, lo - cfg.slack))
    after = np.arange(
        min(length, hi + 1 + cfg.slack), min(length, hi + 1 + cfg.slack + cfg.neighbourhood)
    )
    before, after = before[n[before] > 0], after[n[after] > 0]
    m = cfg.min_segment
    if before.size < m or after.size < m or n[before].sum() < 20 * m or n[after].sum() < 20 * m:
        return None
    rows = np.concatenate([before, after])
    x = k[rows] / n[rows]
    lag = np.abs(rows[:, None] - rows[None, :]).astype(np.float64)
    cov = sib.noise.spread2 * sib.noise.rho**lag if sib.noise.correlated else np.zeros_like(lag)
    if not sib.noise.correlated:
        cov[np.diag_indices_from(cov)] = sib.noise.spread2
    cov[np.diag_indices_from(cov)] += sib.unit / n[rows]
    design = np.column_stack([np.ones(rows.size), (rows > hi).astype(np.float64)])
    solved = np.linalg.solve(cov, np.column_stack([design, x]))
    info = design.T @ solved[:, :2]
    beta = np.linalg.solve(info, design.T @ solved[:, 2])
    se = float(np.sqrt(np.linalg.inv(info)[1, 1]))
    z = float(beta[1]) / se * (1.0 if delta >= 0 else -1.0)
    return float(stats.norm.sf(z))
