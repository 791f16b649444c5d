"""Corroboration of a silent vendor change: did the other surfaces served under the same
model alias shift in the same direction, at the same time, beyond their own noise?

Each sibling's noise is modelled on its own whole series (`changepoint.estimate_noise`:
sampling noise plus AR(1) wander), after its cycle (hour of day in hour buckets, day of
week in day buckets) is taken out: surfaces on one alias share their users' day, so a
cycle would otherwise step every sibling the same way at the same hour. Its shift across
the change window is the generalised-least-squares step estimate under that covariance,
tested one-sided in the direction of the change (Student's t on the fit's residual
degrees of freedom: the noise model came from the same few points); Bonferroni over the
surfaces checked. Independently wandering siblings move by their wander's amount at any
time, and in either direction: the covariance makes the first count, the direction the
second. A vendor change moves every surface behind the alias, so it takes two siblings
to corroborate (the only one, when there is one): one sibling's tail event is not enough.

A fitted noise model can still understate the noise (a month holds few memory lengths
of slow wander, a day-bucket month only 30 points), so each z is also set against the
same test at placebo windows of the sibling's own series, with the tested step taken
out: when those vary more than a standard normal, the z is shrunk by their spread.

On a multiplexed surface the best control is on the primary's own calls: the observers
answered the very same inputs. The paired within-call contrast (per call, the primary's
outcome less its observers') is stepped across the change window by the same test:
a primary shift the observers on the same calls do not share is evidence that the
primary's vendor moved, and one they share is evidence that the inputs did
(`observer_control`, `schemas.analysis.ObserverControl`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from processors.drift.attribution import Corroborate
from processors.series import changepoint as cp
from processors.series.cells import PairedCalls, SeriesQuery, fetch_alias_series
from processors.series.cycle import PERIODS, fit_cycle, rates_without
from processors.special import ufuncs
from schemas.analysis import Corroboration, ObserverControl, ObserverVerdict
from schemas.store import Store

PLACEBOS = 60  # placebo windows (at most) a sibling's z is calibrated on
MIN_PLACEBOS = 8
NEEDED = 2  # corroborating siblings a silent-vendor label needs (fewer when fewer checked)


@dataclass(frozen=True)
class CorroborationConfig:
    seed: int = 0
    neighbourhood: int = 72  # buckets each side of the change read on the other surfaces
    slack: int = 2  # buckets either side of the change window left out as ambiguous
    min_segment: int = 3
    permutations: int = 999  # kept for the run's parameters; the test is analytic now
    level: float = 0.01  # family-wise, Bonferroni over the surfaces checked


@dataclass(frozen=True)
class Sibling:
    n: np.ndarray
    x: np.ndarray  # pass rate per grid row, cycle removed (0 where a bucket is empty)
    unit: float | None = None  # per-event variance; None: a pass rate's p(1 - p)


@dataclass(frozen=True)
class SiblingNoise:
    model: cp.NoiseModel
    unit: float  # per-event variance


def alias_corroborator(store: Store, query: SeriesQuery, cfg: CorroborationConfig) -> Corroborate:
    """A check, per change window, that other surfaces served under the same model alias
    stepped the same way across it beyond their own autocorrelated noise."""
    cache: dict[str, dict[str, Sibling]] = {}
    period = PERIODS.get(query.bucket, 0)

    def check(alias: str, lo: int, hi: int, delta: float) -> Corroboration | None:
        if not alias:
            return None
        if alias not in cache:
            cache[alias] = {
                surface: sibling(n, k, period)
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
            alias=alias,
            surfaces_checked=checked,
            corroborating_surfaces=hits,
            p_values=p_values,
            required=min(NEEDED, len(checked)),
        )

    return check


def without_cycle(n: np.ndarray, k: np.ndarray, period: int) -> np.ndarray:
    """Pass rates per grid row less their cycle (`series.cycle`)."""
    return rates_without(fit_cycle(n, k, period), n, k)


def sibling(n: np.ndarray, k: np.ndarray, period: int = 0, unit: float | None = None) -> Sibling:
    """A sibling surface's series on the grid, its cycle removed (`k`: outcome sums;
    `unit`: the per-event variance when the outcome is not a pass/fail)."""
    return Sibling(n, without_cycle(n, k, period), unit)


def noise_of(n: np.ndarray, x: np.ndarray, unit_variance: float | None = None) -> SiblingNoise:
    """The noise model of a sibling's buckets with events: AR(1) wander when its memory
    is resolved, else independent with the deviations' whole variance."""
    present = n > 0
    if present.sum() < 3:
        return SiblingNoise(cp.NoiseModel(0.0), 0.25 if unit_variance is None else unit_variance)
    series = cp.BucketSeries(n[present], x[present] * n[present])
    unit = cp.within_variance(series) if unit_variance is None else unit_variance
    noise = cp.estimate_noise(series, unit)
    if not noise.correlated:  # memory unresolved (or none): take the whole variance
        noise = cp.NoiseModel(cp.marginal_spread2(series, unit))
    return SiblingNoise(noise, unit)


