"""Harness conformance with combinations: the suite format (bounds, unknown fields,
secrets, references), every assertion kind on recorded observations, the runner's
contract (order, reset before every trial, credential gating, failure classes), the
per-cell reductions and each baseline kind, through the CLI where the user meets it."""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from processors.conformance.executors import RecordedExecutor, TrialInput, load_observations
from processors.conformance.runner import normalize_diagnostic, run_harness
from processors.conformance.suite import SuiteError, load_suite
from tests.processors.conformance.harness_support import (
    LAUNCH,
    RUNTIME,
    ScriptedExecutor,
    combination,
    harness_suite,
    observation,
    recorded,
    run_harness_cli,
)

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "conformance"
NOW = dt.datetime(2026, 7, 2, tzinfo=dt.UTC)


def problems(doc: Any) -> str:
    with pytest.raises(SuiteError) as info:
        load_suite(json.dumps(doc))
    return str(info.value)


def scenario(sid: str = "lookup", repetitions: int = 2, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scenarioId": sid,
        "surfaceId": "analyst-agent",
        "repetitions": repetitions,
        "expect": [{"kind": "outcome", "oneOf": ["succeeded"]}],
    }
    body.update(changes)
    return body


# --- the suite format -----------------------------------------------------------------


def test_the_worked_example_loads() -> None:
    suite = load_suite((EXAMPLES / "harness-suite.yaml").read_text())
    assert [c.combination_id for c in suite.combinations] == [
        "mini-strict",
        "large-strict",
        "hosted-strict",
    ]
    assert suite.trials() == 15 and suite.combinations[2].credential_gated


def _with(path: tuple[Any, ...], value: Any, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(doc or harness_suite())
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (harness_suite(combinations=[combination(f"c{i}") for i in range(21)]), "at most 20"),
        (harness_suite(scenarios=[scenario(f"s{i}", 1) for i in range(51)]), "at most 50"),
        (harness_suite(scenarios=[scenario(repetitions=21)]), "less than or equal to 20"),
        (harness_suite(combinations=[combination(f"c{i}") for i in range(20)],
                       scenarios=[scenario("s1", 13), scenario("s2", 13)]),
         "520 trials exceed the limit of 500"),
        (_with(("scenarios", 0, "timeoutMs"), 3_600_001), "less than or equal to 3600000"),
        (_with(("scenarios", 0, "expect"), [{"kind": "file", "path": "/etc/passwd",
                                            "change": "created"}]), "not a relative path"),
        (_with(("scenarios", 0, "expect"), [{"kind": "file", "path": "a/../../b",
                                            "change": "created"}]), "'..'"),
        (_with(("scenarios", 0, "expect"), [{"kind": "file", "path": "a/" * 200 + "b",
                                            "change": "created"}]), "1 to 256 characters"),
        (_with(("scenarios", 0, "expect"), [{"kind": "network",
                                            "allow": ["https://api.example.com/v1"]}]), "pattern"),
        (_with(("scenarios", 0, "expect"), [{"kind": "tool-calls", "calls": [
            {"tool": "t", "arguments": {f"a{i}": "string" for i in range(17)}}]}]), "at most 16"),
        (_with(("scenarios", 0, "expect"), [{"kind": "tool-calls", "calls": [
            {"tool": f"t{i}"} for i in range(21)]}]), "at most 20"),
        (_with(("scenarios", 0, "expect"), [{"kind": "tool-calls", "calls": [
            {"tool": "t", "arguments": {"sql": "matches(.*)"}}]}]), "Input should be"),
        (_with(("scenarios", 0, "expect"), [{"kind": "result", "envelope": {"x": 1.5}}]),
         "envelope"),
        (_with(("scenarios", 0, "expect"), [{"kind": "result",
                                            "rowCount": {"min": 5, "max": 1}}]), "min above max"),
        (_with(("combinations", 0, "model"), "m" * 129), "model"),
        (_with(("fixture", "digest"), "md5:abc"), "digest"),
        (_with(("scenarios", 0, "input"), {"turn": "t" * 2001}), "at most 2000"),
        (_with(("baselines",), [{"revision": 1, "passRate": 1.5}]), "less than or equal to 1"),
        (_with(("baselines",), [{"revision": 1, "meanCostUsd": 10_001}]), "less than or equal"),
    ],
)  # fmt: skip
def test_bounds(doc: dict[str, Any], message: str) -> None:
    assert message in problems(doc)


