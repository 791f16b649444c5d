"""The lessons commands: each the caller of its job, --json the HTTP body, exit codes
meaning one thing each (2: refused, 1: a re-run fixture failed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from testkit.backends import migrated_store
from tests.processors.lessons.support import SURFACE, insert_calls, override_body

pytestmark = pytest.mark.chdb_only("the commands open the test's own chDB directory")
SINCE, UNTIL = "2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z"


def invoke(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)])


def answer(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "store"
    with migrated_store(data) as store:
        insert_calls(
            store,
            [
                (
                    "evt_seed",
                    "corr_seed",
                    {"tool_use": True},
                    {"tool_invocations": ["refund_lookup"]},
                ),
                *[
                    (f"evt_bad{n}", f"corr_{n:03d}", {"tool_use": False}, {"tool_invocations": []})
                    for n in range(3)
                ],
            ],
        )
    return data


def test_the_loop_through_the_cli(tmp_path: Path, data_dir: Path) -> None:
    for n in range(3):
        body = tmp_path / f"override{n}.json"
        body.write_text(json.dumps(override_body(n)))
        recorded = answer(invoke(data_dir, "lessons", "override", str(body), "--json"))
        assert recorded["created"]
    again = invoke(data_dir, "lessons", "override", str(tmp_path / "override0.json"))
    assert again.exit_code == 0 and "already recorded" in again.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(override_body(9, surfaceId="no spaces allowed")))
    refused = invoke(data_dir, "lessons", "override", str(bad))
    assert refused.exit_code == 2 and "surfaceId" in refused.output
    window = ["--surface", SURFACE, "--since", SINCE, "--until", UNTIL]
    listed = answer(invoke(data_dir, "lessons", "overrides", *window, "--json"))
    assert listed["count"] == 3 and listed["overrides"][0]["evaluationEventIds"] == ["evt_bad0"]
    clustered = answer(invoke(data_dir, "lessons", "cluster", *window, "--record", "--json"))
    (only,) = clustered["clusters"]
    assert only["size"] == 3 and clustered["eventCount"] == 3
    drafted = answer(
        invoke(
            data_dir, "lessons", "draft", "--kind", "fixture", "--cluster", only["clusterId"],
            "--seed-event-id", "evt_seed", "--json",
        )
    )  # fmt: skip
    draft_id = drafted["draftId"]
    early = invoke(data_dir, "lessons", "publish", "--draft", draft_id)
    assert early.exit_code == 2 and "only an approved draft is published" in early.output
    no_comment = invoke(data_dir, "lessons", "reject", "--draft", draft_id, "--approver", "brian")
    assert no_comment.exit_code == 2 and "--comment" in no_comment.output
    approved = invoke(data_dir, "lessons", "approve", "--draft", draft_id, "--approver", "brian")
    assert approved.exit_code == 0 and "approved by brian" in approved.stdout
    published = answer(invoke(data_dir, "lessons", "publish", "--draft", draft_id, "--json"))
    fixture_id = published["artifact"]["artifactId"]
    assert published["changeEvent"]["artifactId"] == fixture_id
    rerun = invoke(
        data_dir,
        "fixtures",
        "rerun",
        "--fixture-id",
        fixture_id,
        "--since",
        SINCE,
        "--until",
        UNTIL,
    )
    assert rerun.exit_code == 1, rerun.output  # the corrected calls fail: a finding
    assert "fail" in rerun.stdout and "refund_lookup" in rerun.stdout
    unknown = invoke(data_dir, "fixtures", "rerun", "--fixture-id", "fx-nope")
    assert unknown.exit_code == 2 and "fx-nope" in unknown.output
