"""The daily (hour buckets) or weekly (day buckets) cycle of an outcome series.

Traffic follows its users' day, and neither the detector's null (exchangeable buckets,
or AR(1) wander) nor a sibling's step test models a cycle: left in, a cycle's fall from
peak to trough reads as a step, on every surface behind an alias at the same hour. So
each takes the cycle out first: a bucket's rate less its phase's mean deviation (phase =
grid row mod the period). A level shift moves every phase alike and stays. The profile
is estimated only from a series spanning `MIN_CYCLES` cycles; from fewer it would soak
up noise (a month of day buckets holds four weeks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERIODS = {"hour": 24, "day": 7}  # buckets per cycle: a day of hours, a week of days
MIN_CYCLES = 8


@dataclass(frozen=True)
class Cycle:
    period: int  # buckets per cycle
    offsets: np.ndarray  # per grid row: its phase's mean deviation (0 on empty rows)

    @property
    def peak_to_trough(self) -> float:
        profile = self.offsets[: self.period]
        return float(profile.max() - profile.min())


def fit_cycle(n: np.ndarray, y: np.ndarray, period: int) -> Cycle | None:
    """The phase profile of `y / n` on the grid (`n` events and `y` outcome sums per
    row), or None when the series is too short or has no events."""
    if period < 2 or len(n) < MIN_CYCLES * period or n.sum() <= 0:
        return None
    phase = np.arange(len(n)) % period
    events = np.bincount(phase, weights=n, minlength=period)
    sums = np.bincount(phase, weights=y, minlength=period)
    profile = np.divide(sums, events, out=np.zeros(period), where=events > 0)
    profile = np.where(events > 0, profile - y.sum() / n.sum(), 0.0)
    return Cycle(period, profile[phase])


def rates_without(cycle: Cycle | None, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rates per grid row less the cycle (0 where a row is empty)."""
    x: np.ndarray = np.divide(y, n, out=np.zeros(len(n)), where=n > 0)
    if cycle is None:
        return x
    return np.where(n > 0, x - cycle.offsets, 0.0)


def sums_without(
    cycle: Cycle, n: np.ndarray, y: np.ndarray, yy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Outcome sums and sums of squares per grid row with every event's outcome less
    its row's offset: y - n c and yy - 2 c y + n c^2."""
    c = cycle.offsets
    return y - n * c, yy - 2.0 * c * y + n * c * c
