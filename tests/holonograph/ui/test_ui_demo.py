"""The first hour as the issue's "done when" puts it (issue 27): a newcomer runs `serve`,
then `demo`, opens one URL and sees what the collector knows. Headless Chromium against
a live `serve` without tokens (loopback, tenant `default`) after `holonograph demo`: the
overview counts the demo's evaluations on its three surfaces, the surface page shows the
planted vendor change as a change point attributed to the light source and the deploy
as a recorded change, and the streams page lists the gap stream as lossy, each value the
API's JSON for the same request. Screenshots in `test-artifacts/ui/demo-*.png`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.browser import CHROMIUM
from tests.e2e.test_report_browser import LoggingProxy
from tests.holonograph.cli.test_serve import ServeProcess, holonograph
from tests.holonograph.ui.test_ui_browser import Live, _browse, _page, _shown

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SINCE, UNTIL = "2026-11-13T00:00:00Z", "2026-11-20T00:00:00Z"
DEMO = ["demo", "--days", "7", "--calls-per-day", "48", "--until", UNTIL, "--seed", "5"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, dict[str, Any]]]:
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (`apt-get install -y chromium`)")
    base = tmp_path_factory.mktemp("ui-demo")
    server = ServeProcess(base / "data")
    proxy = LoggingProxy()
    try:
        assert server.process.stdout is not None
        lines = list(server.lines)
        while not any(line.startswith("web UI") for line in lines):
            lines.append(server.process.stdout.readline())
            assert lines[-1], lines
        found = re.search(r"web UI +(http://127\.0\.0\.1:\d+/ui/)", lines[-1])
        assert found, lines
        live = Live(found[1].removesuffix("/ui/"), found[1], base, proxy)
        sent = holonograph(*DEMO, "--endpoint", live.url, "--json")
        assert sent.returncode == 0, sent.stderr
        yield live, json.loads(sent.stdout)
    finally:
        proxy.close()
        code, stderr = server.stop()
        assert code == 0, stderr


def _look(live: Live, fragment: str, name: str) -> dict[str, str]:
    async def work(browser: Any) -> dict[str, str]:
        return await _shown(await _page(browser, live, fragment, token=None), name)

    shown: dict[str, str] = _browse(live, work)
    return shown


def test_the_overview_counts_the_demos_evaluations(demo: tuple[Live, dict[str, Any]]) -> None:
    live, sent = demo
    shown = _look(live, f"#/overview?poll=0&since={SINCE}&until={UNTIL}", "demo-overview")
    (tenant,) = live.json("/holonograph/status")["tenants"]
    assert tenant["events"] == sent["evaluations"] and len(tenant["surfaces"]) == 3
    assert shown["status/default/events"] == str(sent["evaluations"])
    assert shown["status/default/surfaces"] == "3"
    for s in tenant["surfaces"]:
        assert shown[f"status/default/surfaces/{s['surfaceId']}/events"] == str(s["events"])


def test_the_surface_page_shows_the_planted_change_and_the_deploy(
    demo: tuple[Live, dict[str, Any]],
) -> None:
    live, sent = demo
    surface = next(h["command"] for h in sent["tryNext"] if h["command"][1] == "drift")[3]
    shown = _look(live, f"#/surface/{surface}?since={SINCE}&until={UNTIL}", "demo-surface")
    window = {"since": SINCE, "until": UNTIL, "surfaceId": surface}
    drift = live.json("/lens/attribute", {**window, "persist": False})
    planted = [p for p in drift["changePoints"] if p["timestamp"] == sent["plantedChange"]["at"]]
    assert planted and planted[0]["source"] == "light source"
    for i, p in enumerate(drift["changePoints"]):
        key = f"drift/changePoints/{i}"
        assert shown[f"{key}/timestamp"] == p["timestamp"]
        assert shown[f"{key}/source"] == p["source"]
        assert shown[f"{key}/reason"] == p["reason"]
        for j, c in enumerate(p["layerChanges"]):  # the evidence: what changed, cited
            text = f"{c['layer']}: {c['column']} {c['fromValue']} → {c['toValue']}"
            assert shown[f"{key}/layerChanges/{j}"] == text
        for c in p["changeEvents"]:
            assert shown[f"{key}/changeEvents/{c['changeId']}"].startswith(
                f"recorded {c['kind']} {c['changeId']} at {c['at']}"
            )
    (point,) = planted
    i = drift["changePoints"].index(point)
    assert "light_source_id acme/m/2026-05 → acme/m/2026-10" in " ".join(
        v for k, v in shown.items() if k.startswith(f"drift/changePoints/{i}/layerChanges/")
    )
    assert f"drift/changePoints/{i}/changeEvents/{sent['deploy']['id']}" in shown
    assert shown[f"changes/{sent['deploy']['id']}/kind"] == "deploy"
    (section,) = live.json("/holonograph/report", window)["surfaces"]
    for dimension, hours in section["series"].items():
        for x in hours:
            assert shown[f"series/{dimension}/{x['hour'][:10]}T00:00:00Z/graded"]  # by day


def test_the_streams_page_lists_the_gap_stream_as_lossy(demo: tuple[Live, dict[str, Any]]) -> None:
    live, sent = demo
    stream = next(h["command"] for h in sent["tryNext"] if h["command"][1] == "completeness")[3]
    shown = _look(live, f"#/streams?since={SINCE}&until={UNTIL}", "demo-streams")
    page = live.json(
        "/holonograph/completeness", {"since": SINCE, "until": UNTIL, "limit": 50, "offset": 0}
    )
    (lossy,) = [s for s in page["streams"] if s["stream"] == stream]
    assert lossy["status"] == "closed-lossy" and lossy["missing"] == sent["deliveryGap"]["dropped"]
    assert shown[f"completeness/streams/{stream}/status"] == "closed-lossy"
    assert shown[f"completeness/streams/{stream}/missing"] == str(lossy["missing"])
    assert page["streams"][0]["stream"] == stream  # lossy first, on the first page
