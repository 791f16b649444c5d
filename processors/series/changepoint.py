"""Change points in a bucketed pass-rate (or mean-score) series.

The model: bucket t holds n_t events; its true rate wanders around the segment level
with an hour-to-hour variance tau^2 (overdispersion), so the bucket estimate has
variance v_t = p(1-p)/n_t + tau^2 (binary) or s^2/n_t + tau^2 (scores). For binary
outcomes this is the beta-binomial variance, and the segment log-likelihood is the
quasi-binomial one with per-bucket dispersion phi_t = v_t / (p(1-p)/n_t); its maximiser
is the phi-weighted rate, so every segment cost is O(1) from prefix sums.

Detection is penalised likelihood searched greedily (binary segmentation): a split is
kept when its likelihood-ratio gain exceeds a penalty. The penalty is not a textbook
constant (BIC raises false alarms on overdispersed traffic); it is the (1 - alpha)
quantile of the maximal gain over random permutations of the very segment being
tested, so under "no change" the chance of any split is alpha whatever the dispersion.
Each change's time gets a confidence window: the splits whose gain is within a
threshold of the best, the threshold calibrated by a parametric bootstrap.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

FloatArray = NDArray[np.float64]

_MEDIAN_CHI2_1 = 0.45493642311957174


@dataclass(frozen=True)
class BucketSeries:
    """Per-bucket sufficient statistics. `y` is passes (binary) or the score sum;
    `yy` the score sum of squares (None for binary outcomes). Buckets have n > 0."""

    n: FloatArray
    y: FloatArray
    yy: FloatArray | None = None

    @property
    def binary(self) -> bool:
        return self.yy is None

    @property
    def rates(self) -> FloatArray:
        return self.y / self.n

    def __len__(self) -> int:
        return int(self.n.shape[0])


@dataclass(frozen=True)
class Weighted:
    """The series as the likelihood sees it: binary -> (k/phi, n/phi); scores -> (w*x, w)."""

    u: FloatArray
    v: FloatArray
    binary: bool
    tau2: float
    unit_variance: float  # p(1-p) for binary, pooled within-bucket s^2 for scores


def within_variance(series: BucketSeries) -> float:
    """Per-event variance: p(1-p) at the pooled rate, or the pooled within-bucket s^2."""
    if series.yy is None:
        p = float(series.y.sum() / series.n.sum())
        return max(p * (1.0 - p), 1e-9)
    dof = float(np.sum(series.n - 1.0))
    ss = float(np.sum(series.yy - series.y**2 / series.n))
    return max(ss / dof, 1e-12) if dof > 0 else 1e-12


def estimate_tau2(series: BucketSeries, unit_variance: float | None = None) -> float:
    """Between-bucket variance beyond sampling noise, from successive differences.

    d_t = x_t - x_{t-1} has variance b_t + b_{t-1} + 2 tau^2 (b = sampling variance);
    tau^2 solves median(d_t^2 / that) = median of chi^2_1. Differences and the median
    keep a few level shifts from passing for dispersion.
    """
    if len(series) < 3:
        return 0.0
    unit = within_variance(series) if unit_variance is None else unit_variance
    x = series.rates
    d2 = np.diff(x) ** 2
    b = unit / series.n
    base = b[1:] + b[:-1]

    def excess(tau2: float) -> float:
        return float(np.median(d2 / (base + 2.0 * tau2))) - _MEDIAN_CHI2_1

    if excess(0.0) <= 0.0:
        return 0.0
    hi = float(np.max(d2)) + 1e-12
    while excess(hi) > 0.0:
        hi *= 4.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def weigh(series: BucketSeries, tau2: float | None = None) -> Weighted:
    unit = within_variance(series)
    t2 = estimate_tau2(series, unit) if tau2 is None else tau2
    if series.yy is None:
        phi = 1.0 + series.n * t2 / unit
        return Weighted(series.y / phi, series.n / phi, True, t2, unit)
    w = 1.0 / (unit / series.n + t2)
    return Weighted(w * series.rates, w, False, t2, unit)


def _loglik(u: FloatArray, v: FloatArray, binary: bool) -> FloatArray:
    if binary:
        p = np.clip(u / v, 0.0, 1.0)
        out: FloatArray = special.xlogy(u, p) + special.xlogy(v - u, 1.0 - p)
        return out
    return np.asarray(0.5 * u**2 / v, dtype=np.float64)


def gain_curve(u: FloatArray, v: FloatArray, binary: bool, min_size: int) -> FloatArray:
    """2 x log-likelihood gain of splitting before position s, for s in
    [min_size, L - min_size] (last axis; leading axes are batches, e.g. permutations).
    Positions outside that range are -inf."""
    cu = np.cumsum(u, axis=-1)
    cv = np.cumsum(v, axis=-1)
    tu, tv = cu[..., -1:], cv[..., -1:]
    lu, lv = cu[..., :-1], cv[..., :-1]  # left segment ends before s = 1..L-1
    g = 2.0 * (
        _loglik(lu, lv, binary) + _loglik(tu - lu, tv - lv, binary) - _loglik(tu, tv, binary)
    )
    length = u.shape[-1]
    s = np.arange(1, length)
    g = np.where((s >= min_size) & (s <= length - min_size), g, -np.inf)
    full = np.full(u.shape, -np.inf)
    full[..., 1:] = g
    return full


def permutation_maxima(
    u: FloatArray, v: FloatArray, binary: bool, min_size: int, n_perm: int, rng: np.random.Generator
) -> FloatArray:
    """Maximal split gain of `n_perm` random reorderings of the buckets."""
    order = np.argsort(rng.random((n_perm, u.shape[0])), axis=1)
    return np.asarray(gain_curve(u[order], v[order], binary, min_size).max(axis=1))


@dataclass(frozen=True)
class Split:
    """One detected change: the first bucket of the new level and its test."""

    index: int
    gain: float
    penalty: float
    p_value: float


@dataclass(frozen=True)
class DetectConfig:
    alpha: float = 0.02  # false-alarm rate per tested segment
    n_perm: int = 199
    min_size: int = 3
    max_changes: int = 20
    n_boot: int = 200
    level: float = 0.95  # confidence of the time windows and effect intervals


@dataclass(frozen=True)
class ChangePoint:
    index: int
    lo: int  # confidence window, bucket indices inclusive
    hi: int
    before: float
    after: float
    delta: float
    delta_se: float
    gain: float
    penalty: float
    p_value: float
    segment: tuple[int, int]  # the neighbouring segment [a, b) the change was tested in
    profile: FloatArray = field(repr=False, default_factory=lambda: np.zeros(0))
    threshold: float = 0.0  # a split s is in the time's confidence set when
    # profile.max() - profile[s - segment[0]] <= threshold

    def plausible(self, index: int) -> bool:
        """Is a change at series index `index` inside this change's confidence set?"""
        a, b = self.segment
        if not a < index < b or self.profile.size == 0:
            return False
        return bool(self.profile.max() - self.profile[index - a] <= self.threshold)


