"""Baselines that know sampling error: one-sided tests of "worse than the baseline".

A conformance run sees a handful of trials per combination x scenario, so an observed
pass rate, mean or p95 wobbles around the truth even when nothing changed. Comparing
the point estimate with the baseline (the rule this replaces) fails an unchanged
surface whose true pass rate is 0.9 in 26% / 32% / 38% / 42% of runs at 10 / 20 / 50
/ 100 trials. Here each baseline kind has its own one-sided test and returns a
p-value: the probability, were the surface no worse than its baseline (after the
tolerance), of evidence at least this bad. `holm` then decides which of a run's tests
are regressions while holding the chance that an unchanged run fails at `alpha`.

Which test, and why (false-regression rates measured by
`bench/conformance_false_regression.py`, written up in
`bench/CONFORMANCE_BASELINE_RESULTS.md`):

- pass rate: exact binomial lower tail. Exact at every n; the discreteness only makes
  it conservative.
- mean latency, cost or tokens: Student's one-sided t on the raw values. It tests the
  mean the baseline states (a t on logs would test the geometric mean; a sign test the
  median). For right-skewed data the sample mean and standard deviation rise together,
  so the upper tail of t is lighter than Student's: the test stays at or below alpha
  at small n (conservative; it loses power, never size).
- p95 latency: exceedances of the baseline p95. If the true p95 is at most the
  baseline, each trial exceeds it with probability at most 0.05, so the count is at
  most Binomial(n, 0.05): exact and distribution-free.
- standard deviation of latency: the log of the sample variance, studentized by its
  kurtosis-aware standard error, se^2 = (k - (n - 3) / n) / (n - 1), against
  Student's t with n - 1 degrees of freedom; k is the sample kurtosis about a trimmed
  mean (trim 1 / (2 sqrt(n - 4)), the median for n <= 4), after Bonett (2006,
  Comput. Stat. Data Anal. 50:775), less his small-sample constant c, so slightly more
  conservative. The chi-square variance test is exact only for normal data; on
  lognormal latency it fails unchanged surfaces at two to four times alpha. The
  studentized sample variance on the raw scale holds alpha too but, its own error
  skewed, has half the power on heavy tails.
- pass-rate variance across repetitions (rates in [0, 1], often on a coarse lattice of
  k / scenarios): the larger of the two studentized p-values (log and raw scale), as
  each alone overshoots alpha on some lattice; exact binomial when the rates take only
  two values (0/1 for one scenario, or rare failures of a stable surface), where both
  asymptotic forms fail.

Tolerance, one meaning per kind (matching the suite's `*Tolerance` fields): for a pass
rate and a pass-rate variance it is absolute (H0: rate >= baseline - tolerance;
variance <= baseline + tolerance); for mean, p95 and standard deviation it is relative
(H0: statistic <= baseline x (1 + tolerance)). A baseline of zero with no tolerance
is refuted by any value above it (p = 0), as "no spread" is by any spread.

Degenerate input: no trials or no values raise `ValueError` (missing evidence is the
caller's finding to report, never a silent pass); one value carries no evidence about
a mean or a spread and gives p = 1.0; values that are all equal give p = 0.0 if they
are above the limit and 1.0 otherwise for a mean, and 1.0 for a spread unless the
limit is zero. Each test also comes as `*_rows`, the same code over every row of a 2-D
array (one row, one run's values): the scalar form is that on one row, and the bench
draws thousands of runs at once through it. scipy is imported inside the functions so
that importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_ALPHA",
    "holm",
    "holm_rows",
    "mean_p",
    "mean_p_rows",
    "p95_p",
    "p95_p_rows",
    "pass_rate_p",
    "pass_rate_p_rows",
    "pass_variance_p",
    "pass_variance_p_rows",
    "sd_p",
    "sd_p_rows",
]

# The conventional 5%, and family-wise: with `holm` over every test of a run, a run of
# an unchanged suite fails at most one time in twenty. Lower alpha buys fewer false
# alarms with less power at the 10-20 trials a cell usually has (see the bench).
DEFAULT_ALPHA = 0.05

K = TypeVar("K", bound=Hashable)
Floats = npt.NDArray[np.float64]
_P95_EXCEEDANCE = 0.05


def pass_rate_p(passes: int, trials: int, baseline_rate: float, tolerance: float = 0.0) -> float:
    """P(X <= passes) for X ~ Binomial(trials, baseline_rate - tolerance): small when the
    true pass rate is significantly below the baseline less its (absolute) tolerance."""
    return float(pass_rate_p_rows([passes], trials, baseline_rate, tolerance)[0])


def pass_rate_p_rows(
    passes: npt.ArrayLike, trials: int, baseline_rate: float, tolerance: float = 0.0
) -> Floats:
    """`pass_rate_p` for each count of passes out of the same number of trials."""
    k = np.asarray(passes)
    if trials <= 0:
        raise ValueError(f"no trials to compare with the pass-rate baseline (trials={trials})")
    if k.ndim != 1 or np.any((k < 0) | (k > trials)):
        raise ValueError(f"passes must be between 0 and trials ({trials}), got {k.tolist()}")
    _check_fraction("baseline_rate", baseline_rate)
    _check_tolerance(tolerance)
    floor = baseline_rate - tolerance
    if floor <= 0:
        return np.ones(k.shape)
    from scipy.special import bdtr

    return np.where(k >= trials, 1.0, _clip(bdtr(k, trials, min(floor, 1.0))))


def mean_p(values: Sequence[float], baseline_mean: float, tolerance: float = 0.0) -> float:
    """One-sided Student's t of H1: mean > baseline_mean x (1 + tolerance), on the raw
    values (latency, cost, tokens); conservative for right-skewed data."""
    return float(mean_p_rows(_one_row(values), baseline_mean, tolerance)[0])


def mean_p_rows(values: npt.ArrayLike, baseline_mean: float, tolerance: float = 0.0) -> Floats:
    """`mean_p` for each row."""
    x = _rows(values, "mean")
    limit = _limit("baseline_mean", baseline_mean, tolerance)
    n = x.shape[1]
    if n == 1:
        return np.ones(x.shape[0])
    mean = x.mean(axis=1)
    constant = _constant(x)
    sd = np.where(constant, 1.0, x.std(axis=1, ddof=1))
    from scipy.special import stdtr

    p = stdtr(n - 1, -(mean - limit) / (sd / math.sqrt(n)))
    return np.where(constant, np.where(x[:, 0] > limit, 0.0, 1.0), _clip(p))


def p95_p(values: Sequence[float], baseline_p95: float, tolerance: float = 0.0) -> float:
    """P(Y >= k) for Y ~ Binomial(n, 0.05), k the values above baseline_p95 x (1 +
    tolerance): exact whatever the latency distribution."""
    return float(p95_p_rows(_one_row(values), baseline_p95, tolerance)[0])


def p95_p_rows(values: npt.ArrayLike, baseline_p95: float, tolerance: float = 0.0) -> Floats:
    """`p95_p` for each row."""
    x = _rows(values, "p95")
    limit = _limit("baseline_p95", baseline_p95, tolerance)
    above = np.count_nonzero(x > limit, axis=1)
    from scipy.special import bdtrc

    p = bdtrc(np.maximum(above - 1, 0), x.shape[1], _P95_EXCEEDANCE)
    return np.where(above == 0, 1.0, _clip(p))


def sd_p(values: Sequence[float], baseline_sd: float, tolerance: float = 0.0) -> float:
    """H1: standard deviation > baseline_sd x (1 + tolerance), by the studentized log
    sample variance (robust to skew and heavy tails, unlike the chi-square test)."""
    return float(sd_p_rows(_one_row(values), baseline_sd, tolerance)[0])


def sd_p_rows(values: npt.ArrayLike, baseline_sd: float, tolerance: float = 0.0) -> Floats:
    """`sd_p` for each row."""
    x = _rows(values, "standard deviation")
    limit = _limit("baseline_sd", baseline_sd, tolerance)
    return _variance_p(x, limit * limit)


def pass_variance_p(
    rates_by_repetition: Sequence[float], baseline_variance: float, tolerance: float = 0.0
) -> float:
    """H1: the variance of the per-repetition pass rates > baseline_variance + tolerance
    (absolute, in variance units): the larger p-value of the studentized log and raw
    sample variance; exact (binomial) when the rates take two values, as 0/1 for a
    single scenario's repetitions or rare failures of a stable surface."""
    return float(
        pass_variance_p_rows(_one_row(rates_by_repetition), baseline_variance, tolerance)[0]
    )


