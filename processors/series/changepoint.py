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
tested, so under "no change" the chance of any split is alpha while the buckets'
deviations are independent.

Real traffic also *wanders*: the user mix drifts with day-scale memory, so deviations
are serially correlated and a k-bucket mean is far noisier than k independent buckets.
`estimate_noise` fits that wander as an AR(1) process (marginal variance spread^2,
lag-one correlation rho) from robust variograms at lags up to a few days; when rho is
material, the penalty is the (1 - alpha) quantile of the maximal gain over series
simulated from the fitted noise model (sampling noise plus AR(1) wander), which keeps
the autocorrelation a permutation destroys. Each change's time gets a confidence
window: the splits whose gain is within a threshold of the best, the threshold
calibrated by a parametric bootstrap with the same noise model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

MEDIAN_CHI2_1 = 0.45493642311957174


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
    n: FloatArray  # events per bucket (what the null simulates sampling noise from)


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
    return _variogram(series.rates, unit / series.n, 1)


RHO_MATERIAL = 0.2  # below this lag-one correlation the wander counts as independent
_LAGS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 36, 48, 72, 96)
_RHO_GRID = np.linspace(0.0, 0.995, 200)


@dataclass(frozen=True)
class NoiseModel:
    """Deviations of the true level from the segment level: AR(1) with marginal
    variance `spread2` and lag-one correlation `rho` per bucket (rho = 0: independent,
    the classic overdispersion tau^2), on top of each bucket's sampling noise."""

    spread2: float
    rho: float = 0.0

    @property
    def correlated(self) -> bool:
        return self.rho > 0.0 and self.spread2 > 0.0

    @property
    def long_run_variance(self) -> float:
        """n x the variance of an n-bucket mean of the wander, for large n."""
        return self.spread2 * (1.0 + self.rho) / (1.0 - self.rho)

    def simulate(self, rng: np.random.Generator, shape: tuple[int, int]) -> FloatArray:
        """`shape[0]` stationary wander paths of `shape[1]` buckets."""
        z: FloatArray = rng.standard_normal(shape) * np.sqrt(self.spread2)
        if not self.correlated:
            return z
        z[:, 1:] *= np.sqrt(1.0 - self.rho**2)
        zi = z[:, :1] * self.rho  # start in the stationary distribution
        from scipy import signal  # a second or so to import: only when simulated

        out, _ = signal.lfilter([1.0], [1.0, -self.rho], z[:, 1:], axis=1, zi=zi)
        return np.concatenate([z[:, :1], out], axis=1)


