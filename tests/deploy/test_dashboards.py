"""The provisioned Grafana dashboards: the files are where compose mounts them, every
query names only the provisioned data source, and every panel's SQL, expanded the way
grafana-clickhouse-datasource expands it, runs read-only against a chDB store seeded
with known events and returns the columns its panel needs and the known values."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ingest.store.clickhouse import open_store
from ingest.store.reader import open_reader
from processors.analysis_events import record_event
from processors.compare.job import CompareRequest, compare
from processors.completeness.job import Selection, read_report, recompute_completeness
from schemas.changelog import mark_availability, record_change
from schemas.changes import AvailabilityMark, ChangeRecord
from schemas.compare import CompareReport
from schemas.completeness import CompletenessReport
from schemas.migrations import apply_migrations
from schemas.store import Store
from schemas.tables import (
    CONFORMANCE_RESULTS,
    DRIFT_CHANGE_POINTS,
    EMISSION_RECEIPTS,
    EVALUATION_EVENTS,
    QUARANTINE,
)
from testkit import multiplex
from testkit.multiplex import BETTER, PRIMARY, MultiplexSpec
from tests.processors.lessons.support import seed_lessons

ROOT = Path(__file__).resolve().parents[2]
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
DATASOURCE_UID = "holonograph-clickhouse"
PLUGIN = "grafana-clickhouse-datasource"
# The dashboard schema of the Grafana image compose runs (grafana/grafana:11.3).
SCHEMA_VERSION = 39

SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
INTERVAL_S = 3600
SPEC = MultiplexSpec(lost=(5, 6, 7))
SCAN_AT = dt.datetime(2026, 6, 1, 6, tzinfo=dt.UTC)
CHANGE_AT = dt.datetime(2026, 6, 1, 3, tzinfo=dt.UTC)
DEPLOY_AT = dt.datetime(2026, 6, 1, 2, 30, tzinfo=dt.UTC)
OUTAGE = (dt.datetime(2026, 6, 1, 8, tzinfo=dt.UTC), dt.datetime(2026, 6, 1, 9, tzinfo=dt.UTC))
RETRIED = f"{SPEC.surface_id}/{BETTER}"
LESSONS_SURFACE = "refund-desk"  # its own surface: its published lesson annotates no other


# --- the plugin's expansion, mirrored (frontend: $__conditionalAll, then Grafana's
# template variables with the plugin's format; backend: the sqlds macros)


def _macro_args(text: str, start: int) -> list[str] | None:
    """Arguments of the call whose "(" is at `start`, split at depth-1 commas (as the
    plugin's getMacroArgs)."""
    depth, last, args = 0, start + 1, []
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 1:
            args.append(text[last:i])
            last = i + 1
        if depth == 0:
            args.append(text[last:i])
            return args
    return None


def _conditional_all(sql: str, current: dict[str, Any]) -> str:
    macro = "$__conditionalAll("
    index = sql.rfind(macro)
    while index != -1:
        args = _macro_args(sql, index + len(macro) - 1)
        assert args is not None and len(args) == 2, f"bad $__conditionalAll in {sql}"
        found = re.search(r"(?<=\$\{)\w+(?=\})|(?<=\$)\w+", args[1].strip())
        phrase = args[0]
        if found:
            value = current.get(found[0])
            # JavaScript's Array.toString joins with commas: ["$__all"] -> "$__all"
            text = ",".join(value) if isinstance(value, list) else str(value or "")
            if text in ("", "$__all"):
                phrase = "1=1"
        sql = sql.replace(f"{macro}{args[0]},{args[1]})", phrase)
        index = sql.rfind(macro)
    return sql


_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]")


def _template(sql: str, values: dict[str, Any]) -> str:
    """Grafana's templateSrv.replace with the plugin's format: a list becomes
    'a','b'; a single value goes in as is; an unknown name is left alone."""

    def replace(match: re.Match[str]) -> str:
        name = match[1] or match[2] or match[3]
        if name not in values:
            return match[0]
        value = values[name]
        return "'" + "','".join(value) + "'" if isinstance(value, list) else str(value)

    return _VARIABLE.sub(replace, sql)