@pytest.mark.parametrize(
    "path",
    [
        ("command",),
        ("fixture", "command"),
        ("combinations", 0, "env"),
        ("combinations", 0, "select", "sql"),
        ("scenarios", 0, "script"),
        ("scenarios", 0, "input", "shell"),
        ("scenarios", 0, "expect", 0, "expression"),
        ("scenarios", 0, "expect", 1, "calls", 0, "regex"),
        ("baselines", 0, "formula"),
        ("capabilityClaims", 0, "code"),
    ],
)
def test_unknown_fields_rejected(path: tuple[Any, ...]) -> None:
    doc = harness_suite(
        baselines=[{"revision": 1, "passRate": 1.0}],
        capabilityClaims=[{"claimId": "c", "capability": "q", "scenarios": ["lookup"]}],
    )
    doc["scenarios"][0]["expect"][0]["claim"] = "c"
    doc["scenarios"][0]["input"] = {"turn": "Average salary by department"}
    load_suite(json.dumps(doc))  # valid as built
    doc = _with(path, "x", doc)
    found = problems(doc)
    assert "Extra inputs are not permitted" in found and str(path[-1]) in found


SECRET = "sk-" + "A1b2C3d4" * 4


@pytest.mark.parametrize(
    "path",
    [
        ("description",),
        ("fixture", "repository"),
        ("combinations", 0, "profile"),
        ("combinations", 0, "select", "substrate", "key"),
        ("scenarios", 0, "input", "turn"),
        ("scenarios", 0, "input", "parameters", "p"),
        ("scenarios", 0, "expect", 0, "claim"),
    ],
)
def test_secret_like_text_rejected_per_field(path: tuple[Any, ...]) -> None:
    doc = harness_suite()
    doc["scenarios"][0]["input"] = {"parameters": {}}
    doc["combinations"][0]["select"]["substrate"] = {}
    found = problems(_with(path, SECRET, doc))
    assert "secret-like text" in found and SECRET not in found


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (harness_suite(combinations=[combination("a"), combination("a")]),
         "duplicate combinationId: a"),
        (harness_suite(fixture=None), "names its `fixture`"),
        (harness_suite(capabilityClaims=[{"claimId": "c", "capability": "q",
                                          "scenarios": ["nope"]}]), "unknown scenario nope"),
        (harness_suite(capabilityClaims=[{"claimId": "c", "capability": "q",
                                          "scenarios": ["lookup"]}]),
         "claim c: scenario lookup asserts nothing for it"),
        (_with(("scenarios", 0, "expect", 0, "claim"), "ghost"), "unknown claim ghost"),
        (harness_suite(baselines=[{"revision": 1, "combinationId": "z", "passRate": 1}]),
         "unknown combination z"),
        (harness_suite(baselines=[{"revision": 1, "passRate": 1},
                                  {"revision": 2, "combinationId": "a", "passRate": 1}]),
         "a x lookup is covered by several baselines"),
        (_with(("scenarios", 0, "fixtures"), ["fx"]), "asserts the observation in `expect`"),
        ({**harness_suite(), "combinations": []}, "`expect` asserts observations of combinations"),
    ],
)  # fmt: skip
def test_ids_and_references_are_unique_and_complete(doc: dict[str, Any], message: str) -> None:
    assert message in problems(doc)


def test_observation_files_are_screened() -> None:
    good = recorded(harness_suite())
    assert len(load_observations(json.dumps(good)).trials) == 4
    extra = copy.deepcopy(good)
    extra["trials"][0]["command"] = "rm -rf /"
    with pytest.raises(SuiteError, match="Extra inputs"):
        load_observations(json.dumps(extra))
    secret = copy.deepcopy(good)
    secret["trials"][0]["observation"]["diagnostic"] = f"Authorization: Bearer {SECRET}"
    with pytest.raises(SuiteError, match="secret-like text"):
        load_observations(json.dumps(secret))
    twice = copy.deepcopy(good)
    twice["trials"].append(twice["trials"][0])
    with pytest.raises(SuiteError, match="duplicate trial: a/lookup#1"):
        load_observations(json.dumps(twice))


# --- every assertion kind on recorded observations ------------------------------------