@dataclass(frozen=True)
class Detection:
    change_points: list[ChangePoint]
    tau2: float
    unit_variance: float
    levels: FloatArray = field(repr=False)  # fitted level per bucket


def _test_segment(
    w: Weighted, a: int, b: int, cfg: DetectConfig, rng: np.random.Generator
) -> Split | None:
    if b - a < 2 * cfg.min_size:
        return None
    u, v = w.u[a:b], w.v[a:b]
    g = gain_curve(u, v, w.binary, cfg.min_size)
    s = int(np.argmax(g))
    if not np.isfinite(g[s]):
        return None
    null = permutation_maxima(u, v, w.binary, cfg.min_size, cfg.n_perm, rng)
    penalty = float(np.quantile(null, 1.0 - cfg.alpha, method="higher"))
    p_value = float((1 + np.sum(null >= g[s])) / (cfg.n_perm + 1))
    if g[s] <= penalty:
        return None
    return Split(a + s, float(g[s]), penalty, p_value)


def binary_segmentation(w: Weighted, cfg: DetectConfig, rng: np.random.Generator) -> list[Split]:
    """Greedy search; then each split is re-placed and re-tested between its neighbours
    (the usual refinement, which drops splits that only helped an earlier wrong one)."""
    found: list[Split] = []
    stack = [(0, len(w.u))]
    while stack and len(found) < cfg.max_changes:
        a, b = stack.pop()
        split = _test_segment(w, a, b, cfg, rng)
        if split is not None:
            found.append(split)
            stack += [(a, split.index), (split.index, b)]
    changed = True
    while changed and found:
        changed = False
        found.sort(key=lambda s: s.index)
        bounds = [0, *[s.index for s in found], len(w.u)]
        refined: list[Split] = []
        for i in range(len(found)):
            split = _test_segment(w, bounds[i], bounds[i + 2], cfg, rng)
            if split is None:
                changed = True
            else:
                changed |= split.index != found[i].index
                refined.append(split)
        if changed:
            found = _dedupe(refined)
    return sorted(found, key=lambda s: s.index)


