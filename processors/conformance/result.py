"""`harness-conformance-result/v1`: trials, per combination x scenario reductions,
capability claims, baseline regressions, and the verdict that gates CI.

A cell's reductions: pass rate = passed / trials that ran (missing ones excluded);
latency mean, nearest-rank p95 and sample standard deviation; token and cost totals
and means over the trials that recorded them; retries; the pass-rate variance across
repetitions (the sample variance of each repetition's 0/1 pass). The run passes only
when something ran, every core cell has all its trials and none failed, and no
baseline regressed.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from processors.conformance.assertions import Checked
from processors.conformance.baselines import Regression, cell_regressions, suite_alpha
from processors.conformance.reduce import Reductions
from processors.conformance.suite import suite_digest
from schemas.harness import SUITE_RESULT_SCHEMA, Combination, Observation, Scenario, Suite


@dataclass(frozen=True)
class TrialResult:
    combination_id: str
    scenario_id: str
    repetition: int
    status: str  # passed | failed | missing
    failure_class: str | None
    observation: Observation | None
    checks: tuple[Checked, ...]
    diagnostic: str | None

    def reason(self) -> str:
        failed = [f"{c.kind}: {c.reason}" for c in self.checks if not c.passed]
        return "; ".join(failed) or self.diagnostic or self.failure_class or self.status

    def to_json(self) -> dict[str, Any]:
        obs = self.observation
        out: dict[str, Any] = {
            "repetition": self.repetition,
            "status": self.status,
            "failureClass": self.failure_class,
            "diagnostic": self.diagnostic,
        }
        if obs is not None:
            out |= {
                "outcome": obs.outcome,
                "latencyMs": obs.latency_ms,
                "tokens": obs.tokens,
                "costUsd": obs.cost_usd,
                "retries": obs.retries,
                "launchManifestDigest": obs.launch_manifest_digest,
                "providerRuntimeManifestDigest": obs.provider_runtime_manifest_digest,
                "taskRef": obs.task_ref,
                "attemptRef": obs.attempt_ref,
                "causalSequence": obs.causal_sequence,
                "evidenceRef": obs.evidence_ref,
                "assertions": [
                    {"kind": c.kind, "claim": c.claim, "passed": c.passed, "reason": c.reason}
                    for c in self.checks
                ],
            }
        return out


def reduce_trials(trials: Sequence[TrialResult]) -> Reductions:
    """A cell's trials reduced; a missing trial counts as missing, not as failed."""
    ran = [t for t in trials if t.status != "missing"]
    obs = [t.observation for t in ran if t.observation is not None]
    return Reductions.of(
        [1.0 if t.status == "passed" else 0.0 for t in ran],
        [o.latency_ms for o in obs if o.latency_ms is not None],
        [float(o.tokens) for o in obs if o.tokens is not None],
        [o.cost_usd for o in obs if o.cost_usd is not None],
        retries=sum(o.retries for o in obs),
        missing=len(trials) - len(ran),
        failure_classes=dict(Counter(t.failure_class for t in ran if t.failure_class)),
    )


@dataclass(frozen=True)
class CellResult:
    combination: Combination
    scenario: Scenario
    trials: tuple[TrialResult, ...]

    @property
    def reductions(self) -> Reductions:
        return reduce_trials(self.trials)

    @property
    def gating(self) -> bool:
        return self.scenario.tier == "core"

    @property
    def failures(self) -> list[str]:
        found = []
        r = self.reductions
        if r.missing:
            found.append(
                f"missing evidence: {r.trials} of {self.scenario.repetitions} trials observed"
            )
        for t in self.trials:
            if t.status == "failed":
                found.append(f"trial {t.repetition} {t.failure_class}: {t.reason()}")
        return found

    @property
    def label(self) -> str:
        return f"{self.combination.combination_id} x {self.scenario.scenario_id}"


