"""The report shows recorded changes on each surface's timeline: a deploy as a line
labelled by its kind, an availability interval as a region, both listed in the
surface's table of recorded changes; another tenant's or another surface's changes
never appear."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from processors.report.gather import ReportRequest, gather, steps, surfaces_in_window
from processors.report.html import render
from schemas.changelog import mark_availability, record_change
from schemas.changes import AvailabilityMark, ChangeRecord
from testkit.backends import migrated_store
from testkit.multiplex import BETTER, MultiplexSpec, seed

pytestmark = pytest.mark.clickhouse

SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
SURFACE = "classify-intent"


def test_the_report_annotates_the_timeline_with_recorded_changes(tmp_path: Path) -> None:
    with migrated_store(tmp_path / "store") as store:
        seed(store, MultiplexSpec(calls=60, fallbacks=5), 3)
        deploy = ChangeRecord(
            surface_id=SURFACE, kind="deploy", at=SINCE + dt.timedelta(hours=6),
            description="billing v1.4.2", id="deploy-142", artifact_version="1.4.2",
        )  # fmt: skip
        record_change(store, "default", deploy, SINCE)
        outage = AvailabilityMark(
            mode="paired", light_source_id=BETTER, unreachable_from=SINCE + dt.timedelta(hours=9),
            unreachable_until=SINCE + dt.timedelta(hours=11), reason="vendor-outage", id="out-1",
        )  # fmt: skip
        mark_availability(store, "default", outage, SINCE)
        elsewhere = deploy.model_copy(update={"surface_id": "route", "id": "deploy-route"})
        record_change(store, "default", elsewhere, SINCE)
        record_change(store, "globex", deploy.model_copy(update={"id": "theirs"}), SINCE)
        request = ReportRequest(SINCE, UNTIL, UNTIL, tenant_id="default")
        surfaces = surfaces_in_window(store, request)
        said: list[str] = []
        data = gather(store, request, surfaces, said.append)
    assert len(said) == steps(request, surfaces)
    (section,) = data.surfaces
    assert [c.change_id for c in section.changes] == ["deploy-142", "out-1"]
    page = render(data)
    lines = re.findall(r'<g data-change="deploy-142"><line[^>]*stroke-dasharray', page)
    assert len(lines) == len(section.series) >= 1  # on every pass-rate chart
    assert re.search(r'<rect data-change="out-1" x="[\d.]+" y="\d+" width="[\d.]+"', page)
    assert ">deploy</text><title>deploy 2026-06-01T06:00:00Z: billing v1.4.2</title>" in page
    table = page[page.index("<h3>Recorded changes</h3>") :]
    assert '<tr data-change="deploy-142">' in table and '<tr data-change="out-1">' in table
    assert "vendor-outage" in table and "1.4.2" in table
    assert "deploy-route" not in page and "theirs" not in page