def _variogram(x: FloatArray, b: FloatArray, lag: int) -> float:
    """Robust half-variance of the wander at `lag` beyond sampling noise: g solves
    median(d^2 / (b_t + b_{t-lag} + 2 g)) = median(chi^2_1) for d = x_t - x_{t-lag}. For
    AR(1) wander g = spread^2 (1 - rho^lag); the median ignores pairs straddling a shift."""
    d2 = (x[lag:] - x[:-lag]) ** 2
    base = b[lag:] + b[:-lag]

    def excess(g: float) -> float:
        return float(np.median(d2 / (base + 2.0 * g))) - MEDIAN_CHI2_1

    if excess(0.0) <= 0.0:
        return 0.0
    hi = float(np.max(d2)) + 1e-12
    while excess(hi) > 0.0:
        hi *= 4.0
    from scipy import optimize  # imported when first needed: it costs start-up time

    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def estimate_noise(
    series: BucketSeries, unit_variance: float | None = None, levels: FloatArray | None = None
) -> NoiseModel:
    """The wander's AR(1) model from robust variograms at lags 1 .. L/6 (at most 96
    buckets): (spread^2, rho) least-squares fit of g_k = spread^2 (1 - rho^k). Successive
    differences alone (lag 1) see only spread^2 (1 - rho), the fast part of the noise;
    the longer lags see the slow part. When rho is immaterial the model is the
    independent one with tau^2 from successive differences (`estimate_tau2`). With
    `levels` (a fitted segmentation) the deviations from them are modelled instead."""
    unit = within_variance(series) if unit_variance is None else unit_variance
    lags = [k for k in _LAGS if k <= len(series) // 6]
    if len(lags) < 3:
        return NoiseModel(estimate_tau2(series, unit))
    x, b = series.rates, unit / series.n
    if levels is not None:
        x = x - levels
    g = np.array([_variogram(x, b, k) for k in lags])
    f = 1.0 - _RHO_GRID[:, None] ** np.array(lags, dtype=np.float64)[None, :]
    spread2 = np.maximum((f @ g) / np.sum(f * f, axis=1), 0.0)
    sse = np.sum((g[None, :] - spread2[:, None] * f) ** 2, axis=1)
    best = int(np.argmin(sse))
    rho, s2 = float(_RHO_GRID[best]), float(spread2[best])
    if rho < RHO_MATERIAL or s2 <= 0.0:
        tau2 = estimate_tau2(series, unit) if levels is None else float(g[0])
        return NoiseModel(tau2)
    return NoiseModel(s2, rho)


MAX_STEPS_FOR_SHIFTS = 3  # an independent-noise segmentation this parsimonious is steps
_WANDER_SIMULATIONS = 59  # independent series the wander test compares against
_WANDER_LEVEL = 0.95


def marginal_spread2(series: BucketSeries, unit_variance: float | None = None) -> float:
    """The deviations' whole variance beyond sampling, whatever their memory: the mean
    variogram over the longer half of the lags (spread^2 once the lags outrun the
    memory; tau^2 for independent noise). A check that must not under-state a series'
    noise uses it where short series leave the memory unresolved."""
    unit = within_variance(series) if unit_variance is None else unit_variance
    lags = [k for k in _LAGS if k <= len(series) // 6]
    if len(lags) < 3:
        return estimate_tau2(series, unit)
    b = unit / series.n
    g = [_variogram(series.rates, b, k) for k in lags[len(lags) // 2 :]]
    return max(float(np.mean(g)), estimate_tau2(series, unit))


def fit_noise(series: BucketSeries, cfg: DetectConfig, rng: np.random.Generator) -> NoiseModel:
    """The noise model the detector is calibrated on: AR(1) wander only when the series
    shows serial correlation that independent noise would not (`wander_excess` against
    independent series of the same buckets). A few large level shifts make the raw
    variograms grow with the lag just as wander does, so when a segmentation under
    independent noise needs a handful of splits, the test is run on the deviations from
    it (real steps leave uncorrelated deviations); wander is cut into many pieces, and
    is then tested on the raw series. Real wander gets its model refit on the deviations
    from the conservative (correlated-null) segmentation, so real shifts inflate it less."""
    raw = estimate_noise(series)
    if not raw.correlated:
        return raw
    independent = NoiseModel(estimate_tau2(series))
    splits, levels = _fitted(series, independent, cfg, rng)
    base = levels if splits <= MAX_STEPS_FOR_SHIFTS else np.full(len(series), levels.mean())
    if not wander_significant(series, base, independent.spread2, rng):
        return independent
    refined = estimate_noise(series, levels=_fitted(series, raw, cfg, rng)[1])
    return refined if refined.correlated else raw


def wander_excess(series: BucketSeries, unit: float, deviations: FloatArray) -> float:
    """How much more the deviations vary at long lags than at lags 1-2: about zero for
    independent noise, the slow part of the wander otherwise."""
    lags = [k for k in _LAGS if k <= len(series) // 6]
    b = unit / series.n
    g = np.array([_variogram(deviations, b, k) for k in lags])
    return float(np.mean(g[len(g) // 2 :]) - np.mean(g[:2]))


def wander_significant(
    series: BucketSeries, levels: FloatArray, tau2: float, rng: np.random.Generator
) -> bool:
    """Does the series wander (serially correlated deviations from `levels`) beyond
    what independent noise with dispersion `tau2` shows, at level `_WANDER_LEVEL`?"""
    if len([k for k in _LAGS if k <= len(series) // 6]) < 3:
        return False
    unit = within_variance(series)
    observed = wander_excess(series, unit, series.rates - levels)
    sd = np.sqrt(unit / series.n + tau2)
    null = [
        wander_excess(series, unit, sd * rng.standard_normal(len(series)))
        for _ in range(_WANDER_SIMULATIONS)
    ]
    return observed > float(np.quantile(null, _WANDER_LEVEL))


def _fitted(
    series: BucketSeries, noise: NoiseModel, cfg: DetectConfig, rng: np.random.Generator
) -> tuple[int, FloatArray]:
    """Number of splits and per-bucket levels of the segmentation found under `noise`."""
    w = weigh(series, noise.spread2)
    splits = binary_segmentation(w, cfg, rng, noise)
    bounds = [0, *[s.index for s in splits], len(series)]
    levels = np.empty(len(series))
    for a, b in itertools.pairwise(bounds):
        levels[a:b] = _level(w, a, b)[0]
    return len(splits), levels


def weigh(series: BucketSeries, tau2: float | None = None) -> Weighted:
    """Likelihood weights with `tau2` (default: the successive-difference estimate) as
    each bucket's variance beyond sampling."""
    unit = within_variance(series)
    t2 = estimate_tau2(series, unit) if tau2 is None else tau2
    if series.yy is None:
        phi = 1.0 + series.n * t2 / unit
        return Weighted(series.y / phi, series.n / phi, True, t2, unit, series.n)
    w = 1.0 / (unit / series.n + t2)
    return Weighted(w * series.rates, w, False, t2, unit, series.n)


def _xlogy(x: FloatArray, y: FloatArray) -> FloatArray:
    """x * log(y), 0 where x is 0 (scipy.special.xlogy, without importing scipy)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(x == 0.0, 0.0, x * np.log(y))
    return out


def _loglik(u: FloatArray, v: FloatArray, binary: bool) -> FloatArray:
    if binary:
        p = np.clip(u / v, 0.0, 1.0)
        out: FloatArray = _xlogy(u, p) + _xlogy(v - u, 1.0 - p)
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


def simulate_weighted(
    w: Weighted, mean: FloatArray, noise: NoiseModel, n_sim: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """`n_sim` series of `w`'s buckets around the per-bucket `mean`, with the noise
    model's wander plus sampling noise, weighted as `w` weighs the data: (u, v)."""
    n = w.n
    wander = noise.simulate(rng, (n_sim, mean.shape[0]))
    if w.binary:
        p = np.clip(mean + wander, 1e-6, 1 - 1e-6)
        k = rng.binomial(n.astype(np.int64), p).astype(np.float64)
        phi = 1.0 + n * w.tau2 / w.unit_variance
        return k / phi, np.ascontiguousarray(np.broadcast_to(n / phi, k.shape))
    x = mean + wander + np.sqrt(w.unit_variance / n) * rng.standard_normal(wander.shape)
    wt = 1.0 / (w.unit_variance / n + w.tau2)
    return x * wt, np.ascontiguousarray(np.broadcast_to(wt, x.shape))


def simulated_maxima(
    w: Weighted, a: int, b: int, noise: NoiseModel, cfg: DetectConfig, rng: np.random.Generator
) -> FloatArray:
    """Maximal split gain of `n_perm` series simulated under "no change" on [a, b): the
    segment's level, its buckets' event counts, AR(1) wander and sampling noise."""
    sub = _slice(w, a, b)
    level = _level(w, a, b)[0]
    u, v = simulate_weighted(sub, np.full(b - a, level), noise, cfg.n_perm, rng)
    return np.asarray(gain_curve(u, v, w.binary, cfg.min_size).max(axis=1))


def _slice(w: Weighted, a: int, b: int) -> Weighted:
    return Weighted(w.u[a:b], w.v[a:b], w.binary, w.tau2, w.unit_variance, w.n[a:b])


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
    noise: NoiseModel = field(default_factory=lambda: NoiseModel(0.0))


def _test_segment(
    w: Weighted,
    a: int,
    b: int,
    cfg: DetectConfig,
    rng: np.random.Generator,
    noise: NoiseModel | None = None,
) -> Split | None:
    if b - a < 2 * cfg.min_size:
        return None
    u, v = w.u[a:b], w.v[a:b]
    g = gain_curve(u, v, w.binary, cfg.min_size)
    s = int(np.argmax(g))
    if not np.isfinite(g[s]):
        return None
    if noise is not None and noise.correlated:
        null = simulated_maxima(w, a, b, noise, cfg, rng)
    else:
        null = permutation_maxima(u, v, w.binary, cfg.min_size, cfg.n_perm, rng)
    penalty = float(np.quantile(null, 1.0 - cfg.alpha, method="higher"))
    p_value = float((1 + np.sum(null >= g[s])) / (cfg.n_perm + 1))
    if g[s] <= penalty:
        return None
    return Split(a + s, float(g[s]), penalty, p_value)


_MAX_REFINEMENTS = 10  # each re-test draws a fresh null, so near-penalty splits can flicker


def binary_segmentation(
    w: Weighted, cfg: DetectConfig, rng: np.random.Generator, noise: NoiseModel | None = None
) -> list[Split]:
    """Greedy search; then each split is re-placed and re-tested between its neighbours
    (the usual refinement, which drops splits that only helped an earlier wrong one).
    The null is the permutation one, or simulation from `noise` when it is correlated."""
    found: list[Split] = []
    stack = [(0, len(w.u))]
    while stack and len(found) < cfg.max_changes:
        a, b = stack.pop()
        split = _test_segment(w, a, b, cfg, rng, noise)
        if split is not None:
            found.append(split)
            stack += [(a, split.index), (split.index, b)]
    changed, rounds = True, 0
    while changed and found and rounds < _MAX_REFINEMENTS:
        changed, rounds = False, rounds + 1
        found.sort(key=lambda s: s.index)
        bounds = [0, *[s.index for s in found], len(w.u)]
        refined: list[Split] = []
        for i in range(len(found)):
            split = _test_segment(w, bounds[i], bounds[i + 2], cfg, rng, noise)
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
    noise: NoiseModel | None = None,
) -> tuple[int, int, FloatArray, float]:
    """Confidence set of the change time: every split whose gain is within `threshold` of
    the best one, the threshold being the `level` quantile of that same deviance at the
    true time in a parametric bootstrap (the two fitted levels with the estimated noise:
    independent dispersion, or AR(1) wander when correlated). Returns the set's hull
    (series indices), the gain profile over [a, b) and the threshold."""
    m1, _ = _level(w, a, c)
    m2, _ = _level(w, c, b)
    mean = np.where(np.arange(a, b) < c, m1, m2)
    model = noise if noise is not None and noise.correlated else NoiseModel(w.tau2)
    u, v = simulate_weighted(_slice(w, a, b), mean, model, cfg.n_boot, rng)
    boot = gain_curve(u, v, w.binary, 1)
    deviance = boot.max(axis=1) - boot[:, c - a]
    threshold = float(np.quantile(deviance, cfg.level))
    profile = gain_curve(w.u[a:b], w.v[a:b], w.binary, 1)
    inside = np.flatnonzero(profile.max() - profile <= threshold)
    lo = a + int(inside.min()) if inside.size else c
    hi = a + int(inside.max()) if inside.size else c
    return min(lo, c), max(hi, c), profile, threshold


def detect(
    series: BucketSeries,
    cfg: DetectConfig | None = None,
    seed: int = 0,
    tau2: float | None = None,
    noise: NoiseModel | None = None,
) -> Detection:
    """Change points of `series` with their windows, effects and tests. The noise model
    is estimated from the series unless given (`tau2` alone: independent noise)."""
    cfg = cfg or DetectConfig()
    rng = np.random.default_rng(seed)
    if noise is None:
        noise = NoiseModel(tau2) if tau2 is not None else fit_noise(series, cfg, rng)
    w = weigh(series, noise.spread2)
    splits = binary_segmentation(w, cfg, rng, noise)
    bounds = [0, *[s.index for s in splits], len(series)]
    points = []
    for i, s in enumerate(splits):
        a, c, b = bounds[i], s.index, bounds[i + 2]
        m1, se1 = _level(w, a, c)
        m2, se2 = _level(w, c, b)
        lo, hi, profile, threshold = location_window(series, w, a, c, b, cfg, rng, noise)
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
    return Detection(points, w.tau2, w.unit_variance, levels, noise)