def _backend_macros(sql: str, since: dt.datetime, until: dt.datetime, interval_s: int) -> str:
    """The plugin's backend macros (pkg/macros): seconds-precision DateTimes."""
    start, end = int(since.timestamp()), int(until.timestamp())

    def time_filter(match: re.Match[str]) -> str:
        column = match[1].strip()
        return f"{column} >= toDateTime({start}) AND {column} <= toDateTime({end})"

    sql = re.sub(r"\$__timeFilter\(([^)]*)\)", time_filter, sql)
    sql = re.sub(
        r"\$__timeInterval\(([^)]*)\)",
        lambda m: f"toStartOfInterval(toDateTime({m[1].strip()}), INTERVAL {interval_s} second)",
        sql,
    )
    sql = sql.replace("$__fromTime", f"toDateTime({start})").replace(
        "$__toTime", f"toDateTime({end})"
    )
    return sql.replace("$__interval_s", str(max(interval_s, 1)))


def interpolate(sql: str, current: dict[str, Any], options: dict[str, list[str]]) -> str:
    """The frontend's half: `sql` as Grafana's browser sends it to /api/ds/query, the
    backend macros ($__timeFilter, $__interval_s, ...) left for the plugin."""
    sql = _conditional_all(sql, current)
    values = {
        name: options.get(name, []) if value in ("$__all", ["$__all"]) else value
        for name, value in current.items()
    }
    return _template(sql, values)


def expand(
    sql: str,
    current: dict[str, Any],
    options: dict[str, list[str]],
    since: dt.datetime = SINCE,
    until: dt.datetime = UNTIL,
    interval_s: int = INTERVAL_S,
) -> str:
    """`sql` as ClickHouse receives it: `current` the selection ("$__all" for All),
    `options` each variable's values (All expands to them)."""
    sql = _backend_macros(interpolate(sql, current, options), since, until, interval_s)
    assert "$" not in sql, f"unexpanded macro or variable in:\n{sql}"
    return sql


def test_the_expander_mirrors_the_plugin() -> None:
    sql = "SELECT 1 WHERE $__conditionalAll(s IN (${s}), $s) AND t = '${t}' AND $__timeFilter(ts)"
    options = {"s": ["a", "b"]}
    assert expand(sql, {"s": "$__all", "t": "x"}, options) == (
        "SELECT 1 WHERE 1=1 AND t = 'x' AND ts >= toDateTime(1780272000)"
        " AND ts <= toDateTime(1780358400)"
    )
    assert "s IN ('b')" in expand(sql, {"s": ["b"], "t": "x"}, options)


# --- the files


