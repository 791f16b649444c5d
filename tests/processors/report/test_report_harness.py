"""The report shows the latest harness conformance run of each suite in the window
(its cells passed / failed / skipped and why the failing ones failed); an older run,
a run outside the window and another tenant's run never."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from processors.conformance.record import persist
from processors.conformance.runner import run_harness
from processors.conformance.suite import load_suite
from processors.report.gather import ReportRequest, gather
from processors.report.html import render
from processors.report.job import Report
from testkit.backends import migrated_store
from tests.processors.conformance.harness_support import (
    ScriptedExecutor,
    combination,
    harness_suite,
    observation,
)

pytestmark = pytest.mark.clickhouse

SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
SUITE = load_suite(json.dumps(harness_suite(
    combinations=[combination("a"), combination("b"), combination("c", credentialGated=True)],
)))  # fmt: skip


def test_the_report_shows_the_latest_harness_run_of_each_suite(tmp_path: Path) -> None:
    failing = ScriptedExecutor({"b/lookup#2": observation(outcome="policy-blocked")})
    with migrated_store(tmp_path / "store") as store:
        persist(
            store, run_harness(SUITE, ScriptedExecutor(), SINCE + dt.timedelta(hours=1)), "default"
        )
        persist(store, run_harness(SUITE, failing, SINCE + dt.timedelta(hours=5)), "default")
        persist(
            store, run_harness(SUITE, ScriptedExecutor(), UNTIL + dt.timedelta(hours=1)), "default"
        )  # after the window
        persist(
            store, run_harness(SUITE, ScriptedExecutor(), SINCE + dt.timedelta(hours=9)), "globex"
        )  # another tenant's newer run
        request = ReportRequest(SINCE, UNTIL, UNTIL, tenant_id="default")
        data = gather(store, request, [], lambda _: None)
    (run,) = Report(data).to_json()["harnessConformance"]
    assert run["suiteId"] == "analyst-release" and run["status"] == "failed"
    assert run["ranAt"] == SINCE + dt.timedelta(hours=5)
    assert run["cells"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert run["failing"] == [
        {"combinationId": "b", "scenarioId": "lookup", "passRate": 0.5,
         "failureClasses": {"policy-block": 1}, "regressions": []},
    ]  # fmt: skip
    page = render(data)
    assert '<h2 id="harness">Harness conformance</h2>' in page
    assert 'data-metric="harness/analyst-release/failed">1</td>' in page
    assert "b x lookup (policy-block)" in page
