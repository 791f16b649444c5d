"""docs/lessons.md's worked example runs as written, block after block, against a store
seeded with the calls it describes; the commands' own answers are checked after."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.tables import CHANGE_EVENTS, CONFORMANCE_FIXTURES, LESSON_DRAFTS
from testkit.backends import migrated_store
from tests.processors.lessons.support import insert_calls

pytestmark = pytest.mark.chdb_only("the example runs the CLI on its own data directory")
ROOT = Path(__file__).resolve().parents[3]


def test_the_worked_example_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with migrated_store(data) as store:
        calls = [(f"evt_{n:03d}", f"corr_{n:03d}", {"tool_use": False}, {"tool_invocations": []})
                 for n in range(4)]  # fmt: skip
        seed = (
            "evt_seed",
            "corr_seed",
            {"tool_use": True},
            {"tool_invocations": ["refund_lookup"]},
        )
        insert_calls(store, [*calls, seed])
    text = (ROOT / "docs" / "lessons.md").read_text()
    example = text[text.index("## A worked example") :]
    blocks = re.findall(r"```sh\n(.*?)```", example, flags=re.S)
    assert len(blocks) == 4
    env = {
        **os.environ,
        "HOLONOGRAPH_DATA_DIR": str(data),
        "TMPDIR": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    outputs = []
    for block in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (block, done.stdout, done.stderr)
        outputs.append(done.stdout)
    assert "4 override(s) of classify-intent" in outputs[0]
    published = json.loads((tmp_path / "published.json").read_text())
    assert published["status"] == "published" and published["changeEvent"]["actor"] == "brian"
    assert "fail (fail 4, pass 1)" in outputs[3]
    with migrated_store(data) as store:
        actions = store.query(f"SELECT action FROM {LESSON_DRAFTS.qualified} ORDER BY seq").rows
        assert [a for (a,) in actions] == ["drafted", "approved", "published"]
        fixtures = store.query(f"SELECT approver_id FROM {CONFORMANCE_FIXTURES.qualified}").rows
        assert fixtures == [("brian",)]
        kinds = store.query(f"SELECT kind FROM {CHANGE_EVENTS.qualified} FINAL").rows
        assert kinds == [("fixture",)]
