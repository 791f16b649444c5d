"""The executor contract and the two executors that ship.

`HarnessExecutor` is the seam a harness lane plugs into: `reset(trial)` restores the
suite's fixture before every trial, `execute(trial)` runs it and returns the
observation (a mapping the runner validates, or an `Observation`). Raising
`TimeoutError` is a timeout, `MissingEvidence` means there is no trial to observe, any
other exception is a provider crash; the runner classifies, the executor only reports.

- `RecordedExecutor`: bounded observations from a file. Inert: it runs nothing.
- `StoreExecutor`: trials are stored evaluation events; each combination's trials are
  the events of its slice (light source, lens version, substrate values), so
  production traffic is reduced per combination without running anything.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from processors.conformance.suite import StoreSource, Trial, load_screened
from schemas.events import DEFAULT_TENANT
from schemas.harness import (
    Combination,
    Observation,
    RecordedObservations,
    RecordedTrial,
    Scenario,
    Suite,
)
from schemas.store import Store


@dataclass(frozen=True)
class TrialInput:
    """One trial: the same seeded scenario on one combination, repetition 1..n."""

    suite: Suite
    combination: Combination
    scenario: Scenario
    repetition: int

    @property
    def key(self) -> str:
        return f"{self.combination.combination_id}/{self.scenario.scenario_id}#{self.repetition}"


class MissingEvidence(LookupError):
    """No trial to observe (a recording or a store slice without it)."""


class HarnessExecutor(Protocol):
    def reset(self, trial: TrialInput) -> None:
        """Restore the suite's fixture before the trial; raise when it cannot be."""
        ...

    def execute(self, trial: TrialInput) -> Observation | Mapping[str, Any]:
        """Run (or look up) the trial and return what was observed."""
        ...

    def describe(self) -> dict[str, Any]: ...


# --- the recorded executor ----------------------------------------------------------


def load_observations(text: str, name: str = "observations") -> RecordedObservations:
    """A `harness-conformance-observations/v1` file, screened like a suite (size,
    unknown fields, secret-like text). Each observation is validated when its trial
    runs, so one malformed observation is that trial's failure."""
    return load_screened(RecordedObservations, text, name)


@dataclass
class RecordedExecutor:
    """Plays back recorded trials; `reset` fails where the recording saw a failed reset."""

    recorded: RecordedObservations
    path: str = ""
    _by_key: dict[str, RecordedTrial] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {
            f"{t.combination_id}/{t.scenario_id}#{t.repetition}": t for t in self.recorded.trials
        }

    def strays(self, suite: Suite) -> list[str]:
        """Recorded trials the suite does not have (a wrong file, a stale recording)."""
        known = {
            f"{c.combination_id}/{s.scenario_id}#{r}"
            for c in suite.combinations
            for s in suite.scenarios
            for r in range(1, s.repetitions + 1)
        }
        return [
            f"trial {k} is not in suite {suite.suite_id}" for k in self._by_key if k not in known
        ]

    def reset(self, trial: TrialInput) -> None:
        found = self._by_key.get(trial.key)
        if found is not None and found.reset_error is not None:
            raise RuntimeError(found.reset_error)

    def execute(self, trial: TrialInput) -> Mapping[str, Any]:
        found = self._by_key.get(trial.key)
        if found is None or found.observation is None:
            raise MissingEvidence(f"no recorded observation for {trial.key}")
        return found.observation

    def describe(self) -> dict[str, Any]:
        return {"kind": "recorded", "path": self.path}


# --- the store executor -------------------------------------------------------------

# Markers (without the `holonograph.marker.` prefix) an SDK records for the store lane;
# see docs/conformance.md. Lists are marker values; `k=v` pairs split at the first `=`.
PAIR = re.compile(r"^([^=]{1,128})=(.{0,200})$")