def step_p_value(
    sib: Sibling, lo: int, hi: int, delta: float, cfg: CorroborationConfig
) -> float | None:
    """One-sided p-value that the sibling stepped in `delta`'s direction across the
    window [lo, hi] (grid rows). Its noise is modelled with the step taken out (a real
    step read as wander would hide itself), and its z shrunk by the placebo windows'
    spread (`placebo_scale`). None when there is too little data to say."""
    tested = step_test(sib, lo, hi, cfg)
    if tested is None:
        return None
    return tested.p_value(delta)


@dataclass(frozen=True)
class Step:
    """A series' step across a change window: estimate, calibrated standard error (the
    GLS one times the placebo scale) and the t test's degrees of freedom."""

    step: float
    se: float
    dof: int

    def p_value(self, delta: float) -> float:
        """One-sided, in `delta`'s direction."""
        special = ufuncs()  # scipy.stats.t's own function; importing stats costs seconds

        z = self.step / self.se
        return float(special.stdtr(self.dof, -(z if delta >= 0 else -z)))  # t survival

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        special = ufuncs()

        half = float(special.stdtrit(self.dof, 0.5 + level / 2)) * self.se
        return self.step - half, self.step + half


def step_test(sib: Sibling, lo: int, hi: int, cfg: CorroborationConfig) -> Step | None:
    """The step of `sib` across [lo, hi] (`step_p_value`), None when too thin."""
    sides = _sides(sib.n, lo, hi, cfg)
    if sides is None:
        return None
    after = np.arange(len(sib.n)) > hi
    rough = _mean(sib, sides[1]) - _mean(sib, sides[0])
    noise = noise_of(sib.n, sib.x - rough * after, sib.unit)
    step, se, dof = gls_step(sib, sib.x, noise, sides, hi)
    scale = placebo_scale(sib, sib.x - step * after, noise, lo, hi, cfg)
    return Step(step, se * scale, dof)