OUT = {"envelope": {"ok": False, "rows": 3}, "errorCode": "column_denied",
       "columns": ["a", "b"], "rowCount": 3}  # fmt: skip
KINDS: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]] = [
    # assertion, observation changes that pass, ... that fail, the failure's reason
    ({"kind": "outcome", "oneOf": ["refused", "clarified"]}, {"outcome": "clarified"},
     {"outcome": "succeeded"}, "outcome succeeded, expected refused or clarified"),
    ({"kind": "file", "path": "src/app.py", "change": "modified"},
     {"files": [{"path": "src/app.py", "change": "modified"}]},
     {"files": [{"path": "src/app.py", "change": "deleted"}]}, "was deleted, expected modified"),
    ({"kind": "file", "path": "secrets.env", "change": "unchanged"}, {"files": []},
     {"files": [{"path": "secrets.env", "change": "created"}]}, "secrets.env was created"),
    ({"kind": "tool-calls", "calls": [{"tool": "meta.search"},
                                      {"tool": "query.run", "outcome": "error",
                                       "arguments": {"sql": "string", "limit": "absent"}}],
      "only": True},
     {"toolCalls": [{"tool": "query.run", "outcome": "error", "argumentShape": {"sql": "string"}},
                    {"tool": "meta.search", "outcome": "ok"}]},
     {"toolCalls": [{"tool": "meta.search", "outcome": "ok"},
                    {"tool": "query.run", "outcome": "error",
                     "argumentShape": {"sql": "string", "limit": "number"}}]},
     "no call matched query.run error limit:absent sql:string"),
    ({"kind": "tool-calls", "calls": [{"tool": "q"}, {"tool": "q", "outcome": "ok"}]},
     {"toolCalls": [{"tool": "q", "outcome": "ok"}, {"tool": "q", "outcome": "error"}]},
     {"toolCalls": [{"tool": "q", "outcome": "ok"}]}, "no call matched q"),
    ({"kind": "tool-calls", "calls": [{"tool": "q"}], "only": True},
     {"toolCalls": [{"tool": "q", "outcome": "ok"}]},
     {"toolCalls": [{"tool": "q", "outcome": "ok"}, {"tool": "shell", "outcome": "ok"}]},
     "tools outside the expected set: shell"),
    ({"kind": "tool-calls", "forbidden": ["file.write"]}, {"toolCalls": []},
     {"toolCalls": [{"tool": "file.write", "outcome": "denied"}]},
     "forbidden tools called: file.write"),
    ({"kind": "approval", "action": "deploy", "decision": "granted"},
     {"approvals": [{"action": "deploy", "decision": "granted"}]},
     {"approvals": [{"action": "deploy", "decision": "denied"}]},
     "approval for deploy: denied, expected granted"),
    ({"kind": "approval", "action": "export", "decision": "not-requested"}, {},
     {"approvals": [{"action": "export", "decision": "pending"}]},
     "approval for export was requested (pending)"),
    ({"kind": "network", "allow": ["*.example.com"],
      "attempted": [{"host": "api.example.com", "blocked": False}]},
     {"networkAttempts": [{"host": "api.example.com"}]},
     {"networkAttempts": [{"host": "api.example.com"}, {"host": "evil.test", "blocked": True}]},
     "outside the allowed hosts: evil.test"),
    ({"kind": "network", "allow": []}, {},
     {"networkAttempts": [{"host": "example.com", "blocked": True}]},
     "outside the allowed hosts: example.com"),
    ({"kind": "policy-decision", "policy": "fs-write", "decision": "deny"},
     {"policyDecisions": [{"policy": "fs-write", "decision": "deny", "rule": "r1"}]},
     {"policyDecisions": [{"policy": "fs-write", "decision": "allow"}]},
     "policy fs-write decided allow, expected deny"),
    ({"kind": "completion-schema", "schemaId": "answer/v1", "requiredFields": ["summary"]},
     {"completion": {"schemaId": "answer/v1", "valid": True, "fields": ["summary"]}},
     {"completion": {"schemaId": "answer/v1", "valid": False, "fields": ["summary"]}},
     "not valid against answer/v1"),
    ({"kind": "completion-schema", "schemaId": "answer/v1"},
     {"completion": {"schemaId": "answer/v1", "valid": True}}, {}, "no completion recorded"),
    ({"kind": "capability", "capability": "browser", "state": "disabled"},
     {"capabilities": {"browser": "disabled"}}, {"capabilities": {"browser": "enabled"}},
     "capability browser is enabled, expected disabled"),
    ({"kind": "result", "envelope": {"ok": False}, "errorCode": "column_denied",
      "columns": ["b", "a"], "rowCount": {"min": 1, "max": 10}},
     {"result": OUT}, {"result": {**OUT, "rowCount": 11}}, "row count 11 outside [1, 10]"),
    ({"kind": "result", "envelope": {"ok": False}}, {"result": OUT},
     {"result": {**OUT, "envelope": {"ok": 0}}}, "envelope ok is 0, expected False"),
    ({"kind": "result", "errorCode": "column_denied"}, {"result": OUT},
     {"result": {**OUT, "errorCode": "timeout"}}, "error code timeout, expected column_denied"),
    ({"kind": "result", "columns": ["a", "b"]}, {"result": OUT},
     {"result": {**OUT, "columns": ["a", "b", "salary"]}}, "columns a, b, salary, expected a, b"),
    ({"kind": "provenance", "warningsContain": [{"code": "column_denied_mask",
                                                 "sourceService": "validator"}],
      "warningsAbsent": ["stale_cache"]},
     {"warnings": [{"code": "column_denied_mask", "sourceService": "validator"}]},
     {"warnings": [{"code": "column_denied_mask", "sourceService": "planner"},
                   {"code": "stale_cache"}]},
     "no provenance warning column_denied_mask from validator; unexpected provenance"
     " warnings: stale_cache"),
    ({"kind": "rejection", "gate": "identity", "code": "missing_bearer"},
     {"rejection": {"gate": "identity", "code": "missing_bearer"}},
     {"rejection": {"gate": "permission", "code": "missing_bearer"}},
     "rejected at the permission gate, expected identity"),
    ({"kind": "rejection", "rejected": False}, {},
     {"rejection": {"gate": "permission", "code": "denied"}},
     "rejected at the permission gate (denied)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("assertion", "passing", "failing", "reason"), KINDS, ids=[k[0]["kind"] for k in KINDS]
)
def test_each_assertion_kind_passes_and_fails_on_recorded_observations(
    assertion: dict[str, Any], passing: dict[str, Any], failing: dict[str, Any], reason: str
) -> None:
    doc = harness_suite(
        combinations=[combination("a")],
        scenarios=[scenario(repetitions=2, expect=[assertion])],
    )
    suite = load_suite(json.dumps(doc))
    trials = {
        ("a", "lookup", 1): {"observation": observation(**passing)},
        ("a", "lookup", 2): {"observation": observation(**failing)},
    }
    observations = load_observations(json.dumps(recorded(doc, trials)))
    result = run_harness(suite, RecordedExecutor(observations), NOW)
    first, second = result.cells[0].trials
    assert first.status == "passed" and first.failure_class is None, first.reason()
    assert second.status == "failed" and second.failure_class == "verification-failure"
    assert reason in second.checks[0].reason
    assert not result.passed


# --- the runner's contract ------------------------------------------------------------


def test_stable_declaration_order_with_a_reset_before_every_trial() -> None:
    doc = harness_suite(
        combinations=[combination("z"), combination("a")],
        scenarios=[scenario("second", 2), scenario("first", 1)],
    )
    executor = ScriptedExecutor()
    result = run_harness(load_suite(json.dumps(doc)), executor, NOW)
    order = ["z/second#1", "z/second#2", "z/first#1", "a/second#1", "a/second#2", "a/first#1"]
    assert executor.calls == [(step, key) for key in order for step in ("reset", "execute")]
    out = result.to_json()
    assert [c["combinationId"] for c in out["combinations"]] == ["z", "a"]
    assert [s["scenarioId"] for s in out["combinations"][0]["scenarios"]] == ["second", "first"]


def test_credential_gated_combinations_run_only_when_allowed(tmp_path: Path) -> None:
    doc = harness_suite(combinations=[combination("a"), combination("b", credentialGated=True)])
    suite = load_suite(json.dumps(doc))
    executor = ScriptedExecutor()
    result = run_harness(suite, executor, NOW)
    assert {key.split("/")[0] for _, key in executor.calls} == {"a"}
    assert result.passed and result.skipped == ("b",)
    # through the CLI, the recording of b exists but the suite alone never enables it
    observed = recorded(doc)
    plain = run_harness_cli(tmp_path, doc, observed, "--json")
    assert plain.exit_code == 0, plain.output
    combos = json.loads(plain.output)["combinations"]
    assert [(c["combinationId"], c["status"], len(c["scenarios"])) for c in combos] == [
        ("a", "passed", 1),
        ("b", "skipped", 0),
    ]
    allowed = run_harness_cli(tmp_path, doc, observed, "--json", "--allow-credential-gated")
    assert allowed.exit_code == 0
    assert [c["status"] for c in json.loads(allowed.output)["combinations"]] == ["passed"] * 2
    only_gated = harness_suite(combinations=[combination("b", credentialGated=True)])
    nothing = run_harness_cli(tmp_path, only_gated, recorded(only_gated))
    assert nothing.exit_code == 1 and "no combination ran" in nothing.output


def test_each_failure_class_comes_from_its_seeded_fault() -> None:
    doc = harness_suite(
        combinations=[combination("a")],
        scenarios=[
            scenario(repetitions=10, timeoutMs=5000,
                     expect=[{"kind": "outcome", "oneOf": ["succeeded", "refused"]}]),
            scenario("blocks", 1, expect=[{"kind": "outcome", "oneOf": ["policy-blocked"]}]),
        ],
    )  # fmt: skip
    faults: dict[str, Any] = {
        "a/lookup#1": "reset",
        "a/lookup#2": TimeoutError,
        "a/lookup#3": RuntimeError,
        "a/lookup#4": {"outcome": "succeeded"},  # no manifest digests
        "a/lookup#5": observation(outcome="policy-blocked"),
        "a/lookup#6": observation(outcome="provider-crashed", launchManifestDigest=None),
        "a/lookup#7": observation(outcome="timed-out"),
        "a/lookup#8": observation(latencyMs=5000.5),
        "a/lookup#9": observation(outcome="failed"),
        "a/blocks#1": observation(outcome="policy-blocked"),  # expected: passes
    }
    result = run_harness(load_suite(json.dumps(doc)), ScriptedExecutor(faults), NOW)
    lookup, blocks = result.cells
    assert [t.failure_class for t in lookup.trials] == [
        "reset-failed",
        "timeout",
        "provider-crash",
        "malformed-observation",
        "policy-block",
        "provider-crash",
        "timeout",
        "timeout",
        "verification-failure",
        None,
    ]
    assert blocks.trials[0].status == "passed"
    reset = lookup.trials[0].diagnostic or ""
    assert "disk full at ci.example" in reset and "token" not in reset
    assert "launchManifestDigest" in (lookup.trials[3].diagnostic or "")
    assert lookup.reductions.failure_classes == {
        "reset-failed": 1, "timeout": 3, "provider-crash": 2, "malformed-observation": 1,
        "policy-block": 1, "verification-failure": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"retries": 101}, "retries"),
        ({"latencyMs": 3_600_001}, "latencyMs"),
        ({"costUsd": -1}, "costUsd"),
        ({"causalSequence": 2**53 + 1}, "causalSequence"),
        ({"tokensInput": 10**9}, "tokensInput"),
        ({"toolCalls": [{"tool": "t", "outcome": "ok"}] * 201}, "toolCalls"),
        ({"toolCalls": [{"tool": "t", "outcome": "ok", "arguments": {"sql": "DROP"}}]},
         "arguments"),
        ({"networkAttempts": [{"host": "https://example.com/a?b=c"}]}, "networkAttempts"),
        ({"files": [{"path": "../outside", "change": "created"}]}, "files"),
        ({"providerOutput": "raw text"}, "providerOutput"),
        ({"launchManifestDigest": "sha1:abc"}, "launchManifestDigest"),
        ({"providerRuntimeManifestDigest": None}, "providerRuntimeManifestDigest"),
    ],
)  # fmt: skip
def test_observation_bounds_per_field(changes: dict[str, Any], message: str) -> None:
    doc = harness_suite(combinations=[combination("a")])
    faults = {"a/lookup#1": observation(**changes)}
    result = run_harness(load_suite(json.dumps(doc)), ScriptedExecutor(faults), NOW)
    trial = result.cells[0].trials[0]
    assert trial.failure_class == "malformed-observation"
    assert message in (trial.diagnostic or "")


