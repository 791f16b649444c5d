"""Baseline regressions that know sampling error, per combination x scenario cell.

Every baseline kind a cell's baseline names is one one-sided test of "worse than the
baseline" (`processors.conformance.significance`): `pass-rate` (exact binomial),
`latency-mean`, `tokens-mean`, `cost-mean` (Student's t), `latency-p95` (exceedances,
exact binomial), `latency-sd` (studentized log variance) and `pass-rate-variance`
(exact binomial on the 0/1 passes of a cell's repetitions). The tolerance is
honoured inside each test: absolute for the pass rate and its variance (H0: rate >=
baseline - tolerance), relative for the others (H0: statistic <= baseline x (1 +
tolerance)). A regression is a test Holm rejects across every test of
the run at the suite's `alpha` (default `DEFAULT_ALPHA`, 0.05), so an unchanged suite
fails at most one run in twenty however many cells it has. A baseline the cell has no
values for (no latency recorded, say) regresses without a test: missing evidence
never passes a gate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from processors.conformance.reduce import Reductions
from processors.conformance.significance import (
    DEFAULT_ALPHA,
    holm,
    mean_p,
    p95_p,
    pass_rate_p,
    pass_variance_p,
    sd_p,
)
from schemas.harness import Baseline, Scenario, Suite

KINDS = (
    "pass-rate",
    "latency-mean",
    "latency-p95",
    "latency-sd",
    "pass-rate-variance",
    "tokens-mean",
    "cost-mean",
)


def suite_alpha(suite: Suite) -> float:
    return suite.alpha if suite.alpha is not None else DEFAULT_ALPHA


@dataclass(frozen=True)
class Regression:
    combination_id: str
    scenario_id: str
    kind: str
    baseline_revision: int
    observed: float | None
    baseline: float
    tolerance: float
    p_value: float | None  # None: no values to test (missing evidence)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "combinationId": self.combination_id,
            "scenarioId": self.scenario_id,
            "kind": self.kind,
            "baselineRevision": self.baseline_revision,
            "observed": self.observed,
            "baseline": self.baseline,
            "tolerance": self.tolerance,
            "pValue": self.p_value,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class _Test:
    kind: str
    what: str
    observed: float | None
    baseline: float
    tolerance: float
    run: Callable[[], float]


def _tests(b: Baseline, r: Reductions) -> list[_Test]:
    """One test per kind the baseline names; `run` gives its p-value (ValueError: no
    values to test)."""
    lat, tok, cost = list(r.latencies), list(r.tokens), list(r.costs)
    specs = (
        ("pass-rate", "pass rate", r.pass_rate, b.pass_rate, b.pass_rate_tolerance,
         lambda base, tol: pass_rate_p(r.passes, r.trials, base, tol)),
        ("latency-mean", "mean latency (ms)", r.mean_latency_ms, b.mean_latency_ms,
         b.latency_tolerance, lambda base, tol: mean_p(lat, base, tol)),
        ("latency-p95", "p95 latency (ms)", r.p95_latency_ms, b.p95_latency_ms,
         b.latency_tolerance, lambda base, tol: p95_p(lat, base, tol)),
        ("latency-sd", "latency sd (ms)", r.latency_sd_ms, b.latency_sd_ms, b.variance_tolerance,
         lambda base, tol: sd_p(lat, base, tol)),
        ("pass-rate-variance", "pass-rate variance", r.pass_rate_variance, b.pass_rate_variance,
         b.pass_rate_variance_tolerance,
         lambda base, tol: pass_variance_p(list(r.pass_values), base, tol)),
        ("tokens-mean", "mean tokens", r.mean_tokens, b.mean_tokens, b.token_tolerance,
         lambda base, tol: mean_p(tok, base, tol)),
        ("cost-mean", "mean cost (USD)", r.mean_cost_usd, b.mean_cost_usd, b.cost_tolerance,
         lambda base, tol: mean_p(cost, base, tol)),
    )  # fmt: skip
    return [
        _Test(kind, what, observed, base, tol, partial(test, base, tol))
        for kind, what, observed, base, tol, test in specs
        if base is not None
    ]


@dataclass(frozen=True)
class Unit:
    """What one baseline is compared with: a combination x scenario cell, or (a suite
    without combinations, `combination_id` empty) a surface's trials together."""

    combination_id: str
    scenario_id: str
    baseline: Baseline
    reductions: Reductions

    @property
    def where(self) -> str:
        cell = (
            f"{self.combination_id} x {self.scenario_id}"
            if self.combination_id
            else self.scenario_id
        )
        return f"{cell} (baseline revision {self.baseline.revision})"


def cell_regressions(
    baselines: Sequence[Baseline],
    cells: Sequence[tuple[str, Scenario, Reductions]],
    alpha: float | None = None,
) -> list[Regression]:
    """Every regression of a run with combinations, in cell then kind order. A cell
    where nothing ran is not tested: it already fails for missing evidence."""
    units = [
        Unit(combination_id, scenario.scenario_id, b, reductions)
        for combination_id, scenario, reductions in cells
        if reductions.trials
        for b in baselines
        if b.covers(combination_id, scenario)
    ]
    return regressions(units, alpha)


def regressions(units: Sequence[Unit], alpha: float | None = None) -> list[Regression]:
    """Each unit's tests, Holm across all of them at `alpha` (default DEFAULT_ALPHA)."""
    level = alpha if alpha is not None else DEFAULT_ALPHA
    tested: dict[tuple[int, str], tuple[Unit, _Test, float]] = {}
    found: dict[tuple[int, str], Regression] = {}
    for i, unit in enumerate(units):
        for t in _tests(unit.baseline, unit.reductions):
            try:
                tested[(i, t.kind)] = (unit, t, t.run())
            except ValueError:
                found[(i, t.kind)] = Regression(
                    unit.combination_id, unit.scenario_id, t.kind, unit.baseline.revision, None,
                    t.baseline, t.tolerance, None,
                    f"{unit.where}: no {t.what} to compare with the baseline",
                )  # fmt: skip
    for key in holm({key: found[2] for key, found in tested.items()}, level):
        unit, t, p = tested[key]
        direction = "below" if t.kind == "pass-rate" else "above"
        found[key] = Regression(
            unit.combination_id, unit.scenario_id, t.kind, unit.baseline.revision, t.observed,
            t.baseline, t.tolerance, p,
            f"{unit.where}: {t.what} {_show(t.observed)} significantly {direction} baseline"
            f" {t.baseline:.6g} (tolerance {t.tolerance:g}, p = {p:.3g}, Holm at alpha {level:g})",
        )  # fmt: skip
    order = {k: n for n, k in enumerate(KINDS)}
    return [found[k] for k in sorted(found, key=lambda k: (k[0], order[k[1]]))]


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"
