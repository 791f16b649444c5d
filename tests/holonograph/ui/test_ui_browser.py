"""The web UI in headless Chromium (Debian's `chromium`; skipped without it) against one
live `serve` with bearer tokens over a seeded store: each page renders the seeded data,
and every value it shows (`data-metric`) equals the API's JSON for the same request;
the page logs no error; keyboard navigation works; tables page server-side at 10k
rows (the requests' `limit` and `offset`); a token without the read scope is refused
by the API the page calls; no token leaks into the page or its URLs. Screenshots are
kept under `test-artifacts/ui/` (git-ignored)."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import io
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from holonograph.ui import ui_files
from schemas.tables import EMISSION_RECEIPTS, QUARANTINE
from testkit import multiplex
from testkit.backends import migrated_store
from testkit.browser import CHROMIUM, Tab, chromium
from testkit.multiplex import MultiplexSpec
from testkit.readings import seed_readings
from testkit.shown import compare_metrics as shown_compare
from testkit.shown import interval
from tests.e2e.test_report_browser import LoggingProxy
from tests.holonograph.cli.test_serve import ROOT, ServeProcess
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

READER = "tok-ui-reader-0001"  # read
WRITER = "tok-ui-sdk-0002"  # write only: no analyses
OPS = "tok-ui-ops-0003"  # read, write, govern (registers the contract and the fixture)
SPEC = MultiplexSpec(lost=(5, 6, 7))
START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
RANGE = "since=2026-06-01T00:00:00Z&until=2026-06-02T00:00:00Z"
WINDOW = {"since": "2026-06-01T00:00:00Z", "until": "2026-06-02T00:00:00Z"}
REJECTED = 10_000  # quarantined spans seeded: the paging test's table
MANY = 10_050  # emission streams seeded on 2026-06-03 (every 7th lossy): the streams table
MANY_WINDOW = {"since": "2026-06-03T00:00:00Z", "until": "2026-06-04T00:00:00Z"}
RECORDED = [  # the windows of the checks recorded (persisted) before the pages are read
    ("2026-06-01T00:00:00Z", "2026-06-01T02:00:00Z"),
    ("2026-06-01T02:00:00Z", "2026-06-01T04:00:00Z"),
    ("2026-06-01T04:00:00Z", "2026-06-01T08:00:00Z"),
]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
EXAMPLES = ROOT / "docs" / "examples"
METRICS = (
    "Object.fromEntries(Array.from(document.querySelectorAll('[data-metric]'),"
    " e => [e.dataset.metric, e.textContent.trim()]))"
)
READY = "document.body.dataset.state === 'ready' || document.body.dataset.state === 'error'"


def _entry(name: str, token: str, scopes: str) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return (
        f'  - name: {name}\n    tenant: default\n    token_sha256: "{digest}"\n'
        f'    agents: "*"\n    scopes: {scopes}\n'
    )


def _seed(data_dir: Path) -> None:
    with migrated_store(data_dir) as store:
        multiplex.seed(store, SPEC, 7)
        seed_readings(store, SPEC.surface_id, START)
        reasons = ("unknown run mode: prod", "declared type score, the outcome has no score")
        rows = [
            ["default", f"q-{i:05d}", START + dt.timedelta(seconds=i), reasons[i % 2],
             f"span-{i:05d}"]
            for i in range(REJECTED)
        ]  # fmt: skip
        store.insert(
            QUARANTINE.qualified,
            rows,
            QUARANTINE.pick("tenant_id", "quarantine_id", "received_at", "reason", "span_name"),
        )
        _seed_streams(store)


def _seed_streams(store: Any, streams: int = MANY) -> None:
    """`streams` streams of two evaluations and a final sentinel each, on 2026-06-03 (out
    of the other pages' range); every 7th lost its second evaluation (ordinal 1)."""
    columns = EMISSION_RECEIPTS.pick(
        "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
        "quarantined", "event_id", "surface_id", "event_time", "received_at",
        "sentinel_interval_ms", "completeness_offered",
    )  # fmt: skip
    store.command(
        f"INSERT INTO {EMISSION_RECEIPTS.qualified} ({', '.join(columns)})"
        " SELECT 'default', concat('many-', leftPad(toString(intDiv(number, 3)), 5, '0')),"
        " number % 3, concat('r-', toString(number)),"
        " if(number % 3 = 2, 'sentinel', 'evaluation'), number % 3 = 2, false,"
        " if(number % 3 = 2, '', concat('e-', toString(number))), 'classify-intent',"
        " toDateTime64('2026-06-03 00:00:00', 9, 'UTC') + intDiv(number, 3),"
        " toDateTime64('2026-06-03 00:00:00', 3, 'UTC') + intDiv(number, 3),"
        " if(number % 3 = 2, 30000, NULL), if(number % 3 = 2, 2, NULL)"
        f" FROM numbers({3 * streams})"
        " WHERE NOT (number % 3 = 1 AND intDiv(number, 3) % 7 = 0)"
    )


@dataclass
class Live:
    url: str  # the OTLP/HTTP port, which serves the API and the UI
    ui: str
    base: Path
    proxy: LoggingProxy

    def call(self, path: str, body: Any = None, token: str = READER) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}", "x-holonograph-run-mode": "production"}
        if body is None:
            return requests.get(self.url + path, headers=headers, timeout=120)
        return requests.post(self.url + path, json=body, headers=headers, timeout=120)

    def json(self, path: str, body: Any = None) -> Any:
        answer = self.call(path, body)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if CHROMIUM is None:
        pytest.skip(
            "Debian's chromium is not installed (`apt-get install -y chromium`, which .ci/run"
            " does as root where apt-get can)"
        )
    base = tmp_path_factory.mktemp("ui")
    _seed(base / "data")
    tokens = base / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        + _entry("ui-reader", READER, "[read]")
        + _entry("ui-sdk", WRITER, "[write]")
        + _entry("ui-ops", OPS, "[read, write, govern]")
    )
    tokens.chmod(0o600)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOLONOGRAPH_STATUS_REFRESH_SECONDS", "3600")
        server = ServeProcess(base / "data", "--auth-tokens-file", str(tokens))
    proxy = LoggingProxy()
    try:
        assert server.process.stdout is not None
        lines = list(server.lines)
        while not any(line.startswith("web UI") for line in lines):
            lines.append(server.process.stdout.readline())
            assert lines[-1], lines
        found = re.search(
            r"web UI +(http://127\.0\.0\.1:(\d+)/ui/) \(give it a read token\)", lines[-1]
        )
        assert found, lines
        live = Live(found[1].removesuffix("/ui/"), found[1], base, proxy)
        _register(live)
        yield live
    finally:
        proxy.close()
        code, stderr = server.stop()
        assert code == 0, stderr


