"""Corroboration of a silent vendor change: did the other surfaces served under the same
model alias shift inside the same window? A permutation test local to the window on
each of them, Bonferroni over the surfaces checked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from processors.drift.attribution import Corroborate
from processors.series import changepoint as cp
from processors.series.cells import SeriesQuery, fetch_alias_series
from schemas.analysis import Corroboration
from schemas.store import Store


@dataclass(frozen=True)
class CorroborationConfig:
    seed: int = 0
    neighbourhood: int = 72  # buckets each side of the change read on the other surfaces
    slack: int = 2  # buckets the other surface's shift may sit outside the change window
    min_segment: int = 3
    permutations: int = 999
    level: float = 0.01  # family-wise, Bonferroni over the surfaces checked


def alias_corroborator(store: Store, query: SeriesQuery, cfg: CorroborationConfig) -> Corroborate:
    """A check, per change window, that other surfaces served under the same model alias
    shifted inside the same window (a permutation test local to that window, Bonferroni
    over the surfaces checked)."""
    cache: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    rng = np.random.default_rng(cfg.seed + 1)

    def check(alias: str, lo: int, hi: int, delta: float) -> Corroboration | None:
        if not alias:
            return None
        if alias not in cache:
            cache[alias] = fetch_alias_series(store, query, alias)
        checked: list[str] = []
        p_values: dict[str, float] = {}
        for surface, (n, k) in sorted(cache[alias].items()):
            p = local_shift_p_value(n, k, lo, hi, cfg, rng)
            if p is not None:
                checked.append(surface)
                p_values[surface] = p
        level = cfg.level / max(len(checked), 1)
        hits = [s for s in checked if p_values[s] <= level]
        return Corroboration(
            alias=alias, surfaces_checked=checked, corroborating_surfaces=hits, p_values=p_values
        )

    return check


def local_shift_p_value(
    n: np.ndarray,
    k: np.ndarray,
    lo: int,
    hi: int,
    cfg: CorroborationConfig,
    rng: np.random.Generator,
) -> float | None:
    """p-value of the largest split gain located within [lo, hi] (+ slack) on the rows
    around it; None when there is too little data to say."""
    reach, slack, permutations = cfg.neighbourhood, cfg.slack, cfg.permutations
    rows = np.arange(max(0, lo - reach), min(len(n), hi + 1 + reach))
    rows = rows[n[rows] > 0]
    m = cfg.min_segment
    if rows.size < 4 * m or n[rows].sum() < 20 * m:
        return None
    w = cp.weigh(cp.BucketSeries(n[rows], k[rows]))
    allowed = (rows >= lo - slack) & (rows <= hi + slack)
    allowed[:m] = False
    allowed[rows.size - m + 1 :] = False
    if not allowed.any():
        return None
    observed = cp.gain_curve(w.u, w.v, True, m)[allowed].max()
    order = np.argsort(rng.random((permutations, rows.size)), axis=1)
    null = cp.gain_curve(w.u[order], w.v[order], True, m)[:, allowed].max(axis=1)
    return float((1 + np.sum(null >= observed)) / (permutations + 1))