def test_recorded_faults_and_missing_evidence_fail_closed(tmp_path: Path) -> None:
    doc = harness_suite()
    trials = {
        ("a", "lookup", 1): {"resetError": "git checkout failed"},
        ("a", "lookup", 2): {"observation": {"outcome": "succeeded", "rawOutput": "..."}},
        ("b", "lookup", 2): None,
    }
    result = run_harness_cli(tmp_path, doc, recorded(doc, trials), "--json")
    assert result.exit_code == 1
    out = json.loads(result.output)
    a, b = (c["scenarios"][0] for c in out["combinations"])
    assert [t["failureClass"] for t in a["trials"]] == ["reset-failed", "malformed-observation"]
    assert "rawOutput" in a["trials"][1]["diagnostic"]
    assert b["trialsRun"] == 1 and b["missing"] == 1 and b["trials"][1]["status"] == "missing"
    assert "b x lookup: missing evidence: 1 of 2 trials observed" in out["failures"]


def test_a_recording_of_trials_the_suite_lacks_is_refused(tmp_path: Path) -> None:
    doc = harness_suite()
    stray = recorded(doc)
    stray["trials"].append({**stray["trials"][0], "repetition": 3})
    stray["trials"].append({**stray["trials"][0], "combinationId": "z"})
    result = run_harness_cli(tmp_path, doc, stray)
    assert result.exit_code == 2
    assert "trial a/lookup#3 is not in suite analyst-release" in result.output
    assert "trial z/lookup#1 is not in suite analyst-release" in result.output
    other = {**recorded(doc), "suiteId": "another-suite"}
    assert run_harness_cli(tmp_path, doc, other).exit_code == 2


