"""Builders for harness suites and observations, and a scripted executor for the
runner's contract tests."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from holonograph.cli import cli
from processors.conformance.executors import MissingEvidence, TrialInput

LAUNCH = "sha256:" + "1" * 64
RUNTIME = "sha256:" + "2" * 64
SURFACE = "analyst-agent"


def observation(**changes: Any) -> dict[str, Any]:
    """A passing observation of the `lookup` scenario below."""
    body: dict[str, Any] = {
        "outcome": "succeeded",
        "latencyMs": 1000.0,
        "tokensInput": 100,
        "tokensOutput": 20,
        "costUsd": 0.002,
        "launchManifestDigest": LAUNCH,
        "providerRuntimeManifestDigest": RUNTIME,
        "toolCalls": [{"tool": "query.run", "outcome": "ok", "argumentShape": {"sql": "string"}}],
    }
    body.update(changes)
    return body


def combination(cid: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "combinationId": cid,
        "provider": "reference",
        "model": f"model-{cid}",
        "profile": "default",
        "policy": "strict",
        "sandbox": "offline",
        "select": {"lightSourceId": f"model-{cid}"},
    }
    body.update(changes)
    return body


def harness_suite(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema": "harness-conformance-suite/v1",
        "suiteId": "analyst-release",
        "revision": 1,
        "fixture": {"fixtureId": "workspace", "revision": 3, "digest": "sha256:" + "a" * 64},
        "combinations": [combination("a"), combination("b")],
        "scenarios": [
            {
                "scenarioId": "lookup",
                "surfaceId": SURFACE,
                "repetitions": 2,
                "expect": [
                    {"kind": "outcome", "oneOf": ["succeeded"]},
                    {"kind": "tool-calls", "calls": [{"tool": "query.run"}]},
                ],
            }
        ],
    }
    body.update(copy.deepcopy(changes))
    return body


def recorded(
    suite: Mapping[str, Any], overrides: Mapping[tuple[str, str, int], Any] | None = None
) -> dict[str, Any]:
    """Every trial of `suite` observed passing, except `overrides` (a trial entry's
    fields, or None to leave the trial out)."""
    trials = []
    for c in suite["combinations"]:
        for s in suite["scenarios"]:
            for r in range(1, s["repetitions"] + 1):
                key = (c["combinationId"], s["scenarioId"], r)
                entry: dict[str, Any] = {
                    "combinationId": key[0],
                    "scenarioId": key[1],
                    "repetition": r,
                    "observation": observation(),
                }
                if overrides and key in overrides:
                    if overrides[key] is None:
                        continue
                    entry = {k: v for k, v in entry.items() if k != "observation"}
                    entry |= overrides[key]
                trials.append(entry)
    return {"schema": "harness-conformance-observations/v1", "trials": trials}


def run_harness_cli(tmp_path: Path, suite: Any, observations: Any, *args: str) -> Result:
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(suite if isinstance(suite, str) else yaml.safe_dump(suite))
    argv = ["conformance", "suite", "run", str(suite_path)]
    if observations is not None:
        obs_path = tmp_path / "observations.json"
        obs_path.write_text(json.dumps(observations))
        argv += ["--observations", str(obs_path)]
    return CliRunner().invoke(cli, [*argv, *args])


@dataclass
class ScriptedExecutor:
    """Records every call; `faults` maps a trial key to what to do instead of
    returning `observation()`: an exception class to raise on reset ("reset") or
    execute, or a mapping to return as the observation."""

    faults: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def reset(self, trial: TrialInput) -> None:
        self.calls.append(("reset", trial.key))
        fault = self.faults.get(trial.key)
        if fault == "reset":
            raise RuntimeError("fixture restore failed: disk full at https://ci.example/x?token=1")

    def execute(self, trial: TrialInput) -> Mapping[str, Any]:
        self.calls.append(("execute", trial.key))
        fault = self.faults.get(trial.key)
        if isinstance(fault, type) and issubclass(fault, BaseException):
            raise fault("adapter exited with status 139")
        if fault == "missing":
            raise MissingEvidence("nothing recorded")
        if isinstance(fault, Mapping):
            return fault
        return observation()

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted"}
