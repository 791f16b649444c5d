"""The topology scanner while `serve` holds the store: the wire example ingested over
OTLP/HTTP, the docs' contract and inventories posted, a recorded scan that reports the
example's differences, read back from analysis_events — every command through the
owner's admin endpoint, as separate processes."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "examples"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, ServeProcess]]:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        yield data_dir, server
    finally:
        server.stop()


def post_example(server: ServeProcess) -> None:
    line = next(line for line in server.lines if line.startswith("OTLP/HTTP"))
    match = re.search(r"(http://127\.0\.0\.1:\d+/v1/traces)", line)
    assert match, server.lines
    request = urllib.request.Request(
        match[1],
        data=(ROOT / "examples" / "evaluation-and-sentinel.otlp.json").read_bytes(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = json.loads(answer.read() or b"{}")
    assert answer.status == 200 and not body.get("partialSuccess", {}).get("rejectedSpans")


def test_recorded_scan_through_a_running_serve(served: tuple[Path, ServeProcess]) -> None:
    data_dir, server = served
    store = ("--data-dir", str(data_dir))
    post_example(server)
    registered = holonograph(
        "contract", "register", str(DOCS / "contracts" / "billing-triage.json"), *store
    )
    assert registered.returncode == 0, registered.stderr
    for name in ("billing-triage-inventory.json", "billing-triage-dispatch.json"):
        posted = holonograph(
            "topology", "inventory", str(DOCS / "topology" / name), *store, "--json"
        )
        assert posted.returncode == 0, posted.stderr
        assert json.loads(posted.stdout)["created"] is True

    done = holonograph(
        "topology", "scan", "--agent", "billing-triage", "--since", "2026-11-30T00:00:00Z",
        "--until", "2026-12-01T00:00:00Z", "--record", "--json", *store,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    (surface,) = report["surfaces"]
    assert surface["id"] == "classify-intent" and surface["events"]["count"] == 1
    assert surface["dimensions"]["declaredNotObserved"]["examples"] == ["schema-conformance"]
    assert [d["id"] for d in surface["dimensions"]["observedNotDeclared"]["examples"]] == ["tone"]
    assert surface["cohortTags"]["declaredNotObserved"]["count"] == 0
    assert surface["substrateColumns"]["declaredNotObserved"]["examples"] == ["severity"]
    # Served as a version of the routed alias: observed as openai/gpt-5, no false gap.
    light = surface["lightSources"]
    assert light["observedNotDeclared"]["count"] == 0
    assert [x["id"] for x in light["declaredAndObserved"]["examples"]] == ["openai/gpt-5"]
    assert light["declaredNotObserved"]["examples"] == ["anthropic/claude-sonnet-5"]
    assert report["coverage"] == {"declared": 9, "observed": 6, "ratio": round(6 / 9, 6)}
    assert [i["consumerId"] for i in report["inventories"]] == [
        "billing-triage-agent", "billing-triage-router"
    ]  # fmt: skip
    assert report["inventoryOnlySurfaces"]["examples"] == [
        "escalate-to-human", "review-flagged-charge"
    ]  # fmt: skip
    assert report["quietSurfaces"]["examples"] == ["escalate-to-human", "review-flagged-charge"]

    rows = holonograph(
        "query", "--json", *store,
        "SELECT event_id, JSONExtractFloat(payload, 'coverage', 'ratio') AS coverage"
        " FROM holonograph.analysis_events FINAL WHERE kind = 'topology-scan'",
    )  # fmt: skip
    assert rows.returncode == 0, rows.stderr
    assert json.loads(rows.stdout) == [{"event_id": report["scanId"], "coverage": round(6 / 9, 6)}]

    bootstrap = holonograph(
        "topology", "bootstrap", "--surface", "classify-intent", "--since",
        "2026-11-30T00:00:00Z", "--until", "2026-12-01T00:00:00Z", "--min-count", "1", "--json",
        *store,
    )  # fmt: skip
    assert bootstrap.returncode == 0, bootstrap.stderr
    draft = json.loads(bootstrap.stdout)["surface"]
    assert draft["dimensions"] == [
        {"id": "correctness", "type": "score"},
        {"id": "tone", "type": "score"},
    ]  # fmt: skip (correctness carries a score, as the README's contract declares)