def _dashboards() -> dict[str, dict[str, Any]]:
    """The JSON files the provider loads, found through the compose mount of its path."""
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "holonograph.yaml").read_text())
    container_path = Path(provider["providers"][0]["options"]["path"])
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for volume in compose["services"]["grafana"]["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("./") and container_path.is_relative_to(target):
            directory = ROOT / source / container_path.relative_to(target)
            break
    else:
        raise AssertionError(f"compose mounts nothing at {container_path}")
    files = sorted(directory.glob("*.json"))
    assert files, f"no dashboard JSON where the provider points: {directory}"
    return {f.stem: json.loads(f.read_text()) for f in files}


DASHBOARDS = _dashboards()


def _queries(board: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(what, kind, target) of every panel target, annotation and variable query."""
    for panel in board["panels"]:
        for target in panel["targets"]:
            yield panel["title"], panel["type"], target
    for annotation in board["annotations"]["list"]:
        if "target" in annotation:
            yield annotation["name"], "annotation", annotation["target"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["name"], "variable", {"rawSql": variable["query"], **variable}


def test_provisioning_matches_the_compose_mounts_and_the_data_source() -> None:
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "clickhouse.yaml").read_text())
    source = datasources["datasources"][0]
    assert (source["uid"], source["type"]) == (DATASOURCE_UID, PLUGIN)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]
    assert PLUGIN in grafana["environment"]["GF_INSTALL_PLUGINS"]
    assert grafana["image"].startswith("grafana/grafana:11.3")
    assert set(DASHBOARDS) == {
        "evaluations", "completeness", "drift-variance", "vendors", "ingest-contracts",
        "lessons",
    }  # fmt: skip
    uids = [b["uid"] for b in DASHBOARDS.values()]
    assert len(set(uids)) == len(uids)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_uses_only_the_provisioned_data_source(name: str) -> None:
    board = DASHBOARDS[name]
    assert board["schemaVersion"] == SCHEMA_VERSION
    names = {v["name"] for v in board["templating"]["list"]}
    assert "tenant" in names, "every dashboard is tenant-aware"
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": PLUGIN, "uid": DATASOURCE_UID}
    for what, _, target in _queries(board):
        assert target["datasource"] == {"type": PLUGIN, "uid": DATASOURCE_UID}, what
        sql = target["rawSql"]
        assert "tenant_id = '${tenant}'" in sql or what == "tenant", what
        for table in re.findall(r"holonograph\.(\w+)", sql):
            if table != "emission_records":  # a view that reads FINAL itself
                assert re.search(rf"holonograph\.{table} FINAL", sql), f"{what}: {table}"
        used = set(re.findall(r"\$\{?(\w+)", sql)) - {"__timeFilter", "__interval_s"}
        used -= {"__conditionalAll", "__timeInterval", "__fromTime", "__toTime"}
        assert used <= names, f"{what} uses undefined variables {used - names}"


# --- the seeded store


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store with multiplex traffic (three vendors, three lost ordinals of the primary's
    stream), refreshed completeness, a drift run, variance verdicts, a conformance check,
    rejected spans, a recorded topology scan, contract findings and recorded changes."""
    url = f"chdb://{tmp_path_factory.mktemp('dashboards') / 'store'}"
    store = open_store(url)
    try:
        apply_migrations(store)
        truth = multiplex.seed(store, SPEC, 7)
        _seed_analyses(store)
        lessons = seed_lessons(store, SINCE + dt.timedelta(hours=1), LESSONS_SURFACE)
        recompute_completeness(store, UNTIL)
        report = compare(
            store,
            CompareRequest(
                surface_id=SPEC.surface_id, since=SINCE, until=UNTIL, dimension_id="correctness"
            ),
        )
        completeness = read_report(store, UNTIL, Selection(since=SINCE, until=UNTIL))
    finally:
        store.close()
    reader = open_reader(url)
    try:
        yield {"reader": reader, "truth": truth, "compare": report, "completeness": completeness,
               "lessons": lessons}  # fmt: skip
    finally:
        reader.close()


def _seed_analyses(store: Store) -> None:
    # A client retry: a second receipt of the better vendor's first ordinal.
    store.insert(
        EMISSION_RECEIPTS.qualified,
        [["default", RETRIED, 0, "r-retry", "evaluation", False, False, "call-00000-openai",
          SPEC.surface_id, SINCE, SINCE + dt.timedelta(seconds=5)]],
        EMISSION_RECEIPTS.pick(
            "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
            "quarantined", "event_id", "surface_id", "event_time", "received_at",
        ),
    )  # fmt: skip
    store.insert(
        EVALUATION_EVENTS.qualified,
        [
            ["default", f"contracted-{i}", "contracted", "billing-triage", "production",
             "production-state", SINCE + dt.timedelta(hours=2, minutes=i), "cv_1",
             ["undeclared-dimension:tone"] if i < 2 else []]
            for i in range(3)
        ],
        ["tenant_id", "event_id", "surface_id", "agent_id", "run_mode", "provenance",
         "timestamp", "contract_version_id", "contract_findings"],
    )  # fmt: skip
    store.insert(
        DRIFT_CHANGE_POINTS.qualified,
        [
            ["run-1", UNTIL, SPEC.surface_id, "correctness", "change_point", CHANGE_AT,
             CHANGE_AT - dt.timedelta(hours=1), CHANGE_AT + dt.timedelta(hours=1),
             "light source", "served model changed", True, -0.12, SINCE, UNTIL, "default"],
            ["run-1", UNTIL, SPEC.surface_id, "correctness", "bracketed_window", None,
             SINCE, SINCE + dt.timedelta(hours=1), "", "delivery-loss", False, None, SINCE,
             UNTIL, "default"],
        ],
        DRIFT_CHANGE_POINTS.pick(
            "run_id", "run_at", "surface_id", "dimension_id", "kind", "change_time",
            "window_from", "window_to", "source", "reason", "confident", "effect", "since",
            "until", "tenant_id",
        ),
    )  # fmt: skip
    for i, verdict in enumerate(("confounded", "viable")):
        record_event(
            store, f"verdict-{i}", "variance-evaluate", SPEC.surface_id, "correctness",
            SINCE + dt.timedelta(hours=i), "{}", verdict=verdict,
        )  # fmt: skip
    scan = {
        "agentId": "billing-triage",
        "since": "2026-06-01T00:00:00Z",
        "until": "2026-06-01T06:00:00Z",
        "coverage": {"declared": 4, "observed": 3, "ratio": 0.75},
        "surfaces": [
            {"id": SPEC.surface_id, "coverage": {"declared": 2, "observed": 2, "ratio": 1.0}},
            {"id": "route", "coverage": {"declared": 2, "observed": 1, "ratio": 0.5}},
        ],
    }
    record_event(store, "scan-1", "topology-scan", "", "", SCAN_AT, json.dumps(scan))
    deploy = ChangeRecord(
        surface_id=SPEC.surface_id, kind="deploy", at=DEPLOY_AT, description="billing v1.4.2",
        actor="ci", id="deploy-142",
    )  # fmt: skip
    record_change(store, "default", deploy, UNTIL)
    elsewhere = deploy.model_copy(update={"surface_id": "route", "id": "deploy-route"})
    record_change(store, "default", elsewhere, UNTIL)
    record_change(store, "globex", deploy, UNTIL)  # another tenant's: never on these panels
    outage = AvailabilityMark(
        mode="paired", light_source_id=BETTER, unreachable_from=OUTAGE[0],
        unreachable_until=OUTAGE[1], reason="vendor-outage", id="outage-1",
    )  # fmt: skip
    mark_availability(store, "default", outage, UNTIL)
    store.insert(
        CONFORMANCE_RESULTS.qualified,
        [["default", f"check-{i}", "fx-1", SPEC.surface_id, SINCE + dt.timedelta(hours=1),
          verdict] for i, verdict in enumerate(("pass", "pass", "fail"))],
        CONFORMANCE_RESULTS.pick(
            "tenant_id", "check_id", "fixture_id", "surface_id", "checked_at", "verdict"
        ),
    )  # fmt: skip
    store.insert(
        QUARANTINE.qualified,
        [["default", f"q-{i}", SINCE + dt.timedelta(minutes=10 * i), reason, "holonograph.eval"]
         for i, reason in enumerate(
             ["missing attribute: holonograph.surface.id"] * 2 + ["unknown run mode: prod"]
         )],
        QUARANTINE.pick("tenant_id", "quarantine_id", "received_at", "reason", "span_name"),
    )  # fmt: skip


def _options(reader: Store, board: dict[str, Any], current: dict[str, Any]) -> dict[str, list[str]]:
    """Each variable's values, as Grafana fetches them (query variables run their SQL)."""
    options: dict[str, list[str]] = {}
    for variable in board["templating"]["list"]:
        if variable["type"] == "custom":
            options[variable["name"]] = variable["query"].split(",")
        elif variable["type"] == "query":
            sql = expand(variable["query"], current, options)
            options[variable["name"]] = [str(r[0]) for r in reader.query(sql).rows]
    return options


def _defaults(board: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v["current"].get("value", "$__all") for v in board["templating"]["list"]}


def _run(seeded: dict[str, Any], board: str, title: str, **selection: Any) -> list[dict[str, Any]]:
    dashboard = DASHBOARDS[board]
    current = _defaults(dashboard) | selection
    options = _options(seeded["reader"], dashboard, current)
    target = next(t for what, _, t in _queries(dashboard) if what == title)
    result: list[dict[str, Any]] = (
        seeded["reader"].query(expand(target["rawSql"], current, options)).dicts()
    )
    return result


_NUMBER = (int, float)


@pytest.mark.clickhouse
@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_panel_query_runs_and_returns_what_its_panel_needs(
    seeded: dict[str, Any], name: str
) -> None:
    board = DASHBOARDS[name]
    current = _defaults(board)
    options = _options(seeded["reader"], board, current)
    assert options["tenant"] == ["default"]
    for what, kind, target in _queries(board):
        if kind == "variable":
            continue
        result = seeded["reader"].query(expand(target["rawSql"], current, options))
        columns, rows = result.column_names, result.rows
        assert rows, f"{name}: {what} returned no rows on the seeded store"
        first = dict(zip(columns, rows[0], strict=True))
        if kind == "timeseries":
            assert columns[0] == "time" and isinstance(first["time"], dt.datetime), what
            assert any(isinstance(v, _NUMBER) and not isinstance(v, bool) for v in first.values())
        elif kind == "annotation":
            assert {"time", "text"} <= set(columns), what
            assert isinstance(first["time"], dt.datetime), what
        elif kind == "piechart":
            assert isinstance(rows[0][-1], int), what


@pytest.mark.clickhouse
def test_pass_rate_sits_beside_its_known_completeness_bound(seeded: dict[str, Any]) -> None:
    rows = _run(
        seeded, "evaluations", "Pass rate with completeness lower bound",
        surface=[SPEC.surface_id], dimension=["correctness"],
    )  # fmt: skip
    first = rows[0]
    hour0 = [
        o
        for c in seeded["truth"].calls
        if c.timestamp < SINCE + dt.timedelta(hours=1)
        for o in c.outcomes
        if o.passed is not None
    ]
    primary = [
        o for i, o in enumerate(o for o in hour0 if o.vendor == PRIMARY) if i not in SPEC.lost
    ]
    observers = [o for o in hour0 if o.vendor != PRIMARY]
    assert first["time"] == SINCE.replace(tzinfo=None)
    # By default what the agent used: the primary's events, never the observers'.
    assert first["pass_rate"] == pytest.approx(sum(o.passed for o in primary) / len(primary))
    for role, outcomes in (("observer", observers), ("all", primary + observers)):
        (row, *_) = _run(
            seeded, "evaluations", "Pass rate with completeness lower bound",
            surface=[SPEC.surface_id], dimension=["correctness"], role=role,
        )  # fmt: skip
        assert row["pass_rate"] == pytest.approx(sum(o.passed for o in outcomes) / len(outcomes))
    report: CompletenessReport = seeded["completeness"]
    window = next(
        w
        for w in report.windows
        if w.scope == "surface" and w.surface_id == SPEC.surface_id and w.bucket_start == SINCE
    )
    assert window.completeness_lower_bound < 1.0  # the three lost ordinals
    assert first["completeness_lower_bound"] == pytest.approx(window.completeness_lower_bound)


@pytest.mark.clickhouse
def test_the_vendor_panels_agree_with_compare(seeded: dict[str, Any]) -> None:
    report: CompareReport = seeded["compare"]
    rows = _run(
        seeded, "vendors", "Light sources in the window",
        surface=[SPEC.surface_id], dimension=["correctness"],
    )  # fmt: skip
    by_vendor = {r["light_source"]: r for r in rows}
    for group in report.groups:
        row = by_vendor[group.group]
        rate = group.dimensions[0].pass_rate
        assert rate is not None and row["events"] == group.events
        assert row["pass_rate"] == pytest.approx(rate.estimate)
        assert (row["wilson_low"], row["wilson_high"]) == pytest.approx(
            (rate.ci_low, rate.ci_high), abs=1e-4
        )
        assert row["latency_p50_ms"] == pytest.approx(group.latency_ms.p50)
        assert row["latency_p95_ms"] == pytest.approx(group.latency_ms.p95)
        assert row["cost_per_evaluation_usd"] == pytest.approx(group.cost_per_evaluation_usd)
    paired = _run(
        seeded, "vendors", "Paired on the same calls (graded on both sides)",
        surface=[SPEC.surface_id], dimension=["correctness"],
    )  # fmt: skip
    row = next(r for r in paired if (r["primary"], r["observer"]) == (PRIMARY, BETTER))
    pair = next(p for p in report.paired if (p.primary, p.observer) == (PRIMARY, BETTER))
    assert (row["paired_calls"], row["improved"], row["regressed"]) == (
        pair.paired, pair.improved, pair.regressed,
    )  # fmt: skip


@pytest.mark.clickhouse
def test_completeness_drift_and_ingest_panels_show_the_seeded_facts(
    seeded: dict[str, Any],
) -> None:
    report: CompletenessReport = seeded["completeness"]
    statuses = _run(seeded, "completeness", "Streams by status")
    assert {r["status"]: r["streams"] for r in statuses} == report.totals.by_status
    changes = _run(seeded, "drift-variance", "Change points")
    assert [(c["change_time"], c["source"]) for c in changes] == [
        (CHANGE_AT.replace(tzinfo=None), "light source")
    ]
    annotation = _run(seeded, "drift-variance", "Change point annotations")
    assert [a["time"] for a in annotation] == [CHANGE_AT.replace(tzinfo=None)]
    assert annotation[0]["text"].startswith("light source: correctness -0.12")
    labels = _run(seeded, "drift-variance", "Bracketed window regions")
    assert labels[0]["text"] == "bracketed: delivery-loss (correctness)"
    verdicts = _run(seeded, "drift-variance", "Latest variance verdicts")
    assert [(v["surface"], v["verdict"]) for v in verdicts] == [(SPEC.surface_id, "viable")]
    coverage = _run(seeded, "ingest-contracts", "Topology coverage (recorded scans)")
    assert [(c["series"], c["coverage_ratio"]) for c in coverage] == [("billing-triage", 0.75)]
    per_surface = _run(seeded, "ingest-contracts", "Coverage per surface (latest scan)")
    assert {r["surface"]: r["ratio"] for r in per_surface} == {SPEC.surface_id: 1.0, "route": 0.5}
    findings = _run(seeded, "ingest-contracts", "Contract findings over time")
    assert [(f["series"], f["events"]) for f in findings] == [("undeclared-dimension:tone", 2)]
    rejections = _run(seeded, "ingest-contracts", "Rejected spans by reason")
    counts: dict[str, int] = {}
    for r in rejections:
        counts[r["series"]] = counts.get(r["series"], 0) + r["rejected_spans"]
    assert counts == {"missing attribute": 2, "unknown run mode": 1}
    retries = _run(seeded, "ingest-contracts", "Retries per stream")
    assert [(r["stream"], r["retries"]) for r in retries] == [(RETRIED, 1)]
    verdict_counts = _run(seeded, "ingest-contracts", "Conformance verdicts over time")
    assert {r["series"]: r["checks"] for r in verdict_counts} == {"pass": 2, "fail": 1}


@pytest.mark.clickhouse
def test_the_lessons_panels_show_the_seeded_pipeline(seeded: dict[str, Any]) -> None:
    lessons = seeded["lessons"]
    per_surface = _run(seeded, "lessons", "Overrides per surface")
    assert sum(r["overrides"] for r in per_surface) == 5
    assert {r["series"] for r in per_surface} == {LESSONS_SURFACE}
    assert [r["cluster_id"] for r in _run(seeded, "lessons", "Open clusters")] == [lessons["open"]]
    gate = _run(seeded, "lessons", "Drafts at the gate")
    assert [(r["draft_id"], r["status"]) for r in gate] == [(lessons["waiting"], "drafted")]
    published = _run(seeded, "lessons", "Published artifacts")
    assert [(r["artifact_id"], r["version"], r["approver_id"]) for r in published] == [
        (lessons["published"], 1, "brian")
    ]


@pytest.mark.clickhouse
@pytest.mark.parametrize("board", ["evaluations", "drift-variance"])
def test_recorded_changes_annotate_the_pass_rate_panels(seeded: dict[str, Any], board: str) -> None:
    """A point per change of the surface (or its agent, or the tenant), a region per
    availability interval; not another surface's change, not another tenant's."""
    rows = _run(seeded, board, "Recorded changes", surface=[SPEC.surface_id])
    naive = [(r["time"], r["timeEnd"], r["tags"], r["text"]) for r in rows]
    assert naive == [
        (DEPLOY_AT.replace(tzinfo=None), DEPLOY_AT.replace(tzinfo=None), "deploy",
         "deploy: billing v1.4.2 (ci)"),
        (SCAN_AT.replace(tzinfo=None), SCAN_AT.replace(tzinfo=None), "topology-scan",
         "topology-scan: topology scan of billing-triage: recorded"),
        (OUTAGE[0].replace(tzinfo=None), OUTAGE[1].replace(tzinfo=None), "availability",
         f"availability: {BETTER} unreachable until 2026-06-01T09:00:00Z: vendor-outage"),
    ]  # fmt: skip
    route = _run(seeded, board, "Recorded changes", surface=["route"])
    assert [r["tags"] for r in route] == ["deploy", "topology-scan", "availability"]
    assert route[0]["text"] == rows[0]["text"] and route[0]["time"] == rows[0]["time"]