@dataclass(frozen=True)
class HarnessResult:
    suite: Suite
    executor: dict[str, Any]
    ran_at: dt.datetime
    cells: tuple[CellResult, ...]
    skipped: tuple[str, ...]
    allow_credential_gated: bool
    regressions: tuple[Regression, ...]

    @classmethod
    def build(
        cls,
        suite: Suite,
        executor: dict[str, Any],
        ran_at: dt.datetime,
        cells: Sequence[CellResult],
        skipped: Sequence[str],
        allow_credential_gated: bool,
    ) -> HarnessResult:
        regressions = cell_regressions(
            suite.baselines,
            [(c.combination.combination_id, c.scenario, c.reductions) for c in cells],
            suite.alpha,
        )
        return cls(
            suite, executor, ran_at, tuple(cells), tuple(skipped), allow_credential_gated,
            tuple(regressions),
        )  # fmt: skip

    @property
    def failures(self) -> list[str]:
        found = [f"{c.label}: {f}" for c in self.cells if c.gating for f in c.failures]
        if not self.cells:
            found.append(
                "no combination ran: every one is credential-gated"
                " (run with --allow-credential-gated)"
            )
        return found

    @property
    def passed(self) -> bool:
        return not self.failures and not self.regressions

    def cell_status(self, cell: CellResult) -> str:
        regressed = any(
            r.combination_id == cell.combination.combination_id
            and r.scenario_id == cell.scenario.scenario_id
            for r in self.regressions
        )
        return "failed" if cell.failures or regressed else "passed"

    def claims(self) -> list[dict[str, Any]]:
        """Per claim and combination: holds when every linked scenario's cell passed."""
        out = []
        for claim in self.suite.capability_claims:
            per: dict[str, str] = {}
            for combination in self.suite.combinations:
                cid = combination.combination_id
                linked = [
                    c
                    for c in self.cells
                    if c.combination.combination_id == cid
                    and c.scenario.scenario_id in claim.scenarios
                ]
                if not linked:
                    per[cid] = "skipped"
                elif all(self.cell_status(c) == "passed" for c in linked):
                    per[cid] = "holds"
                else:
                    per[cid] = "fails"
            out.append({"claimId": claim.claim_id, "capability": claim.capability,
                        "scenarios": claim.scenarios, "combinations": per})  # fmt: skip
        return out

    def baseline_revision(self, cell: CellResult) -> int | None:
        for b in self.suite.baselines:
            if b.covers(cell.combination.combination_id, cell.scenario):
                return b.revision
        return None

    def cell_json(self, cell: CellResult) -> dict[str, Any]:
        mine = [
            r.to_json()
            for r in self.regressions
            if r.combination_id == cell.combination.combination_id
            and r.scenario_id == cell.scenario.scenario_id
        ]
        return {
            "scenarioId": cell.scenario.scenario_id,
            "surfaceId": cell.scenario.surface_id,
            "tier": cell.scenario.tier,
            "gating": cell.gating,
            "status": self.cell_status(cell),
            "repetitions": cell.scenario.repetitions,
            **cell.reductions.to_json(),
            "baselineRevision": self.baseline_revision(cell),
            "regressions": mine,
            "failures": cell.failures,
            "trials": [t.to_json() for t in cell.trials],
        }

    def to_json(self) -> dict[str, Any]:
        combos = []
        for combination in self.suite.combinations:
            cid = combination.combination_id
            cells = [c for c in self.cells if c.combination.combination_id == cid]
            status = "skipped" if cid in self.skipped else (
                "failed" if any(self.cell_status(c) == "failed" for c in cells if c.gating)
                or any(r.combination_id == cid for r in self.regressions) else "passed"
            )  # fmt: skip
            combos.append({
                "combinationId": cid, "provider": combination.provider,
                "model": combination.model, "profile": combination.profile,
                "policy": combination.policy, "sandbox": combination.sandbox,
                "credentialGated": combination.credential_gated, "status": status,
                "skipReason": "credential-gated: run with --allow-credential-gated"
                if cid in self.skipped else None,
                "scenarios": [self.cell_json(c) for c in cells],
            })  # fmt: skip
        revisions = sorted({b.revision for b in self.suite.baselines})
        return {
            "schema": SUITE_RESULT_SCHEMA,
            "suiteId": self.suite.suite_id,
            "revision": self.suite.revision,
            "suiteDigest": suite_digest(self.suite),
            "fixture": self.suite.fixture.to_json() if self.suite.fixture else None,
            "status": "passed" if self.passed else "failed",
            "ranAt": self.ran_at,
            "executor": self.executor,
            "allowCredentialGated": self.allow_credential_gated,
            "baselineRevisions": revisions,
            "alpha": suite_alpha(self.suite),
            "failures": self.failures,
            "regressions": [r.to_json() for r in self.regressions],
            "claims": self.claims(),
            "combinations": combos,
        }