def test_an_observation_holding_secret_like_text_is_malformed() -> None:
    doc = harness_suite(combinations=[combination("a")])
    leaky = observation(result={"envelope": {"note": f"Bearer {SECRET}"}})
    faults = {"a/lookup#1": leaky}
    result = run_harness(load_suite(json.dumps(doc)), ScriptedExecutor(faults), NOW)
    trial = result.cells[0].trials[0]
    assert trial.failure_class == "malformed-observation" and trial.observation is None
    assert "secret-like text" in (trial.diagnostic or "")
    assert SECRET not in json.dumps(result.to_json(), default=str)


def test_each_lane_takes_only_its_own_inputs(tmp_path: Path) -> None:
    doc = harness_suite()
    events = {"schema": "holonograph-recorded-events/v1", "events": []}
    (tmp_path / "events.json").write_text(json.dumps(events))
    wrong = run_harness_cli(tmp_path, doc, None, "--events", str(tmp_path / "events.json"))
    assert wrong.exit_code == 2 and "runs on --observations or over the store" in wrong.output
    legacy = {**harness_suite(), "combinations": [], "fixture": None}
    tagged = [{"kind": "cohort-tag-present", "tag": "x"}]
    legacy["scenarios"][0] = {**legacy["scenarios"][0], "expect": [], "assertions": tagged}
    legacy = {k: v for k, v in legacy.items() if v is not None}
    result = run_harness_cli(tmp_path, legacy, recorded(harness_suite()))
    assert result.exit_code == 2 and "apply to a suite with combinations" in result.output