def _register(live: Live) -> None:
    """The contract, a live fixture and a recorded change, through the API."""
    contract = json.loads((EXAMPLES / "contracts" / "billing-triage.json").read_text())
    done = live.call("/holonograph/contract", contract, OPS)
    assert done.status_code in (200, 201), done.text
    approval = json.loads((EXAMPLES / "conformance" / "approval.json").read_text())
    done = live.call("/lens/conformance/fixtures", approval, OPS)
    assert done.status_code == 200, done.text
    change = {"agentId": "billing-triage", "kind": "deploy", "at": "2026-06-01T03:00:00Z",
              "description": "billing-triage v1.4.2", "id": "deploy-1.4.2"}  # fmt: skip
    done = live.call("/holonograph/changes", change, OPS)
    assert done.status_code in (200, 201), done.text
    for since, until in RECORDED:  # checks recorded over three windows: the history
        body = {"surfaceId": SPEC.surface_id, "since": since, "until": until, "limit": 0}
        done = live.call("/lens/conformance/check", body, OPS)
        assert done.status_code == 200, done.text


def _browse(live: Live, work: Callable[[Any], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with chromium(live.base / "profile", live.proxy.port, loopback_direct=True) as b:
            return await work(b)

    return asyncio.run(run())


async def _page(browser: Any, live: Live, fragment: str, token: str | None = READER) -> Tab:
    """The UI at `fragment` (the token in the fragment, as a link would carry it),
    rendered."""
    tail = "" if token is None else ("&" if "?" in fragment else "?") + f"token={token}"
    tab: Tab = await browser.open(live.ui + fragment + tail)
    await tab.wait_for(READY)
    return tab


async def _shown(tab: Tab, name: str, refused: str = "") -> dict[str, str]:
    """The page's metrics, after its screenshot is kept, checking that it logged no error
    (but the browser's note of an API answer the page expects and shows, `refused`: a
    404 `no_live_fixture` is how a surface says it has no fixture)."""
    from PIL import Image

    shot = await tab.screenshot()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(shot)
    with Image.open(io.BytesIO(shot)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 20, "a blank screenshot"
    errors = [e for e in tab.errors() if not (refused and e.startswith(refused))]
    assert errors == []
    assert await tab.evaluate("document.body.dataset.state") == "ready"
    shown: dict[str, str] = await tab.evaluate(METRICS)
    return shown


def _api_calls(tab: Tab, path: str) -> list[dict[str, Any]]:
    return [r for r in tab.requests() if r["url"].split("?")[0].endswith(path)]


def _fixed(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def test_overview_shows_status_and_counts_arrivals_live(live: Live) -> None:
    async def work(browser: Any) -> tuple[dict[str, str], dict[str, str], Any]:
        tab = await _page(browser, live, "#/overview?poll=1")
        before = await _shown(tab, "overview")
        # Five evaluations and one span with an unknown run mode arrive while it is open.
        # (On a surface of its own: the registered contract declares classify-intent's.)
        items = [Evaluation("ui-live", i, surface="ui-live") for i in range(5)]
        items.append(Evaluation("ui-live", 5, surface="ui-live", run_mode="prod"))
        body = export_request(record_spans(items, seed=11)).SerializeToString()
        sent = requests.post(
            live.url + "/v1/traces", data=body, timeout=60,
            headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {WRITER}"},
        )  # fmt: skip
        assert sent.status_code == 200, sent.text
        await tab.wait_for(
            "document.querySelector('[data-metric=\"activity/rejections\"]').textContent === '1'"
            " && document.querySelector('[data-metric=\"activity/events\"]').textContent === '5'"
        )
        after = await _shown(tab, "overview-live")
        return before, after, await tab.evaluate("location.href")

    before, after, href = _browse(live, work)
    assert READER not in href and "token" not in href  # taken out of the address bar
    status = live.json("/holonograph/status")
    (tenant,) = status["tenants"]
    expected = {
        "status/default/events": str(tenant["events"]),
        "status/default/streams": str(tenant["streams"]),
        "status/default/quarantined": str(tenant["quarantined"]),
        "status/default/lastArrivalAt": tenant["lastArrivalAt"],
        "status/default/surfaces": str(len(tenant["surfaces"])),
    }
    for s in tenant["surfaces"]:
        expected[f"status/default/surfaces/{s['surfaceId']}/events"] = str(s["events"])
        expected[f"status/default/surfaces/{s['surfaceId']}/lastArrivalAt"] = s["lastArrivalAt"]
        for d in s["dimensions"]:
            key = f"status/default/surfaces/{s['surfaceId']}/dimensions/{d['dimensionId']}"
            expected[key] = f"{d['dimensionId']} ({d['outcomes']})"
    assert {k: after.get(k) for k in expected} == expected
    assert tenant["quarantined"] == REJECTED + 1 and tenant["events"] == 1197 + 5
    assert before["status/default/quarantined"] == str(REJECTED)
    assert before["activity/events"] == "0"  # the seeded events arrived in June
    activity = live.json("/holonograph/activity")
    assert (activity["events"], activity["rejections"]) == (5, 1)


def test_surface_page_shows_the_reports_series_and_the_attribution(live: Live) -> None:
    ids = (
        "Array.from(document.querySelectorAll('[data-table=events] tbody tr td:first-child'),"
        " e => e.textContent)"
    )

    async def work(browser: Any) -> tuple[dict[str, str], list[dict[str, Any]], list[list[str]]]:
        tab = await _page(browser, live, f"#/surface/{SPEC.surface_id}?{RANGE}")
        shown = await _shown(tab, "surface")
        pages = [await tab.evaluate(ids)]
        await tab.evaluate("document.activeElement.blur()")
        await tab.press("n")
        await tab.wait_for("document.querySelector('[data-table=events]').dataset.page === '2'")
        pages.append(await tab.evaluate(ids))
        assert tab.errors() == []
        return shown, tab.requests(), pages

    shown, sent, pages = _browse(live, work)
    # The events a server page at a time, by the API's cursor.
    query = {**WINDOW, "surfaceId": SPEC.surface_id, "limit": "50"}
    first = live.json("/lens/events?" + urlencode(query))
    second = live.json("/lens/events?" + urlencode({**query, "cursor": first["nextCursor"]}))
    assert pages == [
        [e["eventId"] for e in first["events"]],
        [e["eventId"] for e in second["events"]],
    ]
    events = [r["url"] for r in sent if "/lens/events" in r["url"]]
    assert len(events) == 2 and "limit=50" in events[0]
    assert f"cursor={first['nextCursor']}" in events[1]
    report = live.json("/holonograph/report", {**WINDOW, "surfaceId": SPEC.surface_id})
    drift = live.json("/lens/attribute", {**WINDOW, "surfaceId": SPEC.surface_id, "persist": False})
    (section,) = report["surfaces"]
    expected: dict[str, str] = {}
    for dimension, hours in section["series"].items():
        for x in hours:
            key = f"series/{dimension}/{x['hour']}"
            expected[f"{key}/graded"] = str(x["graded"])
            expected[f"{key}/passes"] = str(x["passes"])
            expected[f"{key}/passRate"] = _fixed(x["passRate"], 3)
            expected[f"{key}/completenessLowerBound"] = _fixed(x["completenessLowerBound"], 3)
    for dimension, hours in section["scores"].items():
        for x in hours:
            key = f"scoreSeries/{dimension}/{x['hour']}"
            expected[f"{key}/scored"] = str(x["scored"])
            expected[f"{key}/meanScore"] = _fixed(x["meanScore"], 3)
            expected[f"{key}/completenessLowerBound"] = _fixed(x["completenessLowerBound"], 3)
    assert len(section["scores"]["helpfulness"]) == 7  # the scored dimension, hourly
    for v in section["verdicts"]:
        expected[f"verdicts/{v['dimensionId']}"] = v["verdict"]
    for c in section["changes"]:
        expected[f"changes/{c['changeId']}/kind"] = c["kind"]
    for i, w in enumerate(drift["bracketedWindows"]):
        expected[f"drift/brackets/{i}/reason"] = w["reason"]
        expected[f"drift/brackets/{i}/from"] = w["from"]
    for i, p in enumerate(drift["changePoints"]):
        expected[f"drift/changePoints/{i}/source"] = p["source"]
        expected[f"drift/changePoints/{i}/timestamp"] = p["timestamp"]
    expected["drift/eventCount"] = str(drift["eventCount"])
    assert {k: shown.get(k) for k in expected} == expected
    assert expected["verdicts/correctness"] == "viable"
    assert expected["changes/deploy-1.4.2/kind"] == "deploy"
    assert any(w["reason"] == "delivery-loss" for w in drift["bracketedWindows"])
    assert len(section["series"]["correctness"]) == 7
    # Scores over time: each slice the page asked compare for, as the API answers it.
    slices = [json.loads(r["postData"]) for r in sent if r["url"].endswith("/holonograph/compare")]
    assert len(slices) == 8 and slices[0]["since"] == "2026-06-01T00:00:00.000Z"
    assert [b["until"] for b in slices[:-1]] == [b["since"] for b in slices[1:]]
    scores: dict[str, str] = {}
    for i, body in enumerate(slices):
        for group in live.json("/holonograph/compare", body)["groups"]:
            for d in group["dimensions"]:
                if d["kind"] == "score":
                    scores[f"scores/{d['dimensionId']}/{group['group']}/{i}"] = interval(d["mean"])
    assert len(scores) >= 3 * 2  # three vendors, in the slices with events
    assert {k: shown.get(k) for k in scores} == scores
    # The analysis ran read-only: the page asks for no recorded drift run.
    (attribute,) = [r for r in sent if r["url"].endswith("/lens/attribute")]
    assert json.loads(attribute["postData"])["persist"] is False


def test_past_three_days_the_surface_page_shows_each_day_rolled_up_from_the_hours(
    live: Live,
) -> None:
    week = {"since": "2026-05-29T00:00:00Z", "until": "2026-06-03T00:00:00Z"}

    async def work(browser: Any) -> tuple[dict[str, str], list[str]]:
        fragment = f"#/surface/{SPEC.surface_id}?since={week['since']}&until={week['until']}"
        tab = await _page(browser, live, fragment)
        per = await tab.evaluate(
            "Array.from(document.querySelectorAll('section[data-per]'), e => e.dataset.per)"
        )
        return await _shown(tab, "surface-by-day"), per

    shown, per = _browse(live, work)
    assert per and set(per) == {"day"}
    (section,) = live.json("/holonograph/report", {**week, "surfaceId": SPEC.surface_id})[
        "surfaces"
    ]
    expected: dict[str, str] = {}
    for dimension, hours in section["series"].items():
        days: dict[str, list[dict[str, Any]]] = {}
        for x in hours:
            days.setdefault(x["hour"][:10] + "T00:00:00Z", []).append(x)
        for day, xs in days.items():
            graded, passes = sum(x["graded"] for x in xs), sum(x["passes"] for x in xs)
            key = f"series/{dimension}/{day}"
            expected[f"{key}/graded"] = str(graded)
            expected[f"{key}/passRate"] = _fixed(passes / graded, 3)
            bounds = [
                x["completenessLowerBound"] for x in xs if x["completenessLowerBound"] is not None
            ]
            expected[f"{key}/completenessLowerBound"] = _fixed(min(bounds) if bounds else None, 3)
    for dimension, hours in section["scores"].items():
        scored = sum(x["scored"] for x in hours)  # every hour of the seed is on one day
        mean = sum(x["meanScore"] * x["scored"] for x in hours) / scored
        key = f"scoreSeries/{dimension}/{hours[0]['hour'][:10]}T00:00:00Z"
        expected[f"{key}/scored"] = str(scored)
        expected[f"{key}/meanScore"] = _fixed(mean, 3)
    assert len(expected) >= 5
    assert {k: shown.get(k) for k in expected} == expected
    assert not [k for k in shown if k.startswith("series/") and "T01:00:00Z" in k]  # no hours


def test_compare_page_shows_the_comparisons_intervals_and_paired_table(live: Live) -> None:
    async def work(browser: Any) -> dict[str, str]:
        return await _shown(
            await _page(browser, live, f"#/compare/{SPEC.surface_id}?{RANGE}"), "compare"
        )

    shown = _browse(live, work)
    report = live.json("/holonograph/compare", {**WINDOW, "surfaceId": SPEC.surface_id})
    expected = {"compare/events": str(report["events"]), **shown_compare(report, adjusted=False)}
    assert {k: shown.get(k) for k in expected} == expected
    assert len(report["groups"]) == 3 and len(expected) > 40


def test_streams_page_shows_gaps_and_rejections_and_pages_10k_rows_server_side(
    live: Live,
) -> None:
    async def work(browser: Any) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, Any]]:
        tab = await _page(browser, live, f"#/streams?{RANGE}")
        first = await _shown(tab, "streams")
        await tab.evaluate("document.activeElement.blur()")
        await tab.press("n")  # the next page, by key
        await tab.wait_for(
            "document.querySelector('[data-table=quarantine]').dataset.offset === '50'"
        )
        await tab.press("n")
        await tab.wait_for(
            "document.querySelector('[data-table=quarantine]').dataset.offset === '100'"
        )
        await tab.press("p")
        await tab.wait_for(
            "document.querySelector('[data-table=quarantine]').dataset.offset === '50'"
        )
        table = await tab.evaluate(
            "(() => { const t = document.querySelector('[data-table=quarantine]');"
            " return {rows: t.querySelectorAll('tbody tr').length, total: t.dataset.total,"
            " info: t.querySelector('[data-page-info]').textContent,"
            " first: t.querySelector('tbody tr td:nth-child(3)').textContent,"
            " href: location.href}; })()"
        )
        assert tab.errors() == []
        return first, _api_calls(tab, "/holonograph/quarantine"), table

    shown, calls, table = _browse(live, work)
    complete = live.json("/holonograph/completeness", WINDOW)
    quarantine = live.json("/holonograph/quarantine", {**WINDOW, "limit": 50, "offset": 50})
    expected: dict[str, str] = {}
    for name in ("streams", "expected", "delivered", "missing", "missingInRange", "biasedWindows"):
        expected[f"completeness/totals/{name}"] = str(complete["totals"][name])
    for s in complete["streams"]:
        expected[f"completeness/streams/{s['stream']}/status"] = s["status"]
        expected[f"completeness/streams/{s['stream']}/missing"] = str(s["missing"])
    expected["completeness/streams/classify-intent/anthropic/claude-sonnet-5/gaps"] = "5–7"
    expected["quarantine/total"] = str(REJECTED)
    expected["quarantine/replayed"] = "0"
    expected["quarantine/reasons/0/reason"] = quarantine["reasons"][0]["reason"]  # in full
    expected["quarantine/reasons/0/spans"] = str(quarantine["reasons"][0]["spans"])
    assert {k: shown.get(k) for k in expected} == expected
    # Every page came from the server, 50 rows at a time: offsets 0, 50, 100 (then 50
    # again), never the 10 000.
    bodies = [json.loads(c["postData"]) for c in calls]
    assert [(b["limit"], b["offset"]) for b in bodies] == [(50, 0), (50, 50), (50, 100), (50, 50)]
    assert table["rows"] == 50 and table["total"] == str(REJECTED)
    assert table["info"] == f"rows 51–100 of {REJECTED}"
    assert table["first"] == quarantine["spans"][0]["spanName"]
    assert "offset=50" in table["href"]  # the page's place is a link


def test_the_streams_table_pages_10k_streams_from_the_server(live: Live) -> None:
    many = "&".join(f"{k}={v}" for k, v in MANY_WINDOW.items())
    rows = (
        "Array.from(document.querySelectorAll('[data-table=streams] tbody tr'),"
        " tr => Array.from(tr.querySelectorAll('td'), td => td.textContent))"
    )

    async def work(browser: Any) -> dict[str, Any]:
        tab = await _page(browser, live, f"#/streams?{many}")
        shown = await _shown(tab, "streams-10k")
        first = await tab.evaluate(rows)
        await tab.evaluate("document.activeElement.blur()")
        for key, offset in (("n", "50"), ("n", "100"), ("p", "50")):  # by key, page by page
            await tab.press(key)
            await tab.wait_for(
                f"document.querySelector('[data-table=streams]').dataset.offset === '{offset}'"
            )
        table = await tab.evaluate(
            "(() => { const t = document.querySelector('[data-table=streams]');"
            " return {total: t.dataset.total, info: t.querySelector('[data-page-info]')"
            ".textContent, href: location.href}; })()"
        )
        after = await _shown(tab, "streams-10k-page-2")
        return {
            "shown": shown, "first": first, "second": await tab.evaluate(rows),
            "table": table, "after": after,
            "calls": _api_calls(tab, "/holonograph/completeness"),
        }  # fmt: skip

    seen = _browse(live, work)
    pages = [
        live.json("/holonograph/completeness", {**MANY_WINDOW, "limit": 50, "offset": offset})
        for offset in (0, 50)
    ]
    whole = pages[0]
    assert whole["totals"]["streams"] == whole["page"]["streams"] == MANY
    assert whole["totals"]["byStatus"]["closed-lossy"] == len(range(0, MANY, 7))
    assert [len(p["streams"]) for p in pages] == [50, 50]  # a page, never the 10k
    for answer, listed, shown in zip(pages, (seen["first"], seen["second"]),
                                     (seen["shown"], seen["after"]), strict=True):  # fmt: skip
        assert [r[0] for r in listed] == [s["stream"] for s in answer["streams"]]
        for s in answer["streams"]:
            key = f"completeness/streams/{s['stream']}"
            assert shown[f"{key}/status"] == s["status"]
            assert shown[f"{key}/missing"] == str(s["missing"])
            assert shown[f"{key}/delivered"] == str(s["delivered"])
        assert {w["stream"] for w in answer["windows"] if w["scope"] == "stream"} <= {
            s["stream"] for s in answer["streams"]
        }
    # Lossy first: the first page is the lossy streams, each missing ordinal 1.
    assert {s["status"] for s in pages[0]["streams"]} == {"closed-lossy"}
    assert seen["shown"]["completeness/streams/many-00000/gaps"] == "1"
    for name in ("streams", "expected", "delivered", "missing"):
        assert seen["shown"][f"completeness/totals/{name}"] == str(whole["totals"][name])
    assert seen["shown"]["completeness/page/streams"] == str(MANY)
    bodies = [json.loads(c["postData"]) for c in seen["calls"]]
    assert [(b["limit"], b["offset"]) for b in bodies] == [(50, 0), (50, 50), (50, 100), (50, 50)]
    assert seen["table"]["total"] == str(MANY)
    assert seen["table"]["info"] == f"rows 51–100 of {MANY}"
    assert "streamOffset=50" in seen["table"]["href"]


def test_conformance_page_shows_fixture_verdicts_contract_and_coverage(live: Live) -> None:
    async def work(browser: Any) -> tuple[dict[str, str], list[dict[str, Any]]]:
        tab = await _page(browser, live, f"#/conformance?{RANGE}&agent=billing-triage")
        refused = (
            f"{live.url}/lens/conformance/check: Failed to load resource: the server"
            " responded with a status of 404"
        )
        shown = await _shown(tab, "conformance", refused)
        options = await tab.evaluate(
            "Array.from(document.querySelectorAll('#agent-picker option'), o => o.value)"
        )
        picked = await tab.evaluate("document.getElementById('agent-picker').value")
        checked = _api_calls(tab, "/lens/conformance/check")  # the first view's
        # Picking by keyboard follows the link: up to no agent, down to the agent again.
        moved = []
        for key, shown_agent in (("ArrowUp", "false"), ("ArrowDown", "true")):
            renders = await tab.evaluate("Number(document.body.dataset.renders || 0)")
            await tab.evaluate("document.getElementById('agent-picker').focus()")
            await tab.press(key)
            await tab.wait_for(  # the page rendered again, for the link picked
                f"Number(document.body.dataset.renders || 0) > {renders}"
                f" && location.hash.includes('agent=billing-triage') === {shown_agent}"
                " && document.body.dataset.state === 'ready'"
            )
            moved.append(await tab.evaluate(
                "[location.hash, !!document.querySelector('[data-metric=\"contract/versionId\"]')]"
            ))  # fmt: skip
        return shown, checked, options, picked, moved

    shown, checks, options, picked, moved = _browse(live, work)
    status = live.json("/holonograph/status")
    agents = sorted({a for t in status["tenants"] for s in t["surfaces"] for a in s["agents"]})
    assert "billing-triage" in agents
    assert options == ["", *agents] and picked == "billing-triage"
    assert [has for _, has in moved] == [False, True], moved
    assert "agent=" not in moved[0][0] and "agent=billing-triage" in moved[1][0]
    judged = {"judgedSince": WINDOW["since"], "judgedUntil": WINDOW["until"]}
    query = urlencode({"surfaceId": SPEC.surface_id, **judged, "limit": 50, "offset": 0})
    history = live.json(f"/lens/conformance/results?{query}")
    fixtures = {r["fixtureId"] for r in history["results"]}
    assert history["total"] == history["count"] == len(RECORDED) * len(fixtures) > 0
    assert sorted({r["window"]["since"] for r in history["results"]}) == [w for w, _ in RECORDED]
    recorded = {f"conformance/{SPEC.surface_id}/history/total": str(history["total"])}
    for r in history["results"]:
        key = f"conformance/{SPEC.surface_id}/history/{r['checkId']}"
        recorded[f"{key}/window"] = f"{r['window']['since']} to {r['window']['until']}"
        recorded[f"{key}/verdict"] = r["verdict"]
        recorded[f"{key}/checkedAt"] = r["checkedAt"]
        recorded[f"{key}/eventsChecked"] = str(r["eventsChecked"])
        recorded[f"{key}/counts/fail"] = str(r["counts"]["fail"])
    assert {k: shown.get(k) for k in recorded} == recorded
    check = live.json(
        "/lens/conformance/check",
        {**WINDOW, "surfaceId": SPEC.surface_id, "persist": False, "limit": 0},
    )
    scan = live.json("/lens/topology/scan", {**WINDOW, "agentId": "billing-triage"})
    contract = live.json("/holonograph/contract?agentId=billing-triage")
    expected = {
        "contract/versionId": contract["versionId"],
        "topology/coverage/declared": str(scan["coverage"]["declared"]),
        "topology/coverage/observed": str(scan["coverage"]["observed"]),
        "topology/coverage/ratio": _fixed(scan["coverage"]["ratio"], 3),
        "topology/gaps": str(scan["gaps"]),
    }
    for r in check:
        key = f"conformance/{SPEC.surface_id}/{r['fixtureId']}"
        expected[f"{key}/verdict"] = r["verdict"]
        expected[f"{key}/eventsChecked"] = str(r["eventsChecked"])
        expected[f"{key}/counts/fail"] = str(r["counts"]["fail"])
    assert {k: shown.get(k) for k in expected} == expected
    # Over time: the whole window and six slices of it, none of them recorded.
    bodies = [json.loads(c["postData"]) for c in checks]
    bodies = [b for b in bodies if b["surfaceId"] == SPEC.surface_id]
    assert len(bodies) == 7 and all(b["persist"] is False for b in bodies)
    assert sorted(b["since"] for b in bodies)[0] == "2026-06-01T00:00:00.000Z"
    assert shown[f"conformance/{SPEC.surface_id}/refund-requires-lookup/slices/0"].startswith(
        check[0]["verdict"]
    )


def test_keyboard_alone_moves_between_pages_with_a_visible_focus(live: Live) -> None:
    async def work(browser: Any) -> dict[str, Any]:
        tab = await _page(browser, live, "#/overview?poll=0")
        seen = []
        for _ in range(40):  # Tab to the navigation's "Streams and quarantine" link
            await tab.press("Tab")
            seen.append(await tab.evaluate("document.activeElement.textContent.trim()"))
            if seen[-1] == "Streams and quarantine":
                break
        outline = await tab.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        await tab.press("Enter")
        await tab.wait_for(
            "document.body.dataset.page === 'streams' && document.body.dataset.state === 'ready'"
        )
        streams = await tab.evaluate("location.hash")
        await tab.evaluate("document.activeElement.blur()")
        await tab.press("3")  # a page's number
        await tab.wait_for(
            "document.body.dataset.page === 'compare' && document.body.dataset.state === 'ready'"
        )
        compare = await tab.evaluate("location.hash")
        current = await tab.evaluate(
            "document.querySelector('nav a[aria-current=page]').textContent"
        )
        assert tab.errors() == []
        return {
            "seen": seen,
            "outline": outline,
            "streams": streams,
            "compare": compare,
            "current": current,
        }

    moved = _browse(live, work)
    assert moved["seen"][-1] == "Streams and quarantine", moved["seen"]
    assert moved["outline"] not in ("none", ""), "the focused link has no visible outline"
    assert moved["streams"].startswith("#/streams")
    assert moved["compare"].startswith("#/compare") and moved["current"] == "Compare"


def test_without_read_scope_the_api_refuses_and_the_page_says_so(live: Live) -> None:
    async def work(browser: Any) -> list[Any]:
        out = []
        for token in (WRITER, None):
            tab = await _page(browser, live, "#/overview?poll=0", token)
            out.append((
                await tab.evaluate("document.querySelector('[role=alert]').dataset.status"),
                await tab.evaluate("document.getElementById('token-form').hidden"),
                [s for u, s in tab.responses() if "/holonograph/status" in u],
            ))  # fmt: skip
            await tab.close()
        return out

    (writer, anonymous) = _browse(live, work)
    assert writer == ("403", True, [403])
    assert anonymous == ("401", False, [401])  # and it asks for a token
    assert live.call("/holonograph/status", token=WRITER).status_code == 403


def test_the_page_holds_no_secret_and_loads_only_its_own_origin(live: Live) -> None:
    async def work(browser: Any) -> tuple[str, str, str, list[dict[str, Any]]]:
        tab = await _page(browser, live, "#/overview?poll=0")
        html = await tab.evaluate("document.documentElement.outerHTML")
        stored = await tab.evaluate("JSON.stringify(localStorage)")
        href = await tab.evaluate("location.href")
        return html, stored, href, tab.requests()

    html, stored, href, sent = _browse(live, work)
    assert READER not in html and READER not in href and stored == "{}"
    for request in sent:
        assert request["url"].startswith(live.url + "/"), request["url"]
        assert READER not in request["url"]
    api = [r for r in sent if "/holonograph/" in r["url"]]
    assert api and all(r["headers"].get("Authorization") == f"Bearer {READER}" for r in api)
    for name, (body, _) in ui_files().items():
        assert not re.search(rb"tok-|token_sha256|Bearer [A-Za-z0-9_-]{12,}", body), name
    page = requests.get(live.ui, timeout=30)
    assert page.status_code == 200  # the shell needs no token: it holds no data
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
