"""Drift reads the change events (docs/changes.md): a shift the event layers do not
explain but that starts at a recorded change is attributed by the change's kind, with
the change in its evidence; a shift a week after a change is not attributed to it; an
availability mark is a bracketed window; another tenant's changes are never cited; the
timing test rejects a change inside a wide window that the shift does not start at."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from processors.drift.job import DriftRequest, persist_drift, run_drift
from processors.drift.recorded import TIMING_LEVEL, timing
from processors.series import changepoint as cp
from processors.series.cells import Series
from schemas.analysis import ChangePoint, DriftReport
from schemas.changelog import mark_availability, record_change
from schemas.changes import AvailabilityMark, ChangeRecord
from schemas.contracts import Contract
from schemas.registry import register
from schemas.store import Store
from testkit.backends import fresh_store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
HOURS = 240
SHIFT = 160  # the hour every seeded shift starts at
WEEK = 168
LATE = 190  # the shift a week after a deploy
AGENT = "scenario-agent"  # the agent testkit.scenarios writes


def hour(h: float) -> dt.datetime:
    return START + dt.timedelta(hours=h)


def silent(surface: str, at: int = SHIFT, **kw: Any) -> SurfaceSpec:
    """A shift nothing on the events records, on a surface alone behind its alias."""
    return SurfaceSpec(surface, start=START.replace(tzinfo=None), tau=0.01, events=(100, 300),
                       buckets=HOURS, alias=f"solo/{surface}", served=f"solo/{surface}/v1",
                       changes=(Change(at, -0.08, ("silent",)),), **kw)  # fmt: skip


SPECS = [
    silent("deployed"),
    silent("agent-wide"),
    silent("late", at=LATE),
    silent("vendor"),
    silent("contracted"),
    silent("outage"),
    silent("unrecorded"),
]


def deploy(store: Store, at: dt.datetime, tenant: str = "default", **scope: str) -> None:
    record = ChangeRecord.model_validate(
        {"kind": "deploy", "at": at, "description": "billing v1.4.2", "artifactVersion": "1.4.2",
         **scope}
    )  # fmt: skip
    record_change(store, tenant, record, at)


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_server: str | None
) -> Iterator[Store]:
    path: Path = tmp_path_factory.mktemp("recorded-changes")
    store = fresh_store(path, clickhouse_server)
    write_cells(store, [c for s in SPECS for c in generate(s, seed=7)], dt.datetime(2026, 7, 1))
    deploy(store, hour(SHIFT), surfaceId="deployed")
    deploy(store, hour(SHIFT), agentId="other-agent")  # not the surface's agent: not cited
    deploy(store, hour(SHIFT), tenant="globex", surfaceId="deployed")  # another tenant's
    # "agent-wide" gets the deploy agent-wide, of the agent its events name
    deploy(store, hour(SHIFT), agentId=AGENT, surfaceId="agent-wide")
    deploy(store, hour(LATE - WEEK), surfaceId="late")  # a week before its shift
    record_change(store, "default", ChangeRecord(
        surface_id="vendor", kind="vendor", at=hour(SHIFT), description="vendor moved the model"
    ), hour(SHIFT))  # fmt: skip
    surface = {"id": "contracted", "dimensions": [{"id": "correctness", "type": "boolean"}]}
    contract = {"agentId": AGENT, "surfaces": [surface]}
    register(store, "default", Contract.model_validate(contract), hour(SHIFT))
    mark = AvailabilityMark.model_validate(
        {"mode": "paired", "lightSourceId": "solo/outage", "unreachableFrom": hour(100),
         "unreachableUntil": hour(106), "reason": "vendor-outage"}
    )  # fmt: skip
    mark_availability(store, "default", mark, hour(107))
    unrelated = mark.model_copy(update={"light_source_id": "elsewhere/model"})
    mark_availability(store, "default", unrelated, hour(107))
    yield store
    store.close()


def drift(store: Store, surface: str, tenant: str | None = "default") -> DriftReport:
    return run_drift(store, DriftRequest(surface, START, hour(HOURS), tenant_id=tenant))


def only_point(report: DriftReport, at: int = SHIFT) -> ChangePoint:
    """The change point of the seeded shift at hour `at` (within 3 hours); any other is
    a small false alarm of the seeded noise, never attributed to a recorded change."""
    near = [p for p in report.change_points if abs(_hours(p.timestamp) - at) <= 3]
    (point,) = near
    for other in report.change_points:
        assert other is point or not other.change_events
    return point


def _hours(moment: dt.datetime) -> float:
    return (moment.replace(tzinfo=dt.UTC) - START) / dt.timedelta(hours=1)


def test_a_shift_at_a_recorded_deploy_is_substrate_with_the_deploy_in_evidence(
    store: Store,
) -> None:
    unexplained = only_point(drift(store, "unrecorded"))
    assert (unexplained.source, unexplained.confident) == ("substrate", False)
    assert unexplained.change_events == []

    report = drift(store, "deployed")
    point = only_point(report)
    assert (point.source, point.confident) == ("substrate", True), point.reason
    assert "starts at a recorded change: deploy 1.4.2" in point.reason
    (cited,) = point.change_events  # not other-agent's, not globex's
    assert (cited.kind, cited.layer, cited.surface_id, cited.at) == (
        "deploy", "substrate", "deployed", hour(SHIFT)
    )  # fmt: skip
    assert cited.timing.inside and cited.timing.starts_here
    assert cited.timing.p_value <= TIMING_LEVEL
    assert point.timestamp.replace(tzinfo=dt.UTC) == hour(SHIFT)
    assert [b.reason for b in report.bracketed_windows] == []
    evidence = point.to_json()["changeEvents"][0]
    assert evidence["timing"]["startsHere"] is True and evidence["at"] == "2026-06-07T16:00:00Z"


def test_an_agent_wide_change_of_the_surfaces_agent_is_cited(store: Store) -> None:
    point = only_point(drift(store, "agent-wide"))
    assert (point.source, point.confident) == ("substrate", True), point.reason
    (cited,) = point.change_events
    assert (cited.agent_id, cited.surface_id) == (AGENT, "agent-wide")


def test_a_shift_a_week_after_a_change_is_not_attributed_to_it(store: Store) -> None:
    point = only_point(drift(store, "late"), LATE)
    assert point.change_events == []
    assert (point.source, point.confident) == ("substrate", False)
    assert "deploy" not in point.reason and point.reason.startswith("significant shift")


def test_the_changes_kind_names_the_layer(store: Store) -> None:
    vendor = only_point(drift(store, "vendor"))
    assert (vendor.source, vendor.confident) == ("light source", True), vendor.reason
    assert [c.kind for c in vendor.change_events] == ["vendor"]
    contracted = only_point(drift(store, "contracted"))
    assert (contracted.source, contracted.confident) == ("lens", True), contracted.reason
    (cited,) = contracted.change_events
    assert (cited.kind, cited.origin, cited.artifact_id) == ("contract", "contracts", AGENT)


def test_another_tenant_sees_none_of_these_changes(store: Store) -> None:
    assert drift(store, "deployed", tenant="globex").change_points == []


def test_an_availability_mark_is_a_bracketed_window(store: Store) -> None:
    report = drift(store, "outage")
    (bracket,) = [b for b in report.bracketed_windows if b.reason == "availability"]
    assert (_hours(bracket.from_), _hours(bracket.to)) == (100, 106)
    assert bracket.detail == "solo/outage marked unavailable: vendor-outage"
    others = drift(store, "unrecorded").bracketed_windows
    assert [b for b in others if b.reason == "availability"] == []  # not its light source


def test_the_evidence_is_persisted_with_the_run(store: Store) -> None:
    report = drift(store, "deployed")
    persist_drift(store, report, lambda: hour(HOURS + 1))
    (evidence,) = store.query(
        "SELECT evidence FROM holonograph.drift_change_points FINAL"
        " WHERE run_id = {run:String} AND kind = 'change_point'",
        {"run": report.run_id},
    ).rows[0]
    assert [c["kind"] for c in json.loads(evidence)["changeEvents"]] == ["deploy"]


def test_a_change_inside_a_wide_window_fails_the_placebo_half() -> None:
    """A weak shift in a short day-bucket series: its confidence set spans days, so a
    change two days off is inside it, yet most placebo times fit as well."""
    rng = np.random.default_rng(11)
    days = 40
    n = np.full(days, 60.0)
    p = np.where(np.arange(days) < 20, 0.80, 0.74)
    y = rng.binomial(n.astype(int), p).astype(float)
    detection = cp.detect(cp.BucketSeries(n, y), cp.DetectConfig(alpha=0.2), seed=3)
    raw = max(detection.change_points, key=lambda c: c.gain)
    grid = [dt.datetime(2026, 6, 1) + dt.timedelta(days=d) for d in range(days)]
    series = Series(grid, n, y, y, True, [], np.zeros(0, dtype=np.int64))
    at_shift = timing(series, raw, (grid[raw.index]).replace(tzinfo=dt.UTC))
    assert at_shift.inside
    wide = [d for d in range(raw.lo, raw.hi + 1) if abs(d - raw.index) >= 2 and raw.plausible(d)]
    assert wide, "the confidence set should span days"
    away = timing(series, raw, grid[wide[0]].replace(tzinfo=dt.UTC))
    assert away.inside and away.p_value > at_shift.p_value
    assert not away.starts_here
    outside = timing(series, raw, grid[0].replace(tzinfo=dt.UTC))
    assert not outside.inside and not outside.starts_here
