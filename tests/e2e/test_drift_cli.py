"""`holonograph drift` from the command line over a store holding scenario traffic."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from schemas.migrations import apply_migrations
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

pytestmark = [pytest.mark.clickhouse]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ingest.store.clickhouse import open_store

    path = tmp_path_factory.mktemp("drift-cli")
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        spec = SurfaceSpec(
            "classify-intent",
            buckets=168,
            events=(100, 250),
            tau=0.01,
            changes=(Change(80, -0.1, ("light source",)),),
        )
        write_cells(store, generate(spec, seed=1), ingested_at=dt.datetime(2026, 7, 1))
    finally:
        store.close()
    return path


ARGS = ["--surface", "classify-intent", "--since", "2026-06-01T00:00:00Z",
        "--until", "2026-06-08T00:00:00Z"]  # fmt: skip


def test_drift_json_labels_the_vendor_change_and_saves_the_run(
    store_dir: Path, tmp_path: Path
) -> None:
    plot = tmp_path / "drift.png"
    result = CliRunner().invoke(
        cli, ["drift", *ARGS, "--store", f"chdb://{store_dir}", "--json", "--plot", str(plot)]
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["surfaceId"] == "classify-intent" and report["eventCount"] > 20000
    (point,) = report["changePoints"]
    assert point["source"] == "light source" and point["confident"] is True
    assert point["timestamp"].endswith("Z") and set(point["window"]) == {"from", "to"}
    assert point["window"]["from"] <= "2026-06-04T08:00:00Z" < point["window"]["to"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    saved = CliRunner().invoke(
        cli,
        ["query", "SELECT source, run_id FROM holonograph.drift_change_points",
         "--store", f"chdb://{store_dir}", "--json"],
    )  # fmt: skip
    assert saved.exit_code == 0, saved.output
    assert json.loads(saved.stdout) == [{"source": "light source", "run_id": report["runId"]}]


def test_drift_text_output_and_usage_errors(store_dir: Path) -> None:
    result = CliRunner().invoke(
        cli, ["drift", *ARGS, "--store", f"chdb://{store_dir}", "--no-save"]
    )
    assert result.exit_code == 1, result.output
    assert "light source" in result.output and "1 change point(s)" in result.output
    bad = CliRunner().invoke(
        cli,
        ["drift", "--surface", "x", "--since", "2026-06-02T00:00:00Z",
         "--until", "2026-06-01T00:00:00Z", "--store", f"chdb://{store_dir}"],
    )  # fmt: skip
    assert bad.exit_code == 2
    naive = CliRunner().invoke(
        cli, ["drift", "--surface", "x", "--since", "2026-06-01T00:00:00", "--until", "2026-06-02"]
    )
    assert naive.exit_code == 2


def test_drift_exits_0_when_only_noise_moved(store_dir: Path) -> None:
    """A shift below the practical threshold is labelled noise: no finding."""
    result = CliRunner().invoke(
        cli,
        ["drift", *ARGS, "--store", f"chdb://{store_dir}", "--no-save", "--json",
         "--delta-threshold", "0.5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["changePoints"]
    assert points and {p["source"] for p in points} == {"noise"}


def test_drift_says_a_day_series_of_four_days_is_too_short(store_dir: Path) -> None:
    store = ["--store", f"chdb://{store_dir}", "--no-save"]
    window = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-05T00:00:00Z"]
    text = CliRunner().invoke(
        cli, ["drift", "--surface", "classify-intent", *window, "--bucket", "day", *store]
    )
    assert text.exit_code == 0, text.output
    first = text.stdout.splitlines()[0]
    assert "series too short to test for change points" in first
    assert "0 change point(s)" not in text.stdout
    assert (
        "correctness: too short to test for change points (4 day bucket(s) with outcomes,"
        " 6 needed): widen --since/--until or use --bucket hour" in text.stdout
    )
    as_json = CliRunner().invoke(
        cli,
        ["drift", "--surface", "classify-intent", *window, "--bucket", "day", *store, "--json"],
    )
    report = json.loads(as_json.stdout)
    assert [(d["dimensionId"], d["tested"]) for d in report["dimensions"]] == [
        ("correctness", False)
    ]
    assert any("too short to test" in note for note in report["notes"])


def test_variance_decompose_evaluate_lifecycle(store_dir: Path) -> None:
    store = ["--store", f"chdb://{store_dir}", "--json"]
    decomposed = CliRunner().invoke(
        cli,
        ["variance", "decompose", "--surface", "classify-intent", "--dimension", "correctness",
         "--since", "2026-06-01T00:00:00Z", "--until", "2026-06-04T00:00:00Z", *store],
    )  # fmt: skip
    assert decomposed.exit_code == 0, decomposed.output
    reading = json.loads(decomposed.stdout)
    assert reading["eventId"].startswith("evt_") and reading["buckets"] == 72
    assert reading["cleanedVarianceCi"]["ciLow"] <= reading["cleanedVariance"]
    target = reading["eventId"]
    evaluated = CliRunner().invoke(
        cli, ["variance", "evaluate", "--target-event-id", target, *store]
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["verdict"] == "viable"
    locked = CliRunner().invoke(
        cli,
        ["variance", "lifecycle", "--target-event-id", target, "--status", "pin",
         "--approver-id", "brian", "--pinned-label", "baseline", *store],
    )  # fmt: skip
    assert locked.exit_code == 0, locked.output
    assert json.loads(locked.stdout)["targetEventId"] == target
    refused = CliRunner().invoke(
        cli,
        ["variance", "lifecycle", "--target-event-id", target, "--status", "supersede",
         "--approver-id", "brian", *store],
    )  # fmt: skip
    assert refused.exit_code == 2 and "supersededBy" in refused.output


@pytest.mark.e2e
def test_scenario_through_the_receiver_gets_the_right_labels(receiver: Any) -> None:
    from testkit.scenarios import events_from_cells
    from tests.otel_emit import Dim, Evaluation, export_grpc, record_spans

    specs = [
        SurfaceSpec("classify-intent", buckets=72, events=(40, 60),
                    changes=(Change(36, -0.2, ("lens",)),)),
        SurfaceSpec("billing-triage", buckets=72, events=(40, 60), alias="acme/other",
                    changes=(Change(30, -0.2, ("lens", "light source")),)),
    ]  # fmt: skip
    events = events_from_cells([c for s in specs for c in generate(s, seed=3)])
    items = [
        Evaluation(
            stream=e.stream,
            seq=e.seq,
            surface=str(e.attributes["holonograph.surface.id"]),
            event_id=e.event_id,
            dims=[Dim("correctness", passed=e.passed)],
            extra=e.attributes,
            end_ns=int(e.timestamp.replace(tzinfo=dt.UTC).timestamp() * 1e9),
        )
        for e in events
    ]
    spans = record_spans(items)
    for start in range(0, len(spans), 1000):
        assert export_grpc(receiver.grpc_endpoint, spans[start : start + 1000]).name == "SUCCESS"
    stored = receiver.store.query(
        "SELECT count() FROM holonograph.evaluation_dimensions FINAL"
    ).scalar()
    assert stored == len(events)

    args = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-04T00:00:00Z",
            "--store", receiver.store.url, "--json"]  # fmt: skip
    lens = CliRunner().invoke(cli, ["drift", "--surface", "classify-intent", *args])
    assert lens.exit_code == 1, lens.output
    (point,) = json.loads(lens.stdout)["changePoints"]
    assert (point["source"], point["confident"]) == ("lens", True)
    assert point["timestamp"] == "2026-06-02T12:00:00Z"

    both = CliRunner().invoke(cli, ["drift", "--surface", "billing-triage", *args])
    assert both.exit_code == 1, both.output
    report = json.loads(both.stdout)
    (point,) = report["changePoints"]
    assert point["confident"] is False
    assert [b["reason"] for b in report["bracketedWindows"]] == ["confounded"]


def test_variance_evaluate_exits_1_unless_viable(store_dir: Path) -> None:
    store = ["--store", f"chdb://{store_dir}", "--json"]
    decomposed = CliRunner().invoke(
        cli,
        ["variance", "decompose", "--surface", "classify-intent", "--dimension", "correctness",
         "--since", "2026-06-01T00:00:00Z", "--until", "2026-06-01T03:00:00Z", *store],
    )  # fmt: skip
    assert decomposed.exit_code == 0, decomposed.output
    target = json.loads(decomposed.stdout)["eventId"]
    evaluated = CliRunner().invoke(
        cli, ["variance", "evaluate", "--target-event-id", target, *store]
    )
    assert evaluated.exit_code == 1, evaluated.output
    assert json.loads(evaluated.stdout)["verdict"] == "insufficient-data"
    text = CliRunner().invoke(
        cli, ["variance", "evaluate", "--target-event-id", target, *store[:2]]
    )
    assert text.exit_code == 1
    assert text.stdout.startswith(f"verdict: insufficient-data  (target {target})")