def test_diagnostics_are_normalized_redacted_and_truncated() -> None:
    text = "token=" + "x" * 20 + "\n\tat https://user:pw@api.example.com:8443/v1/run?key=1 " * 20
    cleaned = normalize_diagnostic(f"Authorization: Bearer {SECRET} {text}")
    assert SECRET not in cleaned and "pw@" not in cleaned and "/v1/run" not in cleaned
    assert "\n" not in cleaned and len(cleaned) == 300 and cleaned.endswith("…")
    assert "api.example.com" in cleaned


# --- reductions and baselines -----------------------------------------------------------


def test_per_cell_reductions_match_hand_computation(tmp_path: Path) -> None:
    doc = harness_suite(combinations=[combination("a")], scenarios=[scenario(repetitions=4)])
    latencies, tokens, costs = [100.0, 200.0, 300.0, 1000.0], [10, 20, 30, 40], [0.1, 0.2, 0.3, 0.4]
    trials = {
        ("a", "lookup", r + 1): {"observation": observation(
            latencyMs=latencies[r], tokensInput=tokens[r], tokensOutput=5, costUsd=costs[r],
            retries=r, outcome="failed" if r == 2 else "succeeded")}
        for r in range(4)
    }  # fmt: skip
    result = run_harness_cli(tmp_path, doc, recorded(doc, trials), "--json")
    cell = json.loads(result.output)["combinations"][0]["scenarios"][0]
    assert cell["trialsRun"] == 4 and cell["passes"] == 3 and cell["passRate"] == 0.75
    # latency: mean 400; nearest-rank p95 of 4 values is the 4th; sample sd
    assert cell["latency"]["meanMs"] == 400.0 and cell["latency"]["p95Ms"] == 1000.0
    assert cell["latency"]["sdMs"] == pytest.approx(
        math.sqrt((300**2 + 200**2 + 100**2 + 600**2) / 3)
    )
    assert cell["tokens"] == {"total": 120.0, "mean": 30.0}  # (10+5)+(20+5)+(30+5)+(40+5)
    assert cell["costUsd"]["total"] == pytest.approx(1.0) and cell["costUsd"]["mean"] == 0.25
    assert cell["retries"] == {"total": 6, "mean": 1.5}
    # passes 1,1,0,1: sample variance = (3 * 0.25**2 + 0.75**2) / 3
    assert cell["passRateVariance"] == pytest.approx(statistics.variance([1, 1, 0, 1]))
    assert cell["passRateVariance"] == pytest.approx(0.25)
    assert cell["failureClasses"] == {"verification-failure": 1}


