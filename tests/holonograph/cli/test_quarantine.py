"""`holonograph quarantine` per tenant: a shared store needs `--tenant`, and a tenant
sees only its own rejected spans."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations

pytestmark = pytest.mark.clickhouse

T0 = dt.datetime(2026, 7, 1, 9, 0)
COLUMNS = ["tenant_id", "quarantine_id", "received_at", "reason", "span_name", "trace_id",
           "span_id", "attributes", "resource_attributes", "span_proto", "source"]  # fmt: skip


def rejected(tenant: str, n: int, reason: str) -> list[object]:
    at = T0 + dt.timedelta(minutes=n)
    span = ["holonograph.evaluation", "ab" * 16, f"{n:016x}", "{}", "{}", "", "receiver"]
    return [tenant, f"q-{tenant}-{n}", at, reason, *span]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        store.insert(
            "holonograph.quarantine",
            [rejected("acme", 1, "holonograph.run_mode: missing"),
             rejected("acme", 2, "holonograph.run_mode: missing"),
             rejected("globex", 3, "holonograph.surface.id: missing")],
            COLUMNS,
        )  # fmt: skip
    finally:
        store.close()
    return path


def test_a_shared_store_needs_a_tenant_and_each_sees_its_own(data_dir: Path) -> None:
    unnamed = CliRunner().invoke(cli, ["quarantine", "--data-dir", str(data_dir)])
    assert unnamed.exit_code == 2
    assert "the store holds 2 tenants (acme, globex): name one with --tenant" in unnamed.stderr
    acme = CliRunner().invoke(
        cli, ["quarantine", "--data-dir", str(data_dir), "--tenant", "acme", "--json"]
    )
    assert acme.exit_code == 0, acme.output
    report = json.loads(acme.stdout)
    assert (report["tenantId"], report["total"]) == ("acme", 2)
    assert report["reasons"] == [
        {"reason": "holonograph.run_mode: missing", "spans": 2,
         "firstReceivedAt": "2026-07-01T09:01:00Z", "lastReceivedAt": "2026-07-01T09:02:00Z"}
    ]  # fmt: skip
    assert [s["spanId"] for s in report["spans"]] == [f"{2:016x}", f"{1:016x}"]  # newest first
    assert {s["tenantId"] for s in report["spans"]} == {"acme"}
    limited = CliRunner().invoke(
        cli, ["quarantine", "--data-dir", str(data_dir), "--tenant", "globex", "--limit", "0"]
    )
    assert limited.exit_code == 0
    assert limited.stdout.splitlines()[0] == "1 rejected span(s), 1 reason(s)"
    assert "newest" not in limited.stdout


LONG = (
    "holonograph.outcome.correctness: declared type score in contract billing-triage v3,"
    " the outcome has no score (send holonograph.outcome.correctness.score)"
)


def _quarantine(data_dir: Path, *args: str) -> dict[str, object]:
    done = CliRunner().invoke(
        cli, ["quarantine", "--data-dir", str(data_dir), "--tenant", "acme", *args]
    )
    assert done.exit_code == 0, done.output
    if "--json" in args:
        report: dict[str, object] = json.loads(done.stdout)
        return report
    return {"text": done.stdout}


def test_reasons_are_matched_exactly_or_by_prefix_and_shown_in_full(data_dir: Path) -> None:
    store = open_store(f"chdb://{data_dir}")
    try:
        store.insert("holonograph.quarantine", [rejected("acme", 4, LONG)], COLUMNS)
    finally:
        store.close()
    assert _quarantine(data_dir, "--reason", "run_mode", "--json")["total"] == 0  # no substring
    exact = _quarantine(data_dir, "--reason", "holonograph.run_mode: missing", "--json")
    assert exact["total"] == 2
    prefix = _quarantine(data_dir, "--reason-prefix", "holonograph.outcome.", "--json")
    assert prefix["total"] == 1 and prefix["reasonPrefix"] == "holonograph.outcome."
    assert _quarantine(data_dir, "--reason-prefix", "HOLONOGRAPH", "--json")["total"] == 0
    text = str(_quarantine(data_dir)["text"])
    assert len(LONG) > 100 and text.count(LONG) == 2  # the reasons table and the span list
    assert "…" not in text


def test_a_replayed_span_is_counted_as_replayed_and_no_longer_listed(data_dir: Path) -> None:
    store = open_store(f"chdb://{data_dir}")
    try:  # span 1's event was stored after all (what a successful replay leaves)
        store.insert(
            "holonograph.evaluation_events",
            [["acme", "evt-1", "classify-intent", "ab" * 16, f"{1:016x}", T0]],
            ["tenant_id", "event_id", "surface_id", "trace_id", "span_id", "timestamp"],
        )
    finally:
        store.close()
    report = _quarantine(data_dir, "--json")
    assert (report["total"], report["replayed"]) == (1, 1)
    assert [s["spanId"] for s in report["spans"]] == [f"{2:016x}"]  # type: ignore[attr-defined]
    assert "1 rejected span(s), 1 reason(s); 1 replayed since" in str(_quarantine(data_dir)["text"])


def test_a_rejection_without_span_ids_is_never_taken_for_replayed(data_dir: Path) -> None:
    """A log record outside any trace is quarantined with empty trace and span ids; an
    event stored without them (GenAI logs) is not its replay."""
    store = open_store(f"chdb://{data_dir}")
    try:
        bare = rejected("acme", 4, "gen_ai.evaluation.name: missing")
        bare[5:7] = ["", ""]
        store.insert("holonograph.quarantine", [bare], COLUMNS)
        store.insert(
            "holonograph.evaluation_events",
            [["acme", "evt-log", "classify-intent", "", "", T0]],
            ["tenant_id", "event_id", "surface_id", "trace_id", "span_id", "timestamp"],
        )
    finally:
        store.close()
    report = _quarantine(data_dir, "--json")
    assert (report["total"], report["replayed"]) == (3, 0)
