"""`holonograph topology inventory | scan` on a store seeded with known declared,
observed and inventoried sets: exactly the expected differences, coverage, gate and
exit code; `--record` read back from analysis_events; inventories posted once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pydantic import TypeAdapter

from holonograph.cli import cli
from processors.topology.documents import ScanDocument
from schemas.contracts import parse_contract
from schemas.registry import register
from testkit.backends import migrated_store
from tests.processors.topology.support import SINCE, UNTIL, Event, insert_events

pytestmark = pytest.mark.clickhouse
CONTRACT: dict[str, Any] = {
    "agentId": "billing-triage",
    "surfaces": [
        {
            "id": "classify-intent",
            "dimensions": [
                {"id": "correctness", "type": "score"},
                {"id": "schema-conformance", "type": "boolean"},
                {"id": "tone-old", "type": "score"},
            ],
            "cohortTags": ["customer-tier", "fix_tier"],
            "substrateColumns": [
                {"id": "prompt_hash", "control": "operator", "visibility": "transparent",
                 "semantic": "deployment-state"},
                {"id": "severity", "control": "operator", "visibility": "transparent",
                 "semantic": "diagnostic", "values": ["low", "high"]},
            ],
            "routings": [
                {"surfaceId": "classify-intent", "lightSourceId": "anthropic/claude-sonnet-5"}
            ],
        },
        {"id": "escalate", "dimensions": [{"id": "handoff", "type": "boolean"}]},
    ],
}  # fmt: skip
INVENTORY = {
    "agentId": "billing-triage",
    "consumerId": "billing-triage-agent",
    "inventoryKind": "surface-ids",
    "surfaceIds": ["classify-intent", "review-flagged-charge"],
    "capturedAt": "2026-07-05T18:00:00Z",
}
DAY = dt.timedelta(days=1)
GOOD = {"correctness": (None, 0.9), "schema-conformance": (True, None)}
SONNET = "anthropic/claude-sonnet-5"


def seeded_events() -> list[Event]:
    ci = "classify-intent"
    return [
        # before the window: the only sighting of tone-old (a retirement candidate)
        Event(ci, SINCE - 3 * DAY, {"tone-old": (None, 0.5)}, light_source=SONNET),
        Event(ci, SINCE + DAY, GOOD, ["customer-tier=enterprise", "severity=high"],
              {"prompt_hash": "p1"}, SONNET),
        Event(ci, SINCE + 2 * DAY, GOOD, ["customer-tier=free", "beta"], {"prompt_hash": "p1"},
              SONNET),
        Event(ci, SINCE + 3 * DAY, {**GOOD, "tone": (None, 0.4)}, ["beta"],
              light_source="openai/gpt-5"),
        # no agent id, on a declared surface: the agent's
        Event(ci, SINCE + 4 * DAY, GOOD, light_source=SONNET, agent=""),
        # another agent on the same surface, another tenant, after the window: not counted
        Event(ci, SINCE + DAY, {"other-dim": (True, None)}, agent="someone-else"),
        Event(ci, SINCE + DAY, {"other-tenant-dim": (True, None)}, tenant="acme"),
        Event(ci, UNTIL, {"late-dim": (True, None)}),
        # an observed surface the contract does not declare
        Event("refund", SINCE + DAY, {"refunded": (True, None)}),
    ]  # fmt: skip


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["topology", *args])


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with migrated_store(path) as store:
        register(store, "default", parse_contract(CONTRACT), SINCE - 10 * DAY)
        insert_events(store, seeded_events())
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(INVENTORY))
    posted = invoke("inventory", str(inventory), "--data-dir", str(path), "--json")
    assert posted.exit_code == 0, posted.output
    return path


SCAN_DOCUMENT = TypeAdapter(ScanDocument)


def scan(data_dir: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--tenant", "default", "--data-dir", str(data_dir),
        "--json", *extra,
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    report = json.loads(done.output)
    SCAN_DOCUMENT.validate_python(report)  # the OpenAPI schema's type, no key unknown to it
    return done.exit_code, report


def ids(block: dict[str, Any]) -> list[Any]:
    return [e["id"] if isinstance(e, dict) else e for e in block["examples"]]


def test_scan_reports_exactly_the_seeded_differences(data_dir: Path) -> None:
    code, report = scan(data_dir)
    assert code == 1
    assert report["agentId"] == "billing-triage" and report["tenantId"] == "default"
    assert (report["since"], report["until"]) == ("2026-07-01T00:00:00Z", "2026-07-08T00:00:00Z")
    assert report["contractVersionId"].startswith("cv_")
    assert [i["consumerId"] for i in report["inventories"]] == ["billing-triage-agent"]

    classify, escalate = report["surfaces"]
    assert classify["id"] == "classify-intent" and classify["events"]["count"] == 4
    assert classify["events"]["firstSeen"] == "2026-07-02T00:00:00Z"
    assert classify["events"]["lastSeen"] == "2026-07-05T00:00:00Z"
    dims = classify["dimensions"]
    assert ids(dims["declaredNotObserved"]) == ["tone-old"]
    assert dims["observedNotDeclared"]["examples"] == [
        {"id": "tone", "count": 1, "firstSeen": "2026-07-04T00:00:00Z",
         "lastSeen": "2026-07-04T00:00:00Z"}
    ]  # fmt: skip
    assert dims["declaredAndObserved"]["examples"] == [
        {"id": "correctness", "count": 4}, {"id": "schema-conformance", "count": 4}
    ]  # fmt: skip
    tags = classify["cohortTags"]
    assert ids(tags["declaredNotObserved"]) == ["fix_tier"]
    assert tags["observedNotDeclared"]["examples"] == [
        {"id": "beta", "count": 2, "firstSeen": "2026-07-03T00:00:00Z",
         "lastSeen": "2026-07-04T00:00:00Z"}
    ]  # fmt: skip
    assert tags["declaredAndObserved"]["examples"] == [{"id": "customer-tier", "count": 2}]
    columns = classify["substrateColumns"]  # severity arrives as a `severity=high` tag
    assert columns["declaredNotObserved"]["count"] == columns["observedNotDeclared"]["count"] == 0
    assert columns["declaredAndObserved"]["examples"] == [
        {"id": "prompt_hash", "count": 2}, {"id": "severity", "count": 1}
    ]  # fmt: skip
    lights = classify["lightSources"]
    assert ids(lights["observedNotDeclared"]) == ["openai/gpt-5"]
    assert lights["declaredAndObserved"]["examples"] == [{"id": SONNET, "count": 3}]
    assert classify["retirementCandidates"]["examples"] == [
        {"kind": "dimension", "id": "tone-old", "lastSeen": "2026-06-28T00:00:00Z",
         "countBefore": 1}
    ]  # fmt: skip
    assert classify["coverage"] == {"declared": 8, "observed": 6, "ratio": 0.75}
    assert classify["inventoried"] is True and classify["observed"] is True

    assert escalate["id"] == "escalate" and escalate["observed"] is False
    assert escalate["inventoried"] is False
    assert escalate["coverage"] == {"declared": 1, "observed": 0, "ratio": 0.0}
    assert ids(escalate["dimensions"]["declaredNotObserved"]) == ["handoff"]

    assert report["coverage"] == {"declared": 9, "observed": 6, "ratio": round(6 / 9, 6)}
    assert ids(report["quietSurfaces"]) == ["escalate", "review-flagged-charge"]
    assert report["undeclaredSurfaces"]["examples"] == [
        {"id": "refund", "count": 1, "firstSeen": "2026-07-02T00:00:00Z",
         "lastSeen": "2026-07-02T00:00:00Z"}
    ]  # fmt: skip
    assert ids(report["inventoryOnlySurfaces"]) == ["review-flagged-charge"]
    assert ids(report["declaredNotInventoried"]) == ["escalate"]
    # 2 + 3 on classify-intent, 1 on escalate, 2 quiet, 1 undeclared, 1 inventory-only
    assert report["gaps"] == 10 and report["retirementCandidates"] == 1
    assert report["gate"] == {"failUnder": None, "passed": False, "reasons": ["10 gaps"]}
    assert report["recorded"] is False


def test_fail_under_gates_on_coverage_alone(data_dir: Path) -> None:
    code, report = scan(data_dir, "--fail-under", "0.6")
    assert code == 0 and report["gate"]["passed"] is True and report["gaps"] == 10
    code, report = scan(data_dir, "--fail-under", "0.7")
    assert code == 1
    assert report["gate"]["reasons"] == ["coverage 0.667 is below 0.7"]


def test_examples_cap_lists_but_not_counts(data_dir: Path) -> None:
    _, report = scan(data_dir, "--examples", "1")
    assert report["quietSurfaces"] == {"count": 2, "examples": ["escalate"]}
    dims = report["surfaces"][0]["dimensions"]["declaredAndObserved"]
    assert dims == {"count": 2, "examples": [{"id": "correctness", "count": 4}]}


def test_record_stores_one_analysis_event_in_the_agreed_shape(data_dir: Path) -> None:
    code, report = scan(data_dir, "--record")
    assert code == 1 and report["recorded"] is True
    with migrated_store(data_dir) as store:
        rows = store.query(
            "SELECT tenant_id, event_id, kind, surface_id, created_at, verdict, payload"
            " FROM holonograph.analysis_events FINAL WHERE kind = 'topology-scan'"
        ).rows
    assert len(rows) == 1
    tenant, event_id, kind, surface_id, created_at, verdict, payload = rows[0]
    assert (tenant, event_id, kind, surface_id, verdict) == (
        "default", report["scanId"], "topology-scan", "", "fail"
    )  # fmt: skip
    assert created_at.replace(microsecond=0).isoformat() + "Z" == report["scannedAt"]
    stored = json.loads(payload)
    assert stored == report
    assert stored["coverage"] == {"declared": 9, "observed": 6, "ratio": round(6 / 9, 6)}
    assert [(s["id"], s["coverage"]["ratio"]) for s in stored["surfaces"]] == [
        ("classify-intent", 0.75), ("escalate", 0.0)
    ]  # fmt: skip


def test_a_clean_scan_passes_the_gate(tmp_path: Path) -> None:
    clean = {
        "agentId": "billing-triage",
        "surfaces": [{"id": "escalate", "dimensions": [{"id": "handoff", "type": "boolean"}]}],
    }
    path = tmp_path / "store"
    with migrated_store(path) as store:
        register(store, "default", parse_contract(clean), SINCE - DAY)
        insert_events(store, [Event("escalate", SINCE + DAY, {"handoff": (True, None)})])
    code, report = scan(path)
    assert code == 0
    assert report["gaps"] == 0 and report["coverage"]["ratio"] == 1.0
    assert report["gate"] == {"failUnder": None, "passed": True, "reasons": []}
    text = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--data-dir", str(path),
    )  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "coverage 1/1 declared items observed (1.000), 0 gaps" in text.output
    assert "gate passed" in text.output


def test_routings_declare_their_light_sources_only_in_their_active_run_modes(
    tmp_path: Path,
) -> None:
    # Sonnet answers in every mode; GPT-5 observes in eval and production only.
    routings = [
        {"surfaceId": "triage", "lightSourceId": SONNET},
        {"surfaceId": "triage", "lightSourceId": [SONNET, "openai/gpt-5"],
         "activeRunModes": ["eval", "production"]},
    ]  # fmt: skip
    contract = {
        "agentId": "billing-triage",
        "surfaces": [
            {"id": s, "dimensions": [{"id": "handoff", "type": "boolean"}], "routings": [
                {**r, "surfaceId": s} for r in routings]}
            for s in ("triage", "triage-prod", "triage-test")
        ],
    }  # fmt: skip
    ok = {"handoff": (True, None)}
    path = tmp_path / "store"
    with migrated_store(path) as store:
        register(store, "default", parse_contract(contract), SINCE - DAY)
        insert_events(store, [
            # test traffic only: the observer is not expected
            Event("triage", SINCE + DAY, ok, light_source=SONNET, run_mode="test"),
            # production traffic: the observer is expected, and missing
            Event("triage-prod", SINCE + DAY, ok, light_source=SONNET),
            # the observer answering in test mode, where it is not routed
            Event("triage-test", SINCE + DAY, ok, light_source=SONNET, run_mode="test"),
            Event("triage-test", SINCE + DAY, ok, light_source="openai/gpt-5", run_mode="test"),
        ])  # fmt: skip
    _, report = scan(path)
    light = {s["id"]: s["lightSources"] for s in report["surfaces"]}
    assert ids(light["triage"]["declaredNotObserved"]) == []
    assert ids(light["triage"]["observedNotDeclared"]) == []
    assert ids(light["triage-prod"]["declaredNotObserved"]) == ["openai/gpt-5"]
    assert ids(light["triage-test"]["observedNotDeclared"]) == ["openai/gpt-5"]
    assert report["gaps"] == 2


def test_alias_routings_are_observed_in_their_served_versions(tmp_path: Path) -> None:
    """A routing naming an alias (`openai/gpt-5`) is observed in events served as a
    version of it, or requested as it under another served id: no false gap either
    way. A prefix that is not at a `/` boundary is another light source."""
    contract = {
        "agentId": "billing-triage",
        "surfaces": [
            {"id": "triage", "dimensions": [{"id": "handoff", "type": "boolean"}],
             "routings": [{"surfaceId": "triage", "lightSourceId": [SONNET, "openai/gpt-5"]}]},
            {"id": "mini", "dimensions": [{"id": "handoff", "type": "boolean"}],
             "routings": [{"surfaceId": "mini", "lightSourceId": "openai/gpt-5"}]},
        ],
    }  # fmt: skip
    ok = {"handoff": (True, None)}
    path = tmp_path / "store"
    with migrated_store(path) as store:
        register(store, "default", parse_contract(contract), SINCE - DAY)
        insert_events(store, [
            Event("triage", SINCE + DAY, ok, light_source=f"{SONNET}/2026-05", requested=SONNET),
            Event("triage", SINCE + DAY, ok, light_source="openai/gpt-5/2026-05",
                  requested="openai/gpt-5"),
            Event("triage", SINCE + 2 * DAY, ok, light_source="openai/gpt-5/2026-10",
                  requested="openai/gpt-5"),
            # the alias served under an id of another shape, recorded as requested
            Event("triage", SINCE + 3 * DAY, ok, light_source="gpt-5-0513",
                  requested="openai/gpt-5"),
            # not a version of openai/gpt-5: its own light source
            Event("mini", SINCE + DAY, ok, light_source="openai/gpt-5-mini"),
        ])  # fmt: skip
    _, report = scan(path)
    light = {s["id"]: s["lightSources"] for s in report["surfaces"]}
    assert ids(light["triage"]["declaredNotObserved"]) == []
    assert ids(light["triage"]["observedNotDeclared"]) == []
    observed = {e["id"]: e["count"] for e in light["triage"]["declaredAndObserved"]["examples"]}
    assert observed == {SONNET: 1, "openai/gpt-5": 3}
    assert ids(light["mini"]["declaredNotObserved"]) == ["openai/gpt-5"]
    assert ids(light["mini"]["observedNotDeclared"]) == ["openai/gpt-5-mini"]
    assert report["gaps"] == 2


def test_an_agent_without_a_contract_fails_the_gate(data_dir: Path) -> None:
    done = invoke(
        "scan", "--agent", "nobody", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--tenant", "default", "--data-dir", str(data_dir),
    )  # fmt: skip
    assert done.exit_code == 1
    assert "gate failed: agent nobody has no contract in tenant default" in done.output


def test_scan_reads_only_its_tenant(data_dir: Path) -> None:
    done = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--tenant", "acme", "--data-dir", str(data_dir),
        "--json",
    )  # fmt: skip
    report = json.loads(done.output)
    assert report["contractVersionId"] is None and report["undeclaredSurfaces"]["count"] == 1
    assert report["inventories"] == []
    unnamed = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--data-dir", str(data_dir),
    )  # fmt: skip
    assert unnamed.exit_code == 2 and "name one with --tenant" in unnamed.output


def test_window_must_be_ordered(data_dir: Path) -> None:
    done = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-08T00:00:00Z",
        "--until", "2026-07-01T00:00:00Z", "--data-dir", str(data_dir),
    )  # fmt: skip
    assert done.exit_code == 2 and "--until must be after --since" in done.output


def test_inventory_created_then_identical_repost_is_the_same(tmp_path: Path) -> None:
    store = ["--data-dir", str(tmp_path / "store")]
    body = tmp_path / "inventory.json"
    body.write_text(json.dumps(INVENTORY))
    first = invoke("inventory", str(body), *store, "--json")
    assert first.exit_code == 0, first.output
    created = json.loads(first.output)
    assert created["inventoryId"].startswith("inv_") and created["created"] is True
    assert created["consumerId"] == "billing-triage-agent"
    assert created["capturedAt"] == "2026-07-05T18:00:00Z"
    again = json.loads(invoke("inventory", str(body), *store, "--json").output)
    assert again == {**created, "created": False}

    mapped: dict[str, Any] = {
        **INVENTORY,
        "inventoryKind": "dispatch-map",
        "capturedAt": "2026-07-06T00:00:00Z",
    }
    del mapped["surfaceIds"]
    mapped["dispatchMap"] = {"refund-request": "refund", "dispute": "classify-intent"}
    body.write_text(json.dumps(mapped))
    newer = json.loads(invoke("inventory", str(body), *store, "--json").output)
    assert newer["created"] is True and newer["inventoryId"] != created["inventoryId"]
    with migrated_store(tmp_path / "store") as opened:
        count = opened.query("SELECT count() FROM holonograph.structural_inventories FINAL")
        assert count.scalar() == 2
        from processors.topology.inventory import latest_inventories

        (latest,) = latest_inventories(opened, "default", "billing-triage")
    assert latest.inventory_id == newer["inventoryId"]
    assert latest.surfaces == ("classify-intent", "refund")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"inventoryKind": "routes"}, "inventoryKind"),
        ({"dispatchMap": {"a": "b"}}, "carries surfaceIds[] and no dispatchMap"),
        ({"surfaceIds": ["a", "a"]}, "duplicate surfaceIds: a"),
        ({"capturedAt": "2026-07-05T18:00:00"}, "capturedAt"),
        ({"extra": 1}, "extra: Extra inputs are not permitted"),
    ],
)
def test_invalid_inventory_is_refused_and_nothing_stored(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    body = tmp_path / "inventory.json"
    body.write_text(json.dumps({**INVENTORY, **change}))
    done = invoke("inventory", str(body), "--data-dir", str(tmp_path / "store"))
    assert done.exit_code == 2
    assert problem in done.output and "nothing was stored" in done.output
    assert not (tmp_path / "store").exists()


def test_text_report_names_the_gaps(data_dir: Path) -> None:
    done = invoke(
        "scan", "--agent", "billing-triage", "--since", "2026-07-01T00:00:00Z",
        "--until", "2026-07-08T00:00:00Z", "--tenant", "default", "--data-dir", str(data_dir),
    )  # fmt: skip
    assert done.exit_code == 1
    lines = [line.strip() for line in done.output.splitlines()]
    assert "coverage 6/9 declared items observed (0.667), 10 gaps, 1 retirement candidates" in lines
    assert "surface classify-intent: 4 events, coverage 6/8" in lines
    assert "dimensions declared, not observed: tone-old" in lines
    assert "cohort tags observed, not declared: beta" in lines
    assert "light sources observed, not declared: openai/gpt-5" in lines
    assert "retirement candidates (seen before the window only): tone-old" in lines
    assert "quiet surfaces (no events in the window): escalate, review-flagged-charge" in lines
    assert "undeclared surfaces (observed, not in the contract): refund" in lines
    assert "inventory-only surfaces (not in the contract): review-flagged-charge" in lines
    assert "gate failed: 10 gaps" in lines
