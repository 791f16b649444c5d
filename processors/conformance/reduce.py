"""Reductions of a set of trials, shared by the harness cells and the surface baselines
of suites without combinations: pass rate and its variance across repetitions, latency
mean, nearest-rank p95 and sample standard deviation, token and cost totals and means,
retries."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def p95(values: Sequence[float]) -> float | None:
    """Nearest-rank 95th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


@dataclass(frozen=True)
class Reductions:
    trials: int
    passes: int
    pass_values: tuple[float, ...]  # each repetition's pass (1.0) or not (0.0)
    latencies: tuple[float, ...]
    tokens: tuple[float, ...]
    costs: tuple[float, ...]
    retries: int = 0
    missing: int = 0
    failure_classes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        passes: Sequence[float],
        latencies: Sequence[float],
        tokens: Sequence[float],
        costs: Sequence[float],
        *,
        retries: int = 0,
        missing: int = 0,
        failure_classes: dict[str, int] | None = None,
    ) -> Reductions:
        return cls(len(passes), int(sum(passes)), tuple(passes), tuple(latencies), tuple(tokens),
                   tuple(costs), retries, missing, failure_classes or {})  # fmt: skip

    @property
    def pass_rate(self) -> float | None:
        return _mean(self.pass_values)

    @property
    def pass_rate_variance(self) -> float | None:
        return statistics.variance(self.pass_values) if self.trials > 1 else None

    @property
    def mean_latency_ms(self) -> float | None:
        return _mean(self.latencies)

    @property
    def p95_latency_ms(self) -> float | None:
        return p95(self.latencies)

    @property
    def latency_sd_ms(self) -> float | None:
        return statistics.stdev(self.latencies) if len(self.latencies) > 1 else None

    @property
    def mean_tokens(self) -> float | None:
        return _mean(self.tokens)

    @property
    def mean_cost_usd(self) -> float | None:
        return _mean(self.costs)

    def to_json(self) -> dict[str, Any]:
        return {
            "trialsRun": self.trials,
            "passes": self.passes,
            "missing": self.missing,
            "passRate": self.pass_rate,
            "passRateVariance": self.pass_rate_variance,
            "latency": {
                "meanMs": self.mean_latency_ms,
                "p95Ms": self.p95_latency_ms,
                "sdMs": self.latency_sd_ms,
            },
            "tokens": {"total": sum(self.tokens) if self.tokens else None,
                       "mean": self.mean_tokens},
            "costUsd": {"total": math.fsum(self.costs) if self.costs else None,
                        "mean": self.mean_cost_usd},
            "retries": {"total": self.retries,
                        "mean": self.retries / self.trials if self.trials else None},
            "failureClasses": self.failure_classes,
        }  # fmt: skip