def pass_variance_p_rows(
    rates_by_repetition: npt.ArrayLike, baseline_variance: float, tolerance: float = 0.0
) -> Floats:
    """`pass_variance_p` for each row of per-repetition pass rates."""
    x = _rows(rates_by_repetition, "pass-rate variance")
    if np.any((x < 0) | (x > 1)):
        raise ValueError("pass rates by repetition must lie in [0, 1]")
    _check_nonnegative("baseline_variance", baseline_variance)
    _check_tolerance(tolerance)
    limit = baseline_variance + tolerance
    p = np.maximum(_variance_p(x, limit), _raw_variance_p(x, limit))
    low, high = x.min(axis=1), x.max(axis=1)
    two = np.all((x == low[:, None]) | (x == high[:, None]), axis=1) & (high > low)
    if not two.any():
        return p
    return np.where(two, _two_point_variance_p(x, low, high, limit), p)


def _two_point_variance_p(x: Floats, low: Floats, high: Floats, limit: float) -> Floats:
    """Exact for values on two points a < b (0/1 outcomes of one scenario; rare failures
    of a stable surface, where the asymptotic test overshoots alpha): the variance
    (b - a)^2 q (1 - q) exceeds `limit` only if the share q at b is nearer 1/2 than the
    roots of q (1 - q) = limit / (b - a)^2, so the p-value is P(a count at least as
    central as the observed one) at the nearer root (the supremum over H0: the binomial
    family has a monotone likelihood ratio). Conditional on the two points observed."""
    n = x.shape[1]
    gap = np.where(high > low, high - low, 1.0)
    scaled = np.minimum(limit / (gap * gap), 0.25)
    root = (1 - np.sqrt(1 - 4 * scaled)) / 2
    ones = np.count_nonzero(x == high[:, None], axis=1)
    fewer, more = np.minimum(ones, n - ones), np.maximum(ones, n - ones)
    from scipy.special import bdtr

    below = np.where(fewer > 0, bdtr(np.maximum(fewer - 1, 0), n, root), 0.0)
    central = np.where(scaled >= 0.25, 1.0, bdtr(more, n, root) - below)
    return np.where(limit == 0.0, 0.0, _clip(central))