def _first(markers: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = markers.get(name)
    return values[0] if values else None


def _pairs(markers: Mapping[str, Sequence[str]], name: str) -> list[tuple[str, str]]:
    """`k=v` values; a value without `=` is kept whole as the key, so validation names it."""
    found = []
    for value in markers.get(name, ()):
        m = PAIR.match(value)
        found.append((m.group(1), m.group(2)) if m else (value, ""))
    return found


def _scalar(text: str) -> bool | int | str:
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[0-9]{1,15}", text):
        return int(text)
    return text


def _int(text: str | None) -> int | str | None:
    """An integer marker; anything else is passed on for validation to refuse."""
    if text is None:
        return None
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else text


def _shape(text: str) -> dict[str, str]:
    pairs = (p.partition("=") for p in text.split(",") if p)
    return {name: kind for name, _, kind in pairs}


def event_observation(t: Trial) -> dict[str, Any]:
    """An evaluation event as an observation document (validated by the runner). The
    outcome is the `outcome` marker, else succeeded when every recorded dimension
    passed and failed when one failed; an event with neither has no outcome."""
    m = t.view.markers
    outcome = _first(m, "outcome")
    if outcome is None:
        graded = [d.passed for d in t.view.dimensions.values() if d.passed is not None]
        outcome = None if not graded else ("succeeded" if all(graded) else "failed")
    tools = list(m.get("tool_invocations", ()))
    outcomes = list(m.get("tool_outcomes", ()))
    shapes = list(m.get("tool_argument_shapes", ()))
    files = [
        {"path": p, "change": change}
        for change in ("created", "modified", "deleted")
        for p in m.get(f"files_{change}", ())
    ]
    blocked = set(m.get("network_blocked_hosts", ()))
    hosts = list(dict.fromkeys([*m.get("network_hosts", ()), *blocked]))
    doc: dict[str, Any] = {
        "outcome": outcome,
        "latencyMs": t.view.latency_ms,
        "tokensInput": t.tokens,
        "costUsd": t.view.cost_usd,
        "retries": _int(_first(m, "retries")) or 0,
        "launchManifestDigest": _first(m, "launch_manifest_digest"),
        "providerRuntimeManifestDigest": _first(m, "provider_runtime_manifest_digest"),
        "taskRef": _first(m, "task_id"),
        "attemptRef": _first(m, "attempt_id"),
        "causalSequence": t.emission_seq,
        "evidenceRef": t.view.event_id,
        "toolCalls": [
            {
                "tool": tool,
                "outcome": outcomes[i] if i < len(outcomes) else "ok",
                "argumentShape": _shape(shapes[i]) if i < len(shapes) else {},
            }
            for i, tool in enumerate(tools)
        ],
        "files": files,
        "approvals": [{"action": k, "decision": v} for k, v in _pairs(m, "approvals")],
        "networkAttempts": [{"host": h, "blocked": h in blocked} for h in hosts],
        "policyDecisions": [{"policy": k, "decision": v} for k, v in _pairs(m, "policy_decisions")],
        "capabilities": dict(_pairs(m, "capabilities")),
        "warnings": [
            {"code": w.split("@", 1)[0], "sourceService": w.split("@", 1)[1] if "@" in w else None}
            for w in m.get("warning_codes", ())
        ],
    }
    schema_id = _first(m, "completion_schema")
    if schema_id is not None:
        doc["completion"] = {
            "schemaId": schema_id,
            "valid": _first(m, "completion_valid") == "true",
            "fields": list(m.get("completion_fields", ())),
        }
    envelope = {k: _scalar(v) for k, v in _pairs(m, "result_envelope")}
    code, columns, rows = (
        _first(m, "error_code"),
        m.get("result_columns"),
        _first(m, "result_row_count"),
    )
    if envelope or code is not None or columns is not None or rows is not None:
        doc["result"] = {
            "envelope": envelope,
            "errorCode": code,
            "columns": None if columns is None else list(columns),
            "rowCount": _int(rows),
        }
    rejection = _pairs(m, "rejection")
    if rejection:
        doc["rejection"] = {"gate": rejection[0][0], "code": rejection[0][1]}
    return {k: v for k, v in doc.items() if v is not None}


@dataclass
class StoreExecutor:
    """Trials from a window [since, until) of one tenant's stored events: a
    combination x scenario cell reads the most recent `repetitions` events of the
    scenario's surface and selection within the combination's slice, oldest first, and
    repetition r is the r-th of them. `reset` is a no-op: the store is read-only."""

    store: Store
    since: dt.datetime
    until: dt.datetime
    run_modes: Sequence[str] = ()
    tenant_id: str = DEFAULT_TENANT
    _slices: dict[tuple[str, str], list[Trial]] = field(default_factory=dict, repr=False)

    def slice_of(self, combination: Combination, scenario: Scenario) -> list[Trial]:
        key = (combination.combination_id, scenario.scenario_id)
        if key not in self._slices:
            if not combination.selects:
                raise MissingEvidence(
                    f"combination {combination.combination_id} has no `select`: the store"
                    " cannot tell its traffic from another's"
                )
            source = StoreSource(self.store, self.since, self.until, self.run_modes, self.tenant_id)
            self._slices[key] = source.trials(scenario, combination.select)
        return self._slices[key]

    def reset(self, trial: TrialInput) -> None:
        return None

    def execute(self, trial: TrialInput) -> Mapping[str, Any]:
        events = self.slice_of(trial.combination, trial.scenario)
        if trial.repetition > len(events):
            raise MissingEvidence(
                f"{len(events)} of {trial.scenario.repetitions} events in the slice of"
                f" {trial.combination.combination_id}"
            )
        return event_observation(events[trial.repetition - 1])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "store",
            "tenantId": self.tenant_id,
            "since": self.since,
            "until": self.until,
            "runModes": list(self.run_modes) or None,
        }