# 20 trials: latencies 1000, 1010, ..., 1190 (mean 1095, sd 59.2, nearest-rank p95 1180);
# 8 of them fail (pass rate 0.6, pass-rate variance 0.2526); tokens 120 and cost 0.002
# every trial.
FAILING = {1, 3, 6, 8, 11, 13, 16, 18}
BASELINE_KINDS = [
    ("pass-rate", {"passRate": 0.95}),
    ("latency-mean", {"meanLatencyMs": 900}),
    ("latency-p95", {"p95LatencyMs": 1000}),
    ("latency-sd", {"latencySdMs": 10}),
    ("pass-rate-variance", {"passRateVariance": 0.01}),
    ("tokens-mean", {"meanTokens": 100}),
    ("cost-mean", {"meanCostUsd": 0.0015}),
]


def _baseline_run(
    tmp_path: Path,
    baseline: dict[str, Any],
    combinations: int = 1,
    n: int = 20,
    failing: set[int] = FAILING,
) -> Any:
    # extended tier: a failed trial does not gate, so only the baseline can fail the run
    doc = harness_suite(
        combinations=[combination(f"c{i}") for i in range(combinations)],
        scenarios=[scenario(repetitions=n, tier="extended")],
        baselines=[{"revision": 5, "scenarioId": "lookup", **baseline}],
    )
    trials = {
        (f"c{c}", "lookup", i + 1): {"observation": observation(
            latencyMs=1000.0 + 10 * i, outcome="failed" if i in failing else "succeeded")}
        for c in range(combinations)
        for i in range(n)
    }  # fmt: skip
    return run_harness_cli(tmp_path, doc, recorded(doc, trials), "--json")


@pytest.mark.parametrize(("kind", "baseline"), BASELINE_KINDS, ids=[k for k, _ in BASELINE_KINDS])
def test_each_baseline_kind_regresses_and_exits_one(
    tmp_path: Path, kind: str, baseline: dict[str, Any]
) -> None:
    result = _baseline_run(tmp_path, baseline)
    assert result.exit_code == 1, result.output
    out = json.loads(result.output)
    assert out["failures"] == [] and [r["kind"] for r in out["regressions"]] == [kind]
    regression = out["regressions"][0]
    assert regression["baselineRevision"] == 5 and regression["pValue"] <= 0.05
    assert "significantly" in regression["reason"]
    cell = out["combinations"][0]["scenarios"][0]
    assert cell["baselineRevision"] == 5 and cell["status"] == "failed"


