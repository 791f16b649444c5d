"""The daily / weekly cycle taken out of a series: its profile, what it keeps, and
when it is not estimated."""

from __future__ import annotations

import numpy as np

from processors.series.cycle import MIN_CYCLES, fit_cycle, rates_without, sums_without


def _cycled(
    rng: np.random.Generator, hours: int = 720, step_at: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    n = rng.integers(100, 301, hours).astype(float)
    t = np.arange(hours)
    p = 0.8 + 0.05 * np.sin(2 * np.pi * (t % 24) / 24)
    if step_at is not None:
        p = p - 0.06 * (t >= step_at)
    return n, rng.binomial(n.astype(int), p).astype(float)


def test_the_profile_is_the_cycle_and_the_rates_lose_it() -> None:
    n, y = _cycled(np.random.default_rng(1))
    cycle = fit_cycle(n, y, 24)
    assert cycle is not None and cycle.period == 24
    assert abs(cycle.peak_to_trough - 0.10) < 0.02  # extremes of 24 noisy phase means
    x = rates_without(cycle, n, y)
    by_phase = [np.average(x[h::24], weights=n[h::24]) for h in range(24)]
    assert max(by_phase) - min(by_phase) < 0.005
    assert abs(np.average(x, weights=n) - y.sum() / n.sum()) < 1e-9  # the level is kept


def test_a_step_survives_the_cycle_removal() -> None:
    n, y = _cycled(np.random.default_rng(2), step_at=400)
    x = rates_without(fit_cycle(n, y, 24), n, y)
    step = np.average(x[400:], weights=n[400:]) - np.average(x[:400], weights=n[:400])
    assert abs(step + 0.06) < 0.006


def test_too_few_cycles_or_no_events_remove_nothing() -> None:
    n, y = _cycled(np.random.default_rng(3), hours=24 * MIN_CYCLES - 1)
    assert fit_cycle(n, y, 24) is None
    assert np.array_equal(rates_without(None, n, y), y / n)
    assert fit_cycle(np.zeros(720), np.zeros(720), 24) is None
    assert fit_cycle(n, y, 1) is None


def test_empty_buckets_stay_empty_and_do_not_bend_the_profile() -> None:
    n, y = _cycled(np.random.default_rng(4))
    n[3::24], y[3::24] = 0.0, 0.0  # nothing ever at 03:00
    cycle = fit_cycle(n, y, 24)
    assert cycle is not None
    assert np.all(cycle.offsets[3::24] == 0.0)
    assert np.all(rates_without(cycle, n, y)[3::24] == 0.0)


def test_scores_shift_event_by_event() -> None:
    rng = np.random.default_rng(5)
    n = rng.integers(5, 20, 240).astype(float)
    scores = [
        rng.normal(3 + np.sin(2 * np.pi * (t % 24) / 24), 0.5, int(k)) for t, k in enumerate(n)
    ]
    y = np.array([s.sum() for s in scores])
    yy = np.array([(s**2).sum() for s in scores])
    cycle = fit_cycle(n, y, 24)
    assert cycle is not None
    y2, yy2 = sums_without(cycle, n, y, yy)
    shifted = [s - c for s, c in zip(scores, cycle.offsets, strict=True)]
    assert np.allclose(y2, [s.sum() for s in shifted])
    assert np.allclose(yy2, [(s**2).sum() for s in shifted])
