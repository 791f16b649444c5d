"""`holonograph compare` over a chDB store seeded with multiplex traffic: the JSON is
the report, the text names the verdict, and the exit code gates a vendor switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit import multiplex
from testkit.multiplex import BETTER, GAPPY, PRIMARY, MultiplexSpec

pytestmark = pytest.mark.clickhouse

WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]


def seeded(tmp_path: Path, spec: MultiplexSpec) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, spec, 7)
    finally:
        store.close()
    return path


def run(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["compare", "--surface", "classify-intent", *WINDOW, "--data-dir", str(data_dir), *args],
    )


def test_a_significant_difference_exits_1_and_json_is_the_report(tmp_path: Path) -> None:
    data_dir = seeded(tmp_path, MultiplexSpec())
    result = run(data_dir, "--json", "--dimension", "correctness")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["usualPrimary"] == PRIMARY
    pair = next(p for p in report["paired"] if (p["primary"], p["observer"]) == (PRIMARY, BETTER))
    assert pair["test"] == "mcnemar-exact" and pair["significant"] is True
    assert pair["improved"] > pair["regressed"]
    assert {d["dimensionId"] for g in report["groups"] for d in g["dimensions"]} == {"correctness"}
    text = run(data_dir, "--dimension", "correctness")
    assert text.exit_code == 1
    assert "significant difference(s) at alpha 0.05" in text.stdout
    assert "openai/gpt-5" in text.stdout and "traceback" not in text.output.lower()


def test_no_significant_difference_exits_0(tmp_path: Path) -> None:
    data_dir = seeded(tmp_path, MultiplexSpec(with_better=False, fallbacks=0))
    result = run(data_dir, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {p["observer"] for p in report["paired"]} == {GAPPY}
    assert all(p["pValue"] >= 0.05 for p in report["paired"])


def test_bad_grouping_and_window_are_usage_errors(tmp_path: Path) -> None:
    data_dir = seeded(tmp_path, MultiplexSpec(calls=5, fallbacks=0))
    assert run(data_dir, "--by", "vendor").exit_code == 2
    reversed_window = CliRunner().invoke(
        cli,
        ["compare", "--surface", "s", "--since", "2026-06-02T00:00:00Z",
         "--until", "2026-06-01T00:00:00Z", "--data-dir", str(data_dir)],
    )  # fmt: skip
    assert reversed_window.exit_code == 2
    assert "--until must be after --since" in reversed_window.output


def test_one_tenant_is_compared_and_several_need_tenant(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=40, fallbacks=0), 7)
        multiplex.seed(store, MultiplexSpec(calls=10, fallbacks=0, tenant_id="acme"), 8)
    finally:
        store.close()
    ambiguous = run(path, "--json")
    assert ambiguous.exit_code == 2 and "acme" in ambiguous.output
    acme = run(path, "--json", "--tenant", "acme")
    assert acme.exit_code in (0, 1), acme.output
    report = json.loads(acme.stdout)
    assert report["tenantId"] == "acme" and report["multiplexCalls"] == 10
    assert {g["group"]: g["events"] for g in report["groups"]}[PRIMARY] == 10