def holm(pvalues: Mapping[K, float], alpha: float) -> set[K]:
    """Holm-Bonferroni step-down: the keys rejected at family-wise level alpha. Sorted
    ascending, the i-th smallest (from 0) is rejected while p <= alpha / (m - i); the
    first that is not stops the procedure."""
    keys = list(pvalues)
    for key in keys:
        if not 0 <= pvalues[key] <= 1:  # also rejects NaN
            raise ValueError(f"p-value of {key!r} must be in [0, 1], got {pvalues[key]}")
    if not keys:
        _check_alpha(alpha)
        return set()
    rejected = holm_rows([[pvalues[k] for k in keys]], alpha)[0]
    return {k for k, r in zip(keys, rejected, strict=True) if r}


def holm_rows(pvalues: npt.ArrayLike, alpha: float) -> npt.NDArray[np.bool_]:
    """`holm` for each row of a 2-D array of p-values (one row, one family): True where
    rejected."""
    _check_alpha(alpha)
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 2 or np.any(~((p >= 0) & (p <= 1))):
        raise ValueError("p-values must be a 2-D array of numbers in [0, 1]")
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    passed = np.logical_and.accumulate(ranked <= alpha / (m - np.arange(m)), axis=1)
    rejected = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(rejected, order, passed, axis=1)
    return rejected


