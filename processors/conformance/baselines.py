"""Baseline comparisons per combination x scenario cell, one test per baseline kind.

Kinds: `pass-rate` (below the baseline), `latency-mean`, `latency-p95`, `latency-sd`,
`pass-rate-variance`, `tokens-mean`, `cost-mean` (above it). Each compares the
cell's reduction with the baseline and its tolerance (absolute for the pass rate and
its variance, relative for the others). A baseline whose kind the cell has no data for
(no latency recorded, one repetition for a spread) regresses too: missing evidence
never passes a gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.harness import Baseline, Scenario

if TYPE_CHECKING:
    from processors.conformance.result import Reductions

KINDS = (
    "pass-rate",
    "latency-mean",
    "latency-p95",
    "latency-sd",
    "pass-rate-variance",
    "tokens-mean",
    "cost-mean",
)


@dataclass(frozen=True)
class Regression:
    combination_id: str
    scenario_id: str
    kind: str
    baseline_revision: int
    observed: float | None
    baseline: float
    limit: float
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "combinationId": self.combination_id,
            "scenarioId": self.scenario_id,
            "kind": self.kind,
            "baselineRevision": self.baseline_revision,
            "observed": self.observed,
            "baseline": self.baseline,
            "limit": self.limit,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class _Test:
    kind: str
    what: str
    unit: str
    observed: float | None
    baseline: float
    limit: float
    below: bool  # a regression is the observed value below the limit (the pass rate)


def _tests(b: Baseline, r: Reductions) -> list[_Test]:
    t: list[_Test] = []
    if b.pass_rate is not None:
        t.append(
            _Test(
                "pass-rate",
                "pass rate",
                "",
                r.pass_rate,
                b.pass_rate,
                b.pass_rate - b.pass_rate_tolerance,
                True,
            )
        )
    ms, lat = " ms", b.latency_tolerance
    relative = (
        ("latency-mean", "mean latency", ms, r.mean_latency_ms, b.mean_latency_ms, lat),
        ("latency-p95", "p95 latency", ms, r.p95_latency_ms, b.p95_latency_ms, lat),
        ("latency-sd", "latency sd", " ms", r.latency_sd_ms, b.latency_sd_ms, b.variance_tolerance),
        ("tokens-mean", "mean tokens", "", _mean(r.tokens), b.mean_tokens, b.token_tolerance),
        ("cost-mean", "mean cost", " USD", _mean(r.costs), b.mean_cost_usd, b.cost_tolerance),
    )  # fmt: skip
    for kind, what, unit, observed, base, tolerance in relative:
        if base is not None:
            t.append(_Test(kind, what, unit, observed, base, base * (1 + tolerance), False))
    if b.pass_rate_variance is not None:
        t.append(_Test("pass-rate-variance", "pass-rate variance", "", r.pass_rate_variance,
                       b.pass_rate_variance,
                       b.pass_rate_variance + b.pass_rate_variance_tolerance, False))  # fmt: skip
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(t, key=lambda x: order[x.kind])


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cell_regressions(
    baselines: Sequence[Baseline], cells: Sequence[tuple[str, Scenario, Reductions]]
) -> list[Regression]:
    """Every regression of every cell a baseline covers, in cell then kind order."""
    found: list[Regression] = []
    for combination_id, scenario, reductions in cells:
        if not reductions.trials:
            continue  # nothing ran: the cell already fails for missing evidence
        covering = [b for b in baselines if b.covers(combination_id, scenario)]
        for b in covering:
            for t in _tests(b, reductions):
                where = (
                    f"{combination_id} x {scenario.scenario_id} (baseline revision {b.revision})"
                )
                if t.observed is None:
                    reason = f"{where}: no {t.what} to compare with the baseline"
                elif t.below and t.observed < t.limit - 1e-12:
                    reason = (
                        f"{where}: {t.what} {t.observed:.4g} below baseline {t.baseline:.4g}"
                        f" (limit {t.limit:.4g})"
                    )
                elif not t.below and t.observed > t.limit + 1e-12:
                    reason = (
                        f"{where}: {t.what} {t.observed:.6g}{t.unit} above baseline"
                        f" {t.baseline:.6g}{t.unit} (limit {t.limit:.6g}{t.unit})"
                    )
                else:
                    continue
                found.append(
                    Regression(combination_id, scenario.scenario_id, t.kind, b.revision,
                               t.observed, t.baseline, t.limit, reason)
                )  # fmt: skip
    return found
