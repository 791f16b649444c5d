"""The operator's path through the CLI: three prose rules -> derive -> approve -> a
nightly check whose verdicts land in ClickHouse; reject, list, inline checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from testkit.backends import migrated_store
from tests.processors.conformance.support import event, insert_events

pytestmark = pytest.mark.clickhouse
EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "conformance"
WINDOW = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["conformance", *args])


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "store"
    with migrated_store(data) as store:
        insert_events(
            store,
            [
                event("e1", {"user_message": ["I want a refund"],
                             "tool_invocations": ["refund_lookup"],
                             "response_text": ["You are owed $40."]}),
                event("e2", {"user_message": ["refund?"], "tool_invocations": [],
                             "response_text": ["That is $12."]}),
                event("e3", {"user_message": ["hi"], "tool_invocations": [],
                             "response_text": ["Hello!"]}),
            ],
        )  # fmt: skip
    return data


def test_three_rules_to_nightly_check(tmp_path: Path, data_dir: Path) -> None:
    candidates = tmp_path / "candidates.json"
    derived = invoke("derive", str(EXAMPLES / "surface.yaml"), "-o", str(candidates), "--json")
    assert derived.exit_code == 0, derived.output
    assert json.loads(derived.output)["coverage"]["summary"] == (
        "2 of 3 rules mechanically enforceable"
    )
    store = ["--data-dir", str(data_dir)]
    refused = invoke("approve", str(candidates), "--approver", "brian", *store)
    assert refused.exit_code == 2 and "--fixture-id or --all" in refused.output
    approved = invoke("approve", str(candidates), "--approver", "brian", "--all", *store, "--json")
    assert approved.exit_code == 0, approved.output
    records = json.loads(approved.output)
    assert [(r["version"], r["created"]) for r in records] == [(1, True)] * 3
    assert all(r["eventId"].startswith("apv_") for r in records)

    checked = invoke("check", "--surface", "classify-intent", *WINDOW, *store, "--json")
    assert checked.exit_code == 1, checked.output  # a rule failed: the nightly job says so
    results = {r["fixtureId"]: r for r in json.loads(checked.output)}
    assert {k: r["verdict"] for k, r in results.items()} == {
        "fx-billing-triage-refund-flow-01": "fail",
        "fx-classify-intent-r02": "fail",
        "fx-classify-intent-r03": "requires-judge",
    }
    assert results["fx-billing-triage-refund-flow-01"]["counts"]["not-applicable"] == 1

    # the verdicts are in ClickHouse for dashboards
    with migrated_store(data_dir) as reopened:
        rows = reopened.query(
            "SELECT fixture_id, fixture_version, verdict FROM holonograph.conformance_results"
            " FINAL ORDER BY fixture_id"
        ).rows
    assert rows == [
        ("fx-billing-triage-refund-flow-01", 1, "fail"),
        ("fx-classify-intent-r02", 1, "fail"),
        ("fx-classify-intent-r03", 1, "requires-judge"),
    ]
    history = invoke("results", "--surface", "classify-intent", *store, "--json")
    assert history.exit_code == 0, history.output
    listed = json.loads(history.output)
    assert sorted(r["fixtureId"] for r in listed) == sorted(results)
    assert {r["checkId"] for r in listed} == {r["checkId"] for r in results.values()}
    refund = next(r for r in listed if r["fixtureId"] == "fx-billing-triage-refund-flow-01")
    assert refund["counts"] == results["fx-billing-triage-refund-flow-01"]["counts"]
    assert refund["fixtureDigest"] == results["fx-billing-triage-refund-flow-01"]["fixtureDigest"]
    assert "fail" in invoke("results", "--fixture-id", "fx-classify-intent-r02", *store).output


def test_approve_reject_list_and_inline_check(tmp_path: Path, data_dir: Path) -> None:
    store = ["--data-dir", str(data_dir)]
    first = invoke("approve", str(EXAMPLES / "approval.json"), *store)
    assert first.exit_code == 0 and "recorded" in first.output
    again = invoke("approve", str(EXAMPLES / "approval.json"), *store)
    assert "unchanged (already in force)" in again.output

    edited = json.loads((EXAMPLES / "approval.json").read_text())
    edited["fixture"]["when"][0]["value"] = "money back"
    edited_path = tmp_path / "edited.json"
    edited_path.write_text(json.dumps(edited))
    assert invoke("approve", str(edited_path), "--approver", "ana", *store).exit_code == 0

    no_comment = invoke("reject", str(edited_path), *store)
    assert no_comment.exit_code == 2 and "--comment is required" in no_comment.output
    rejected = invoke("reject", str(edited_path), "--comment", "Too narrow.", *store)
    assert rejected.exit_code == 0, rejected.output

    history = invoke("list", "--fixture-id", "refund-requires-lookup", *store, "--json")
    versions = [(r["version"], r["action"], r["approverId"]) for r in json.loads(history.output)]
    assert versions == [(1, "approved", "brian"), (2, "approved", "ana"), (3, "rejected", "brian")]
    listed = invoke("list", *store)
    assert "rejected" in listed.output and "Too narrow." in listed.output

    missing = invoke("check", "--fixture-id", "refund-requires-lookup", *WINDOW, *store)
    assert missing.exit_code == 2 and "no approved fixture" in missing.output

    inline = invoke("check", "--fixture", str(EXAMPLES / "fixture.yaml"), *WINDOW, *store,
                    "--no-persist", "--verdict", "fail")  # fmt: skip
    assert inline.exit_code == 1, inline.output
    assert "e2" in inline.output and "e3" not in inline.output.split("events 1..")[-1]


def test_invalid_inputs(tmp_path: Path) -> None:
    typo = json.loads((EXAMPLES / "approval.json").read_text())
    typo["aproverId"] = typo.pop("approverId")
    (tmp_path / "typo.json").write_text(json.dumps(typo))
    result = invoke("approve", str(tmp_path / "typo.json"), "--data-dir", str(tmp_path / "d"))
    assert result.exit_code == 2 and "aproverId: Extra inputs are not permitted" in result.output
    bad = tmp_path / "surface.yaml"
    bad.write_text("surfaceId: s\nrules: [Be polite.]\nprompt: do anything\n")
    result = invoke("derive", str(bad))
    assert result.exit_code == 2 and "prompt: Extra inputs are not permitted" in result.output
    shutil.copy(EXAMPLES / "fixture.yaml", tmp_path / "fx.yaml")
    result = invoke("check", "--fixture", str(tmp_path / "fx.yaml"), "--surface", "other",
                    *WINDOW, "--data-dir", str(tmp_path / "nowhere"), "--no-persist")  # fmt: skip
    assert result.exit_code == 3  # no store there


@pytest.mark.e2e
def test_nightly_check_while_serve_holds_the_store(tmp_path: Path) -> None:
    """The collector runs; approvals, checks and suites reach its store through the admin
    endpoint, over events sent with the official OTLP exporter."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.holonograph.cli.test_serve import ServeProcess, holonograph
    from tests.otel_emit import Evaluation, export_grpc, record_spans

    data = tmp_path / "data"
    serve = ServeProcess(data)
    try:
        spans = record_spans(
            [
                Evaluation("nightly", i, event_id=f"evt_n{i}", dims=[], extra={
                    "holonograph.marker.user_message": "refund please",
                    "holonograph.marker.tool_invocations": tools,
                    "holonograph.fixture.id": "refund-request",
                    "holonograph.latency_ms": 800.0 + i,
                    "holonograph.cost.usd": 0.003,
                })
                for i, tools in enumerate([["refund_lookup"], ["refund_lookup"], ["refund_lookup"]])
            ]
        )  # fmt: skip
        assert export_grpc(serve.grpc_endpoint, spans) is SpanExportResult.SUCCESS
        store = ["--data-dir", str(data)]
        window = ["--since", "2026-11-30T13:00:00Z", "--until", "2026-11-30T15:00:00Z"]
        approved = holonograph("conformance", "approve", str(EXAMPLES / "approval.json"), *store)
        assert approved.returncode == 0, approved.stderr
        checked = holonograph("conformance", "check", "--surface", "classify-intent", *window,
                              *store, "--json")  # fmt: skip
        assert checked.returncode == 0, checked.stderr
        (result,) = json.loads(checked.stdout)
        assert result["verdict"] == "pass" and result["counts"]["pass"] == 3
        persisted = holonograph(
            "query",
            *store,
            "--json",
            "SELECT verdict, count_pass FROM holonograph.conformance_results",
        )
        assert json.loads(persisted.stdout) == [{"verdict": "pass", "count_pass": 3}]
        gate = holonograph("conformance", "suite", "run", str(EXAMPLES / "suite.yaml"), *window,
                           *store)  # fmt: skip
        # the example's polite-answer scenario allows requires-judge; cost mean 0.003 is
        # under the 0.004 baseline; latency p95 802 ms under 1500 ms
        assert gate.returncode == 0, gate.stdout + gate.stderr
    finally:
        code, stderr = serve.stop()
    assert code == 0, stderr


def test_check_of_a_surface_with_no_live_fixture_exits_2(tmp_path: Path, data_dir: Path) -> None:
    """A scheduled gate whose fixtures were all rejected must not pass checking nothing."""
    store = ["--data-dir", str(data_dir)]
    never = invoke("check", "--surface", "classify-intent", *WINDOW, *store)
    assert never.exit_code == 2
    assert "error: no live fixture for surface classify-intent: nothing was checked" in (
        never.stderr
    )
    assert "hint: approve one with `holonograph conformance approve`" in never.stderr
    assert never.stdout == ""
    candidates = tmp_path / "candidates.json"
    assert invoke("derive", str(EXAMPLES / "surface.yaml"), "-o", str(candidates)).exit_code == 0
    decided = ["--approver", "brian", "--all", *store]
    assert invoke("approve", str(candidates), *decided).exit_code == 0
    assert invoke("reject", str(candidates), *decided, "--comment", "wrong").exit_code == 0
    rejected = invoke("check", "--surface", "classify-intent", *WINDOW, *store, "--json")
    assert rejected.exit_code == 2
    assert rejected.stdout == ""
    assert "no live fixture for surface classify-intent" in rejected.stderr
