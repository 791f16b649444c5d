"""The harness runner: every combination x scenario x repetition in declaration order,
the fixture reset before every trial, each observation validated and asserted, each
failed trial given exactly one failure class.

Classification, first that applies: the reset raised (`reset-failed`); the executor
raised `TimeoutError` or the observation timed out or exceeded the scenario's
`timeoutMs` (`timeout`); the executor raised anything else or observed a provider crash
(`provider-crash`); the observation did not validate (`malformed-observation`); the run
was blocked by policy (`policy-block`); an assertion failed (`verification-failure`).
An outcome the scenario's `outcome` assertion expects is not a failure (a scenario may
test that policy blocks). `MissingEvidence` is no trial at all: missing, not failed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError

from processors.conformance.assertions import Checked, evaluate_all
from processors.conformance.executors import HarnessExecutor, MissingEvidence, TrialInput
from processors.conformance.result import CellResult, HarnessResult, TrialResult
from processors.conformance.suite import SECRET_PATTERNS, find_secrets, validation_problems
from schemas.harness import Observation, OutcomeAssertion, Suite

MAX_DIAGNOSTIC = 300
URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^/\s@]*@)?([^/\s?#:]+)(?::\d+)?[^\s]*")
OUTCOME_CLASS: dict[str, str] = {
    "provider-crashed": "provider-crash",
    "timed-out": "timeout",
    "policy-blocked": "policy-block",
}
FailureClass = Literal[
    "reset-failed",
    "malformed-observation",
    "provider-crash",
    "policy-block",
    "timeout",
    "verification-failure",
]
Progress = Callable[[str], None]


def normalize_diagnostic(text: str) -> str:
    """Executor text fit for a result: secrets redacted, URLs cut to their host,
    control characters and runs of whitespace collapsed, at most 300 characters."""
    text = URL.sub(lambda m: m.group(1), text)
    for _, pattern in SECRET_PATTERNS:
        text = pattern.sub("[redacted]", text)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= MAX_DIAGNOSTIC else text[: MAX_DIAGNOSTIC - 1] + "…"


def _error(err: BaseException) -> str:
    return normalize_diagnostic(f"{type(err).__name__}: {err}")


def run_trial(executor: HarnessExecutor, trial: TrialInput) -> TrialResult:
    """One trial, reset first; never raises for anything the executor does."""
    key = (trial.combination.combination_id, trial.scenario.scenario_id, trial.repetition)
    try:
        executor.reset(trial)
    except Exception as err:
        return TrialResult(*key, "failed", "reset-failed", None, (), _error(err))
    try:
        raw = executor.execute(trial)
    except MissingEvidence as err:
        return TrialResult(*key, "missing", None, None, (), normalize_diagnostic(str(err)))
    except TimeoutError as err:
        return TrialResult(*key, "failed", "timeout", None, (), _error(err))
    except Exception as err:
        return TrialResult(*key, "failed", "provider-crash", None, (), _error(err))
    try:
        obs = raw if isinstance(raw, Observation) else Observation.model_validate(raw)
    except ValidationError as err:
        diagnostic = normalize_diagnostic("; ".join(validation_problems(err)[:5]))
        return TrialResult(*key, "failed", "malformed-observation", None, (), diagnostic)
    secrets = find_secrets({k: v for k, v in obs.to_json().items() if k != "diagnostic"})
    if secrets:  # the result echoes the observation: never a secret (paths only)
        diagnostic = normalize_diagnostic("; ".join(secrets[:5]))
        return TrialResult(*key, "failed", "malformed-observation", None, (), diagnostic)
    checks = tuple(evaluate_all(trial.scenario.expect, obs))
    note = normalize_diagnostic(obs.diagnostic) if obs.diagnostic else None
    failure = classify(trial, obs, checks)
    status: Literal["passed", "failed"] = "failed" if failure else "passed"
    return TrialResult(*key, status, failure, obs, checks, note)


def classify(trial: TrialInput, obs: Observation, checks: tuple[Checked, ...]) -> Any:
    expected = {
        o for a in trial.scenario.expect if isinstance(a, OutcomeAssertion) for o in a.one_of
    }
    limit = trial.scenario.timeout_ms
    if obs.outcome == "timed-out" and obs.outcome not in expected:
        return "timeout"
    if limit is not None and obs.latency_ms is not None and obs.latency_ms > limit:
        return "timeout"
    if obs.outcome in OUTCOME_CLASS and obs.outcome not in expected:
        return OUTCOME_CLASS[obs.outcome]
    if any(not c.passed for c in checks):
        return "verification-failure"
    return None


def run_harness(
    suite: Suite,
    executor: HarnessExecutor,
    ran_at: dt.datetime,
    *,
    allow_credential_gated: bool = False,
    progress: Progress | None = None,
) -> HarnessResult:
    """Every combination (skipping credential-gated ones unless allowed: the suite
    alone never enables them), every scenario, every repetition, in declaration order."""
    cells: list[CellResult] = []
    skipped: list[str] = []
    for combination in suite.combinations:
        if combination.credential_gated and not allow_credential_gated:
            skipped.append(combination.combination_id)
            continue
        for scenario in suite.scenarios:
            if progress is not None:
                progress(f"{combination.combination_id} x {scenario.scenario_id}")
            trials = tuple(
                run_trial(executor, TrialInput(suite, combination, scenario, r))
                for r in range(1, scenario.repetitions + 1)
            )
            cells.append(CellResult(combination, scenario, trials))
    return HarnessResult.build(
        suite, executor.describe(), ran_at, cells, skipped, allow_credential_gated
    )