def _dedupe(splits: list[Split]) -> list[Split]:
    best: dict[int, Split] = {}
    for s in splits:
        if s.index not in best or s.gain > best[s.index].gain:
            best[s.index] = s
    return list(best.values())


def _level(w: Weighted, a: int, b: int) -> tuple[float, float]:
    """Segment level and its standard error under the model."""
    su, sv = float(w.u[a:b].sum()), float(w.v[a:b].sum())
    if w.binary:
        p = su / sv
        return p, float(np.sqrt(max(p * (1 - p), 1e-12) / sv))
    return su / sv, float(np.sqrt(1.0 / sv))


def location_window(
    series: BucketSeries,
    w: Weighted,
    a: int,
    c: int,
    b: int,
    cfg: DetectConfig,
    rng: np.random.Generator,
) -> tuple[int, int, FloatArray, float]:
    """Confidence set of the change time: every split whose gain is within `threshold` of
    the best one, the threshold being the `level` quantile of that same deviance at the
    true time in a parametric bootstrap (the two fitted levels with the estimated
    dispersion). Returns the set's hull (series indices), the gain profile over [a, b)
    and the threshold."""
    m1, _ = _level(w, a, c)
    m2, _ = _level(w, c, b)
    n = series.n[a:b]
    mean = np.where(np.arange(a, b) < c, m1, m2)
    z = rng.standard_normal((cfg.n_boot, b - a))
    if w.binary:
        p = np.clip(mean + np.sqrt(w.tau2) * z, 1e-6, 1 - 1e-6)
        k = rng.binomial(n.astype(np.int64), p).astype(np.float64)
        phi = 1.0 + n * w.tau2 / w.unit_variance
        u, v = k / phi, np.broadcast_to(n / phi, k.shape)
    else:
        x = mean + np.sqrt(w.unit_variance / n + w.tau2) * z
        wt = 1.0 / (w.unit_variance / n + w.tau2)
        u, v = x * wt, np.broadcast_to(wt, x.shape)
    boot = gain_curve(u, np.ascontiguousarray(v), w.binary, 1)
    deviance = boot.max(axis=1) - boot[:, c - a]
    threshold = float(np.quantile(deviance, cfg.level))
    profile = gain_curve(w.u[a:b], w.v[a:b], w.binary, 1)
    inside = np.flatnonzero(profile.max() - profile <= threshold)
    lo = a + int(inside.min()) if inside.size else c
    hi = a + int(inside.max()) if inside.size else c
    return min(lo, c), max(hi, c), profile, threshold


def detect(
    series: BucketSeries, cfg: DetectConfig | None = None, seed: int = 0, tau2: float | None = None
) -> Detection:
    """Change points of `series` with their windows, effects and tests."""
    cfg = cfg or DetectConfig()
    rng = np.random.default_rng(seed)
    w = weigh(series, tau2)
    splits = binary_segmentation(w, cfg, rng)
    bounds = [0, *[s.index for s in splits], len(series)]
    points = []
    for i, s in enumerate(splits):
        a, c, b = bounds[i], s.index, bounds[i + 2]
        m1, se1 = _level(w, a, c)
        m2, se2 = _level(w, c, b)
        lo, hi, profile, threshold = location_window(series, w, a, c, b, cfg, rng)
        points.append(
            ChangePoint(
                index=c,
                lo=lo,
                hi=hi,
                before=m1,
                after=m2,
                delta=m2 - m1,
                delta_se=float(np.hypot(se1, se2)),
                gain=s.gain,
                penalty=s.penalty,
                p_value=s.p_value,
                segment=(a, b),
                profile=profile,
                threshold=threshold,
            )
        )
    levels = np.empty(len(series))
    for a, b in itertools.pairwise(bounds):
        levels[a:b] = _level(w, a, b)[0]
    return Detection(points, w.tau2, w.unit_variance, levels)