def test_an_unchanged_surface_within_sampling_error_does_not_regress(tmp_path: Path) -> None:
    # each observed statistic sits at (or just past) its baseline: the old point
    # comparison failed this run on the pass rate, the sd and the variance
    result = _baseline_run(tmp_path, {
        "passRate": 0.65, "meanLatencyMs": 1095, "p95LatencyMs": 1180, "latencySdMs": 55,
        "passRateVariance": 0.24, "meanTokens": 120, "meanCostUsd": 0.002,
        "latencyTolerance": 0, "varianceTolerance": 0, "tokenTolerance": 0, "costTolerance": 0,
    })  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["status"] == "passed" and out["baselineRevisions"] == [5]
    assert out["alpha"] == 0.05


def test_an_explicit_tolerance_is_honoured_on_top(tmp_path: Path) -> None:
    strict = _baseline_run(tmp_path, {"passRate": 0.95})
    assert [r["kind"] for r in json.loads(strict.output)["regressions"]] == ["pass-rate"]
    tolerant = _baseline_run(tmp_path, {"passRate": 0.95, "passRateTolerance": 0.4})
    assert tolerant.exit_code == 0, tolerant.output


def test_holm_holds_the_family_wise_rate_across_cells(tmp_path: Path) -> None:
    # 15 of 20 against 0.9: P(X <= 15) = 0.043, a regression alone at alpha 0.05, but
    # not when two cells share the run (Holm: the smallest p must be <= 0.025)
    fail5 = {0, 1, 2, 3, 4}
    one = _baseline_run(tmp_path, {"passRate": 0.9}, failing=fail5)
    assert one.exit_code == 1
    assert json.loads(one.output)["regressions"][0]["pValue"] == pytest.approx(0.0432, abs=1e-4)
    two = _baseline_run(tmp_path, {"passRate": 0.9}, combinations=2, failing=fail5)
    assert two.exit_code == 0, two.output


def test_a_baseline_without_values_regresses_as_missing_evidence(tmp_path: Path) -> None:
    doc = harness_suite(
        combinations=[combination("a")],
        baselines=[{"revision": 1, "meanCostUsd": 0.01}],
    )
    trials = {("a", "lookup", r): {"observation": observation(costUsd=None)} for r in (1, 2)}
    result = run_harness_cli(tmp_path, doc, recorded(doc, trials), "--json")
    assert result.exit_code == 1
    (regression,) = json.loads(result.output)["regressions"]
    assert regression["pValue"] is None and "no mean cost (USD) to compare" in regression["reason"]


# --- the worked example of docs/conformance.md ----------------------------------------------


def test_the_docs_worked_example_runs(tmp_path: Path) -> None:
    suite = str(EXAMPLES / "harness-suite.yaml")
    observations = str(EXAMPLES / "harness-observations.json")
    result = run_harness_cli(tmp_path, Path(suite).read_text(), None, "--observations",
                             observations, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["schema"] == "harness-conformance-result/v1" and out["status"] == "passed"
    assert [(c["combinationId"], c["status"]) for c in out["combinations"]] == [
        ("mini-strict", "passed"), ("large-strict", "passed"), ("hosted-strict", "skipped"),
    ]  # fmt: skip
    trial = out["combinations"][0]["scenarios"][0]["trials"][0]
    assert trial["launchManifestDigest"] == LAUNCH
    assert trial["providerRuntimeManifestDigest"] == RUNTIME
    assert trial["taskRef"] == "task-mini-strict-1" and trial["causalSequence"] == 1
    assert out["claims"][0]["combinations"] == {
        "mini-strict": "holds", "large-strict": "holds", "hosted-strict": "skipped",
    }  # fmt: skip
    checked = CliRunner().invoke(cli, ["conformance", "suite", "validate", suite])
    assert "3 combinations, 2 scenarios, 15 trials: ok" in checked.output
    text = run_harness_cli(tmp_path, Path(suite).read_text(), None, "--observations",
                           observations, "--allow-credential-gated")  # fmt: skip
    assert text.exit_code == 1
    assert "FAIL hosted-strict x rls-denied-column: missing evidence: 0 of 3" in text.output


def test_trial_input_key_names_the_cell_and_repetition() -> None:
    suite = load_suite(json.dumps(harness_suite()))
    trial = TrialInput(suite, suite.combinations[1], suite.scenarios[0], 2)
    assert trial.key == "b/lookup#2"
