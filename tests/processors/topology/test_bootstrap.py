"""`holonograph topology bootstrap` on seeded traffic: a stable dimension is
deterministic, a sparse or type-unstable one lowConfidence, with the evidence; the
draft contract registers cleanly through `holonograph contract register`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pydantic import TypeAdapter

from holonograph.cli import cli
from processors.topology.documents import BootstrapDocument
from schemas.contracts import parse_contract
from schemas.registry import register
from testkit.backends import migrated_store
from tests.processors.topology.support import SINCE, Event, insert_events
from tests.processors.topology.test_scan import CONTRACT

pytestmark = pytest.mark.clickhouse
SURFACE = "review-flagged-charge"
WINDOW = ("--since", "2026-07-01T00:00:00Z", "--until", "2026-07-08T00:00:00Z")


def traffic() -> list[Event]:
    """40 events spread evenly over the week: `correctness` (a score) on every one,
    `tone` on 5, `verdict` on every one but a score on half and a boolean on the other
    half, `late` on the last 8 only (the last quarter of the week)."""
    events = []
    for i in range(40):
        dims: dict[str, tuple[bool | None, float | None]] = {"correctness": (None, 0.5 + i / 100)}
        dims["verdict"] = (None, 0.7) if i % 2 else (True, None)
        if i % 8 == 0:
            dims["tone"] = (None, 0.3)
        if i >= 32:
            dims["late"] = (True, None)
        at = SINCE + dt.timedelta(hours=4 * i + 1)
        tier = "enterprise" if i % 3 else "free"
        events.append(
            Event(SURFACE, at, dims, [f"customer-tier={tier}"], {"prompt_hash": f"p{i % 2}"})
        )
    return events


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with migrated_store(path) as store:
        register(store, "default", parse_contract(CONTRACT), SINCE - dt.timedelta(days=10))
        insert_events(store, traffic())
    return path


def bootstrap(data_dir: Path, *extra: str) -> dict[str, Any]:
    done = invoke(
        "topology", "bootstrap", "--surface", SURFACE, *WINDOW, "--data-dir", str(data_dir),
        "--json", *extra,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    result: dict[str, Any] = json.loads(done.output)
    TypeAdapter(BootstrapDocument).validate_python(result)  # the OpenAPI schema's type
    return result


def by_id(block: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in block["examples"]}


def test_stable_is_deterministic_sparse_and_unstable_are_low_confidence(data_dir: Path) -> None:
    report = bootstrap(data_dir)
    assert report["events"] == 40 and report["agentId"] == "billing-triage"
    assert report["thresholds"] == {"minCount": 20, "minPresence": 0.9, "windowParts": 4}
    dims = by_id(report["candidates"]["dimensions"])
    assert set(dims) == {"correctness", "verdict", "tone", "late"}
    assert dims["correctness"] == {
        "id": "correctness", "type": "score", "inference": "deterministic", "reasons": [],
        "evidence": {"count": 40, "presenceShare": 1.0, "typesSeen": {"score": 40, "boolean": 0},
                     "windowParts": {"present": 4, "withEvents": 4}},
    }  # fmt: skip
    assert dims["tone"]["inference"] == "lowConfidence"
    assert dims["tone"]["evidence"]["count"] == 5
    assert dims["tone"]["reasons"] == ["on 5 events, fewer than 20", "on 12% of events, under 90%"]
    assert dims["verdict"]["inference"] == "lowConfidence" and dims["verdict"]["type"] is None
    assert dims["verdict"]["evidence"]["typesSeen"] == {"score": 20, "boolean": 20}
    assert dims["verdict"]["reasons"] == ["unstable type: score and boolean"]
    assert dims["late"]["inference"] == "lowConfidence"
    assert dims["late"]["reasons"] == [
        "on 8 events, fewer than 20",
        "on 20% of events, under 90%",
        "absent from 3 of 4 window parts",
    ]

    tags = by_id(report["candidates"]["cohortTags"])
    assert tags["customer-tier"]["inference"] == "deterministic"
    assert tags["customer-tier"]["evidence"]["valuesSeen"] == ["enterprise", "free"]
    columns = by_id(report["candidates"]["substrateColumns"])
    assert columns["prompt_hash"]["inference"] == "deterministic"
    assert columns["prompt_hash"]["evidence"]["valuesSeen"] == ["p0", "p1"]

    assert report["surface"] == {
        "id": SURFACE,
        "dimensions": [{"id": "correctness", "type": "score"}],
        "cohortTags": ["customer-tier"],
        "substrateColumns": [{"id": "prompt_hash", "control": "operator",
                              "visibility": "transparent", "semantic": "deployment-state"}],
        "routings": [],
    }  # fmt: skip


def test_thresholds_are_options(data_dir: Path) -> None:
    report = bootstrap(data_dir, "--min-count", "41")
    correctness = by_id(report["candidates"]["dimensions"])["correctness"]
    assert correctness["inference"] == "lowConfidence"
    assert correctness["reasons"] == ["on 40 events, fewer than 41"]
    assert report["surface"]["dimensions"] == []


def test_the_draft_registers_cleanly(data_dir: Path, tmp_path: Path) -> None:
    report = bootstrap(data_dir)
    assert report["basedOnVersionId"].startswith("cv_")
    assert [s["id"] for s in report["contract"]["surfaces"]] == [
        "classify-intent", "escalate", SURFACE
    ]  # fmt: skip
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(report["contract"]))
    done = invoke("contract", "register", str(draft), "--data-dir", str(data_dir), "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["created"] is True
    assert summary["previousVersionId"] == report["basedOnVersionId"]
    assert summary["removed"] == []
    added = {s["id"]: s for s in summary["surfaces"]}[SURFACE]
    assert added["dimensions"] == [{"id": "correctness", "type": "score"}]
    assert added["cohortTags"] == ["customer-tier"]


def test_text_output_and_no_traffic(data_dir: Path) -> None:
    text = invoke(
        "topology", "bootstrap", "--surface", SURFACE, *WINDOW, "--data-dir", str(data_dir)
    )
    assert text.exit_code == 0, text.output
    assert "dimension correctness score: deterministic, on 40 events (100%)" in text.output
    assert "dimension tone score: lowConfidence, on 5 events (12%)" in text.output
    typo = invoke(
        "topology", "bootstrap", "--surface", "nothing-here", *WINDOW, "--data-dir", str(data_dir)
    )
    assert typo.exit_code == 2  # a surface never seen: a typo, not "no traffic"
    assert f"error: unknown surface 'nothing-here'; known: {SURFACE}" in typo.output
    quiet = ["--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z"]
    none = invoke(
        "topology", "bootstrap", "--surface", SURFACE, *quiet, "--data-dir", str(data_dir)
    )
    assert none.exit_code == 1, none.output
    assert f"error: surface {SURFACE} has no events in tenant default" in none.output
