"""Harness conformance results in the store: one row per (run, combination, scenario)
cell, written after a run, read by the report (its latest run per suite)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from processors.conformance.result import HarnessResult
from schemas.store import Store
from schemas.tables import HARNESS_CONFORMANCE_RESULTS
from schemas.times import from_store_time, to_store_time


def run_id(result: HarnessResult) -> str:
    """Stable for one suite version run at one instant (a re-write is the same rows)."""
    seed = f"{result.suite.suite_id}|{result.suite.revision}|{result.ran_at.isoformat()}"
    return "hcr_" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def persist(store: Store, result: HarnessResult, tenant_id: str) -> str:
    """Append the run's cells (a skipped combination's cells too); returns the run id."""
    out = result.to_json()
    rid = run_id(result)
    rows = []
    for combo in out["combinations"]:
        gated = combo["status"] == "skipped"
        cells = combo["scenarios"] or [
            {"scenarioId": s.scenario_id, "surfaceId": s.surface_id, "tier": s.tier}
            for s in result.suite.scenarios
        ]
        for c in cells:
            latency = c.get("latency", {})
            rows.append([
                tenant_id, rid, result.suite.suite_id, result.suite.revision, out["suiteDigest"],
                to_store_time(result.ran_at), out["status"], result.executor["kind"],
                combo["combinationId"], combo["provider"], combo["model"], combo["profile"],
                combo["policy"], combo["sandbox"], c["scenarioId"], c["surfaceId"], c["tier"],
                "skipped" if gated else c["status"], c.get("trialsRun", 0), c.get("passes", 0),
                c.get("missing", 0), c.get("passRate"), latency.get("meanMs"),
                latency.get("p95Ms"), latency.get("sdMs"), c.get("tokens", {}).get("total"),
                c.get("costUsd", {}).get("total"), c.get("retries", {}).get("total", 0),
                c.get("failureClasses", {}), c.get("baselineRevision"),
                [r["reason"] for r in c.get("regressions", [])], c.get("failures", []),
            ])  # fmt: skip
    store.insert(HARNESS_CONFORMANCE_RESULTS.qualified, rows, HARNESS_CONFORMANCE_RESULTS.columns)
    return rid


@dataclass(frozen=True)
class CellRow:
    combination_id: str
    scenario_id: str
    status: str
    trials: int
    pass_rate: float | None
    p95_latency_ms: float | None
    failure_classes: dict[str, int]
    regressions: tuple[str, ...]


@dataclass(frozen=True)
class SuiteRun:
    suite_id: str
    suite_revision: int
    run_id: str
    ran_at: dt.datetime
    status: str
    executor: str
    cells: tuple[CellRow, ...]


def latest_runs(
    store: Store, since: dt.datetime, until: dt.datetime, tenant_id: str | None
) -> list[SuiteRun]:
    """The latest run of each suite in [since, until), its cells in stored order."""
    t = HARNESS_CONFORMANCE_RESULTS.qualified
    rows = store.query(
        f"""
        SELECT suite_id, suite_revision, run_id, ran_at, run_status, executor, combination_id,
               scenario_id, status, trials, pass_rate, p95_latency_ms, failure_classes,
               regressions
        FROM {t} FINAL
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND (tenant_id, suite_id, run_id) IN (
              SELECT tenant_id, suite_id, argMax(run_id, ran_at) FROM {t} FINAL
              WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
                AND ran_at >= {{since:DateTime64(3, 'UTC')}}
                AND ran_at < {{until:DateTime64(3, 'UTC')}}
              GROUP BY tenant_id, suite_id)
        ORDER BY suite_id, combination_id, scenario_id
        """,
        {"tenant": tenant_id or "", "since": to_store_time(since), "until": to_store_time(until)},
    ).rows
    runs: dict[str, SuiteRun] = {}
    cells: dict[str, list[CellRow]] = {}
    for (
        suite,
        rev,
        rid,
        at,
        status,
        executor,
        combo,
        scenario,
        cell,
        n,
        rate,
        p95,
        fc,
        regs,
    ) in rows:
        key = f"{suite}|{rid}"
        runs.setdefault(key, SuiteRun(str(suite), int(rev), str(rid), from_store_time(at),
                                      str(status), str(executor), ()))  # fmt: skip
        cells.setdefault(key, []).append(
            CellRow(
                str(combo),
                str(scenario),
                str(cell),
                int(n),
                rate,
                p95,
                {str(k): int(v) for k, v in dict(fc).items()},
                tuple(regs),
            )
        )
    return [
        SuiteRun(
            r.suite_id, r.suite_revision, r.run_id, r.ran_at, r.status, r.executor, tuple(cells[k])
        )
        for k, r in runs.items()
    ]


def summary(cells: Sequence[CellRow]) -> dict[str, int]:
    return {s: sum(1 for c in cells if c.status == s) for s in ("passed", "failed", "skipped")}