def _sides(
    n: np.ndarray, lo: int, hi: int, cfg: CorroborationConfig
) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows with events in the `neighbourhood` each side of [lo, hi] (the window and
    `slack` around it left out); None when either side is too thin."""
    length = len(n)
    before = np.arange(max(0, lo - cfg.slack - cfg.neighbourhood), max(0, lo - cfg.slack))
    after = np.arange(
        min(length, hi + 1 + cfg.slack), min(length, hi + 1 + cfg.slack + cfg.neighbourhood)
    )
    before, after = before[n[before] > 0], after[n[after] > 0]
    m = cfg.min_segment
    if before.size < m or after.size < m or n[before].sum() < 20 * m or n[after].sum() < 20 * m:
        return None
    return before, after


def _mean(sib: Sibling, rows: np.ndarray) -> float:
    return float(np.sum(sib.x[rows] * sib.n[rows]) / np.sum(sib.n[rows]))


def gls_step(
    sib: Sibling, x: np.ndarray, noise: SiblingNoise, sides: tuple[np.ndarray, np.ndarray], hi: int
) -> tuple[float, float, int]:
    """Step of `x` from the rows before to the rows after, its standard error and the
    residual degrees of freedom: GLS fit of level + step with covariance
    diag(sampling) + spread^2 rho^|i-j|."""
    rows = np.concatenate(sides)
    model = noise.model
    lag = np.abs(rows[:, None] - rows[None, :]).astype(np.float64)
    cov = model.spread2 * model.rho**lag if model.correlated else np.zeros_like(lag)
    if not model.correlated:
        cov[np.diag_indices_from(cov)] = model.spread2
    cov[np.diag_indices_from(cov)] += noise.unit / sib.n[rows]
    design = np.column_stack([np.ones(rows.size), (rows > hi).astype(np.float64)])
    solved = np.linalg.solve(cov, np.column_stack([design, x[rows]]))
    info = design.T @ solved[:, :2]
    beta = np.linalg.solve(info, design.T @ solved[:, 2])
    return float(beta[1]), float(np.sqrt(np.linalg.inv(info)[1, 1])), rows.size - 2


def placebo_scale(
    sib: Sibling, x: np.ndarray, noise: SiblingNoise, lo: int, hi: int, cfg: CorroborationConfig
) -> float:
    """How much more than a standard normal the step z of `x` (the series with the
    tested step taken out, so a real step does not inflate its own yardstick) varies at
    windows of the same width elsewhere: sqrt(median z^2 / median chi^2_1), at least 1.
    Windows near the tested one are left out; 1 when too few remain."""
    width, guard = hi - lo, cfg.slack + cfg.min_segment
    first, last = cfg.min_segment + cfg.slack, len(sib.n) - cfg.min_segment - cfg.slack - width
    starts = np.arange(first, max(first, last))
    starts = starts[(starts + width < lo - guard) | (starts > hi + guard)]
    if starts.size > PLACEBOS:
        starts = starts[np.linspace(0, starts.size - 1, PLACEBOS).round().astype(int)]
    z2 = []
    for q in starts:
        sides = _sides(sib.n, int(q), int(q) + width, cfg)
        if sides is not None:
            step, se, _ = gls_step(sib, x, noise, sides, int(q) + width)
            z2.append((step / se) ** 2)
    if len(z2) < MIN_PLACEBOS:
        return 1.0
    return max(1.0, float(np.sqrt(np.median(z2) / cp.MEDIAN_CHI2_1)))


OBSERVERS_UNCHANGED = 0.05  # the observers "did not move" when their step is not significant here
CARRIES = 0.5  # the within-call contrast must carry at least this share of the shift


def observer_control(
    calls: PairedCalls, observers: list[str], cfg: CorroborationConfig, period: int = 0
) -> Callable[[int, int, float], ObserverControl | None]:
    """A test, per change window [lo, hi] of the primary series, of the paired
    within-call contrast: the primary's outcome less its observers' on the same calls,
    stepped across the window like a sibling (GLS on its own AR(1) noise, its z set
    against placebo windows), and the observers' own step. The verdict (vendor /
    shared / inconclusive) is `ObserverControl`'s; None when either side of the window
    holds too few paired calls."""
    n = calls.n
    contrast = sibling(n, calls.d, period, PairedCalls.unit_variance(n, calls.d, calls.dd))
    observed = sibling(n, calls.o, period, PairedCalls.unit_variance(n, calls.o, calls.oo))
    primary = sibling(n, calls.p, period, PairedCalls.unit_variance(n, calls.p, calls.pp))

    def check(lo: int, hi: int, delta: float) -> ObserverControl | None:
        sides = _sides(n, lo, hi, cfg)
        steps = [step_test(s, lo, hi, cfg) for s in (contrast, observed, primary)]
        if sides is None or any(s is None for s in steps):
            return None
        d, o, p = (s for s in steps if s is not None)
        p_contrast, p_observer = d.p_value(delta), o.p_value(delta)
        carries = np.sign(d.step) == np.sign(delta) and abs(d.step) >= CARRIES * abs(delta)
        verdict: ObserverVerdict = "inconclusive"
        if p_contrast <= cfg.level and carries and p_observer > OBSERVERS_UNCHANGED:
            verdict = "vendor"
        elif p_observer <= cfg.level and not carries:
            verdict = "shared"
        low, high = d.interval()
        return ObserverControl(
            observers=observers,
            calls_before=int(n[sides[0]].sum()),
            calls_after=int(n[sides[1]].sum()),
            primary_step=p.step,
            observer_step=o.step,
            contrast=d.step,
            contrast_ci_low=low,
            contrast_ci_high=high,
            contrast_p_value=p_contrast,
            observer_p_value=p_observer,
            level=cfg.level,
            verdict=verdict,
        )

    return check


def with_observers(
    corroborate: Corroborate, control: Callable[[int, int, float], ObserverControl | None]
) -> Corroborate:
    """`corroborate` (the siblings behind the alias) with the observer control added to
    its evidence; the silent-vendor decision reads both (`Corroboration.corroborated`)."""

    def check(alias: str, lo: int, hi: int, delta: float) -> Corroboration | None:
        found = corroborate(alias, lo, hi, delta)
        observed = control(lo, hi, delta)
        if observed is None:
            return found
        if found is None:
            found = Corroboration(
                alias=alias,
                surfaces_checked=[],
                corroborating_surfaces=[],
                p_values={},
                required=0,
            )
        return found.model_copy(update={"observers": observed})

    return check