def _variance_p(x: Floats, limit: float) -> Floats:
    """H1: variance > limit; log sample variance studentized (Bonett) against t(n - 1)."""
    rows, n = x.shape
    if n == 1:
        return np.ones(rows)
    constant = _constant(x)
    deviations = x - x.mean(axis=1, keepdims=True)
    ss = np.where(constant, 1.0, np.einsum("ij,ij->i", deviations, deviations))
    if limit == 0.0:
        return np.where(constant, 1.0, 0.0)
    if n > 4:
        trim = int(n / (2 * math.sqrt(n - 4)))
        centre = np.sort(x, axis=1)[:, trim : n - trim].mean(axis=1, keepdims=True)
    else:
        centre = np.median(x, axis=1, keepdims=True)
    squares = np.square(x - centre)
    fourth = np.where(constant, 1.0, np.einsum("ij,ij->i", squares, squares))
    kurtosis = n * fourth / (ss * ss)  # >= 1 > (n - 3) / n: sum (x - c)^4 >= ss^2 / n
    se = np.sqrt((kurtosis - (n - 3) / n) / (n - 1))
    from scipy.special import stdtr

    p = stdtr(n - 1, -(np.log(ss / (n - 1)) - math.log(limit)) / se)
    return np.where(constant, 1.0, _clip(p))


def _raw_variance_p(x: Floats, limit: float) -> Floats:
    """H1: variance > limit; the sample variance studentized on the raw scale,
    se^2 = (m4 - s^4 (n - 3) / (n - 1)) / n, against t(n - 1). Coarse rates need it
    beside the log form: each alone overshoots alpha on some lattice, together they
    do not (bench)."""
    rows, n = x.shape
    if n == 1:
        return np.ones(rows)
    constant = _constant(x)
    if limit == 0.0:
        return np.where(constant, 1.0, 0.0)
    deviations = x - x.mean(axis=1, keepdims=True)
    squares = np.square(deviations)
    s2 = squares.sum(axis=1) / (n - 1)
    m4 = np.einsum("ij,ij->i", squares, squares) / n
    se = np.sqrt(np.where(constant, 1.0, m4 - s2 * s2 * (n - 3) / (n - 1)) / n)  # > 0
    from scipy.special import stdtr

    return np.where(constant, 1.0, _clip(stdtr(n - 1, -(s2 - limit) / se)))


def _one_row(values: Sequence[float]) -> Floats:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values for a baseline must be a flat sequence of numbers")
    return x.reshape(1, -1)


def _rows(values: npt.ArrayLike, kind: str) -> Floats:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"values for the {kind} baseline must be one row of values per run")
    if x.shape[1] == 0:
        raise ValueError(f"no values to compare with the {kind} baseline")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"values for the {kind} baseline must be finite numbers")
    return x


def _constant(x: Floats) -> npt.NDArray[np.bool_]:
    """Rows whose values are all equal (tested exactly: a mean's rounding must not read
    as a spread)."""
    return np.asarray(np.all(x == x[:, :1], axis=1))


def _limit(name: str, baseline: float, tolerance: float) -> float:
    _check_nonnegative(name, baseline)
    _check_tolerance(tolerance)
    return baseline * (1 + tolerance)


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def _check_fraction(name: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def _check_nonnegative(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def _check_tolerance(tolerance: float) -> None:
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")


def _clip(p: npt.ArrayLike) -> Floats:
    return np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
