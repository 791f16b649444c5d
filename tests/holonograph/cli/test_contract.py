"""`holonograph contract register | show | history` against a real chDB store: register,
replace and read back, every version kept, invalid contracts refused with nothing
stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations

pytestmark = pytest.mark.clickhouse
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "contracts" / "billing-triage.json"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["contract", *args])


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def stored_versions(data_dir: Path) -> int:
    store = open_store(f"chdb://{data_dir}")
    try:
        apply_migrations(store)
        return int(store.query("SELECT count() FROM holonograph.contracts FINAL").scalar())
    finally:
        store.close()


def test_register_replace_and_read_back(tmp_path: Path) -> None:
    store = ["--data-dir", str(tmp_path / "store")]
    first = invoke("register", str(EXAMPLE), *store, "--json")
    assert first.exit_code == 0, first.output
    v1 = json.loads(first.output)
    assert v1["agentId"] == "billing-triage" and v1["created"] is True
    assert v1["versionId"].startswith("cv_") and v1["previousVersionId"] is None
    assert v1["registeredAt"].endswith("Z") and v1["removed"] == []
    surface = v1["surfaces"][0]
    assert surface["id"] == "classify-intent" and surface["dimensionCount"] == 2
    assert surface["cohortTags"] == ["customer-tier", "fix_tier"]
    assert [c["id"] for c in surface["substrateColumns"]] == [
        "prompt_hash", "tool_schema_version", "severity"
    ]  # fmt: skip
    assert surface["routings"][0]["lightSourceId"] == ["anthropic/claude-sonnet-5", "openai/gpt-5"]

    again = invoke("register", str(EXAMPLE), *store, "--json")
    assert json.loads(again.output)["versionId"] == v1["versionId"]
    assert json.loads(again.output)["created"] is False

    document = json.loads(EXAMPLE.read_text())
    document["surfaces"][0]["dimensions"][0] = {
        "id": "answer-correctness", "type": "score", "supersedes": "correctness"
    }  # fmt: skip
    document["surfaces"][0]["cohortTags"] = ["customer-tier"]
    replaced = invoke("register", write(tmp_path / "v2.json", document), *store, "--json")
    assert replaced.exit_code == 0, replaced.output
    v2 = json.loads(replaced.output)
    assert v2["previousVersionId"] == v1["versionId"] and v2["versionId"] != v1["versionId"]
    assert v2["removed"] == [
        {"altitude": "dimension", "surfaceId": "classify-intent", "id": "correctness",
         "supersededBy": {"altitude": "dimension", "id": "answer-correctness"}},
        {"altitude": "tag", "surfaceId": "classify-intent", "id": "fix_tier", "supersededBy": None},
    ]  # fmt: skip

    shown = invoke("show", "--agent", "billing-triage", *store, "--json")
    assert shown.exit_code == 0, shown.output
    active = json.loads(shown.output)
    assert active["versionId"] == v2["versionId"] and active["removed"] == v2["removed"]
    assert active["contract"]["surfaces"][0]["dimensions"][0]["id"] == "answer-correctness"
    old = invoke(
        "show", "--agent", "billing-triage", "--version", v1["versionId"], *store, "--json"
    )
    assert json.loads(old.output)["contract"] == json.loads(EXAMPLE.read_text())

    listed = invoke("history", "--agent", "billing-triage", *store, "--json")
    assert [v["versionId"] for v in json.loads(listed.output)] == [v2["versionId"], v1["versionId"]]
    text = invoke("history", "--agent", "billing-triage", *store)
    assert (
        "removed dimension correctness of surface classify-intent: superseded by dimension"
        in text.output
    )
    assert "removed tag fix_tier of surface classify-intent: retired" in text.output


def test_tenants_hold_their_own_contracts(tmp_path: Path) -> None:
    store = ["--data-dir", str(tmp_path / "store")]
    for tenant in ("acme", "globex"):
        assert invoke("register", str(EXAMPLE), "--tenant", tenant, *store).exit_code == 0
    ambiguous = invoke("show", "--agent", "billing-triage", *store)
    assert ambiguous.exit_code == 2 and "acme, globex" in ambiguous.output
    shown = invoke("show", "--agent", "billing-triage", "--tenant", "acme", *store, "--json")
    assert shown.exit_code == 0
    missing = invoke("show", "--agent", "nobody", *store)
    assert missing.exit_code == 1 and "has no contract of agent nobody" in missing.output


def test_invalid_contracts_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    document = json.loads(EXAMPLE.read_text())
    document["surfaces"][0]["dimensions"].append({"id": "correctness", "type": "percent", "x": 1})
    refused = invoke(
        "register", write(tmp_path / "bad.json", document), "--data-dir", str(data_dir)
    )
    assert refused.exit_code == 2
    assert "surfaces.0.dimensions.2.type: Input should be 'score' or 'boolean'" in refused.output
    assert "surfaces.0.dimensions.2.x: Extra inputs are not permitted" in refused.output
    assert "nothing was registered" in refused.output and "Traceback" not in refused.output
    (tmp_path / "x.json").write_text("{")
    not_json = invoke("register", str(tmp_path / "x.json"), "--data-dir", str(data_dir))
    assert not_json.exit_code == 2 and "not JSON" in not_json.output
    assert stored_versions(data_dir) == 0
