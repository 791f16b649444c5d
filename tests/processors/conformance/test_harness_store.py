"""The store executor: each combination's trials are exactly the events of its slice
(light source, lens version, substrate values) within the scenario's surface,
selection, tenant and window; events become observations by the documented markers;
a run over the store is persisted per cell."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from holonograph.cli import cli
from processors.conformance.eval import DimensionView, EventView
from processors.conformance.executors import event_observation
from processors.conformance.suite import Trial
from schemas.harness import Observation
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS, HARNESS_CONFORMANCE_RESULTS
from testkit.backends import migrated_store
from tests.processors.conformance.harness_support import (
    LAUNCH,
    RUNTIME,
    SURFACE,
    combination,
    harness_suite,
)
from tests.processors.conformance.support import T0

COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "run_mode", "provenance", "timestamp", "markers",
    "cohort_tags", "latency_ms", "cost_usd", "tokens_input", "tokens_output", "fixture_id",
    "lens_version", "light_source_id", "substrate", "dimension_ids", "emission_stream",
    "emission_seq", "ingested_at",
)  # fmt: skip
DIMENSIONS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "surface_id", "run_mode", "timestamp",
    "ingested_at",
)  # fmt: skip
EVIDENCE = {
    "tool_invocations": ["query.run"],
    "launch_manifest_digest": [LAUNCH],
    "provider_runtime_manifest_digest": [RUNTIME],
}


def insert(store: Store, rows: Sequence[Mapping[str, Any]]) -> None:
    events, dims = [], []
    for seq, r in enumerate(rows):
        ts = T0 + dt.timedelta(minutes=r["at"])
        tenant, surface = r.get("tenant", "default"), r.get("surface", SURFACE)
        markers = r.get("markers", EVIDENCE)
        events.append([
            tenant, r["id"], surface, "production", "production-state", ts, markers, [],
            r.get("latency", 1000.0), r.get("cost", 0.002), r.get("tokens_in", 100),
            r.get("tokens_out", 20), r.get("fixture", "core/lookup"),
            r.get("lens", "v2"), r["light"], r.get("substrate", {}),
            ["correctness"], "stream-1", seq, T0,
        ])  # fmt: skip
        dims.append([tenant, r["id"], "correctness", r.get("passed", True), surface,
                     "production", ts, T0])  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, events, COLUMNS)
    store.insert(EVALUATION_DIMENSIONS.qualified, dims, DIMENSIONS)


def suite_doc() -> dict[str, Any]:
    return harness_suite(
        combinations=[
            combination("a", select={"lightSourceId": "model-a"}),
            combination(
                "b",
                select={
                    "lightSourceId": "model-b",
                    "lensVersion": "v2",
                    "substrate": {"policy": "strict", "region": "eu"},
                },
            ),
        ],
        scenarios=[
            {
                "scenarioId": "lookup",
                "surfaceId": SURFACE,
                "select": {"fixtureId": "core/lookup"},
                "repetitions": 2,
                "expect": [
                    {"kind": "outcome", "oneOf": ["succeeded"]},
                    {"kind": "tool-calls", "calls": [{"tool": "query.run"}], "only": True},
                ],
            }
        ],
    )


STRICT_EU = {"policy": "strict", "region": "eu"}
ROWS = [
    {"id": "a1", "light": "model-a", "at": 1},
    {"id": "a2", "light": "model-a", "at": 2, "latency": 1200.0},
    {"id": "a3", "light": "model-a", "at": 3, "latency": 1400.0},
    {"id": "b1", "light": "model-b", "at": 4, "substrate": {**STRICT_EU, "extra": "x"}},
    {"id": "b2", "light": "model-b", "at": 5, "substrate": STRICT_EU},
    # decoys: each differs from b's slice (or a's) in one way only
    {"id": "b-lens", "light": "model-b", "at": 6, "lens": "v1", "substrate": STRICT_EU},
    {"id": "b-lax", "light": "model-b", "at": 7, "substrate": {"policy": "lax", "region": "eu"}},
    {"id": "b-noregion", "light": "model-b", "at": 8, "substrate": {"policy": "strict"}},
    {"id": "b-surface", "light": "model-b", "at": 9, "surface": "other", "substrate": STRICT_EU},
    {"id": "b-fixture", "light": "model-b", "at": 10, "fixture": "x", "substrate": STRICT_EU},
    {"id": "b-tenant", "light": "model-b", "at": 11, "tenant": "acme", "substrate": STRICT_EU},
    {"id": "b-late", "light": "model-b", "at": 200, "substrate": STRICT_EU},
    {"id": "a-tenant", "light": "model-a", "at": 12, "tenant": "acme"},
]
WINDOW = ["--since", T0.isoformat(), "--until", (T0 + dt.timedelta(hours=1)).isoformat()]


def run(tmp_path: Path, data: Path, *args: str) -> Any:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite_doc()))
    argv = ["conformance", "suite", "run", str(path), "--store", f"chdb://{data}", *args]
    return CliRunner().invoke(cli, argv)


@pytest.mark.clickhouse
def test_each_combination_reads_exactly_its_slice_and_the_run_is_persisted(
    tmp_path: Path,
) -> None:
    data = tmp_path / "store"
    with migrated_store(data) as store:
        insert(store, ROWS)
    result = run(tmp_path, data, *WINDOW, "--tenant", "default", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["executor"]["kind"] == "store"
    cells = {c["combinationId"]: c["scenarios"][0] for c in out["combinations"]}
    # the most recent `repetitions` events of each slice, oldest first
    assert [t["evidenceRef"] for t in cells["a"]["trials"]] == ["a2", "a3"]
    assert [t["evidenceRef"] for t in cells["b"]["trials"]] == ["b1", "b2"]
    assert cells["a"]["latency"]["meanMs"] == 1300.0 and cells["a"]["tokens"]["total"] == 240
    trial = cells["b"]["trials"][0]
    assert trial["launchManifestDigest"] == LAUNCH and trial["causalSequence"] == 3
    with migrated_store(data) as store:
        rows = store.query(
            f"SELECT combination_id, scenario_id, status, trials, passes, mean_latency_ms,"
            f" executor, run_status FROM {HARNESS_CONFORMANCE_RESULTS.qualified} FINAL"
            " ORDER BY combination_id"
        ).rows
    assert [tuple(r) for r in rows] == [
        ("a", "lookup", "passed", 2, 2, 1300.0, "store", "passed"),
        ("b", "lookup", "passed", 2, 2, 1000.0, "store", "passed"),
    ]


@pytest.mark.clickhouse
def test_a_short_slice_is_missing_evidence_and_a_bare_event_is_malformed(
    tmp_path: Path,
) -> None:
    data = tmp_path / "store"
    bare = {"tool_invocations": ["query.run"]}  # no manifest digests recorded
    with migrated_store(data) as store:
        insert(store, [
            {"id": "a1", "light": "model-a", "at": 1, "markers": bare},
            {"id": "a2", "light": "model-a", "at": 2, "passed": False},
            {"id": "b1", "light": "model-b", "at": 3, "substrate": STRICT_EU},
        ])  # fmt: skip
    result = run(tmp_path, data, *WINDOW, "--json", "--no-persist")
    assert result.exit_code == 1
    out = json.loads(result.output)
    cells = {c["combinationId"]: c["scenarios"][0] for c in out["combinations"]}
    assert [t["failureClass"] for t in cells["a"]["trials"]] == [
        "malformed-observation",
        "verification-failure",
    ]
    assert "b x lookup: missing evidence: 1 of 2 trials observed" in out["failures"]
    with migrated_store(data) as store:
        count = store.query(f"SELECT count() FROM {HARNESS_CONFORMANCE_RESULTS.qualified}").rows
    assert int(count[0][0]) == 0  # --no-persist


def test_an_event_becomes_an_observation_by_the_documented_markers() -> None:
    markers = {
        **EVIDENCE,
        "outcome": ["refused"],
        "tool_invocations": ["meta.search", "query.run"],
        "tool_outcomes": ["ok", "error"],
        "tool_argument_shapes": ["", "sql=string,limit=number"],
        "files_created": ["out/report.csv"],
        "files_deleted": ["tmp/x"],
        "approvals": ["export=denied"],
        "network_hosts": ["api.example.com"],
        "network_blocked_hosts": ["evil.test"],
        "policy_decisions": ["column-mask=deny"],
        "capabilities": ["browser=disabled"],
        "completion_schema": ["answer/v1"],
        "completion_valid": ["true"],
        "completion_fields": ["summary"],
        "result_envelope": ["ok=false", "rows=0", "mode=strict"],
        "error_code": ["column_denied"],
        "result_columns": ["a", "b"],
        "result_row_count": ["0"],
        "warning_codes": ["column_denied_mask@validator", "stale"],
        "rejection": ["permission=column_denied"],
        "retries": ["2"],
        "task_id": ["task-9"],
        "attempt_id": ["attempt-2"],
    }
    view = EventView("evt-1", T0, markers, (), 950.0, 0.01,
                     {"correctness": DimensionView(True, None)})  # fmt: skip
    obs = Observation.model_validate(
        event_observation(Trial(view, T0, SURFACE, "f", "test", 120, 7))
    )
    assert obs.outcome == "refused" and obs.retries == 2 and obs.tokens == 120
    assert [(c.tool, c.outcome, c.argument_shape) for c in obs.tool_calls] == [
        ("meta.search", "ok", {}),
        ("query.run", "error", {"sql": "string", "limit": "number"}),
    ]
    assert [(f.path, f.change) for f in obs.files] == [
        ("out/report.csv", "created"),
        ("tmp/x", "deleted"),
    ]
    assert [(n.host, n.blocked) for n in obs.network_attempts] == [
        ("api.example.com", False),
        ("evil.test", True),
    ]
    assert obs.result is not None and obs.result.envelope == {
        "ok": False,
        "rows": 0,
        "mode": "strict",
    }
    assert obs.result.error_code == "column_denied" and obs.result.row_count == 0
    assert [(w.code, w.source_service) for w in obs.warnings] == [
        ("column_denied_mask", "validator"),
        ("stale", None),
    ]
    assert obs.rejection is not None and obs.rejection.gate == "permission"
    assert obs.completion is not None and obs.completion.valid
    assert obs.capabilities == {"browser": "disabled"}
    assert obs.approvals[0].decision == "denied" and obs.policy_decisions[0].decision == "deny"
    assert (obs.task_ref, obs.attempt_ref, obs.causal_sequence, obs.evidence_ref) == (
        "task-9", "attempt-2", 7, "evt-1",
    )  # fmt: skip
    # without an outcome marker the graded dimensions decide it
    plain = EventView("evt-2", T0, EVIDENCE, (), None, None,
                      {"correctness": DimensionView(False, None)})  # fmt: skip
    assert event_observation(Trial(plain, T0, SURFACE, "f"))["outcome"] == "failed"


EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "conformance"
SLICES = {"mini-strict": ("pilot-mini", {"policy": "strict"}),
          "large-strict": ("pilot-large", {"policy": "strict"})}  # fmt: skip


def as_markers(obs: Mapping[str, Any]) -> dict[str, list[str]]:
    """An observation written as an SDK records it for the store lane (the inverse of
    `event_observation`, docs/conformance.md)."""
    calls = obs.get("toolCalls", [])
    result = obs.get("result", {})
    completion = obs.get("completion")
    lower = {True: "true", False: "false"}
    m: dict[str, list[str]] = {
        "outcome": [obs["outcome"]],
        "launch_manifest_digest": [obs["launchManifestDigest"]],
        "provider_runtime_manifest_digest": [obs["providerRuntimeManifestDigest"]],
        "retries": [str(obs.get("retries", 0))],
        "tool_invocations": [c["tool"] for c in calls],
        "tool_outcomes": [c["outcome"] for c in calls],
        "tool_argument_shapes": [
            ",".join(f"{k}={v}" for k, v in c.get("argumentShape", {}).items()) for c in calls
        ],
        "policy_decisions": [
            f"{d['policy']}={d['decision']}" for d in obs.get("policyDecisions", [])
        ],
        "capabilities": [f"{k}={v}" for k, v in obs.get("capabilities", {}).items()],
        "warning_codes": [f"{w['code']}@{w['sourceService']}" for w in obs.get("warnings", [])],
        "result_envelope": [
            f"{k}={lower.get(v, v)}" for k, v in result.get("envelope", {}).items()
        ],
    }
    for key, marker in (("taskRef", "task_id"), ("attemptRef", "attempt_id")):
        if key in obs:
            m[marker] = [obs[key]]
    if "errorCode" in result:
        m["error_code"] = [result["errorCode"]]
    if "columns" in result:
        m["result_columns"] = result["columns"]
    if "rowCount" in result:
        m["result_row_count"] = [str(result["rowCount"])]
    if completion:
        m["completion_schema"] = [completion["schemaId"]]
        m["completion_valid"] = [lower[completion["valid"]]]
        m["completion_fields"] = completion["fields"]
    return {k: v for k, v in m.items() if v}


@pytest.mark.clickhouse
def test_the_worked_example_runs_unchanged_over_stored_traffic(tmp_path: Path) -> None:
    recording = json.loads((EXAMPLES / "harness-observations.json").read_text())
    rows = []
    for n, t in enumerate(recording["trials"]):
        light, substrate = SLICES[t["combinationId"]]
        obs = t["observation"]
        rows.append({"id": f"evt-{n}", "light": light, "substrate": substrate, "at": n,
                     "fixture": f"core/{t['scenarioId']}", "markers": as_markers(obs),
                     "latency": obs["latencyMs"], "cost": obs["costUsd"],
                     "tokens_in": obs["tokensInput"],
                     "tokens_out": obs["tokensOutput"]})  # fmt: skip
    # another model's traffic on the same surface: no combination's slice
    rows.append({"id": "evt-other", "light": "pilot-xl", "at": 30,
                 "fixture": "core/average-by-region",
                 "markers": {**EVIDENCE, "outcome": ["failed"]}})  # fmt: skip
    data = tmp_path / "store"
    with migrated_store(data) as store:
        insert_rows = [{**r, "surface": "analyst-agent"} for r in rows]
        insert(store, insert_rows)
    suite = str(EXAMPLES / "harness-suite.yaml")
    argv = ["conformance", "suite", "run", suite, "--store", f"chdb://{data}", *WINDOW, "--json"]
    over_store = CliRunner().invoke(cli, argv)
    recorded_lane = ["--observations", str(EXAMPLES / "harness-observations.json"), "--json"]
    played = CliRunner().invoke(cli, ["conformance", "suite", "run", suite, *recorded_lane])
    assert over_store.exit_code == 0 and played.exit_code == 0, over_store.output
    keep = ("status", "trialsRun", "passes", "passRate", "passRateVariance", "latency", "retries",
            "failureClasses", "baselineRevision", "regressions")  # fmt: skip

    def cells(output: str) -> list[dict[str, Any]]:
        out = json.loads(output)
        return [{"combination": c["combinationId"], **{k: cell[k] for k in keep},
                 "tokens": cell["tokens"]["total"], "cost": round(cell["costUsd"]["total"], 9)}
                for c in out["combinations"] for cell in c["scenarios"]]  # fmt: skip

    assert cells(over_store.output) == cells(played.output)
    assert json.loads(over_store.output)["claims"] == json.loads(played.output)["claims"]
