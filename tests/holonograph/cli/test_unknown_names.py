"""Never a silent zero: every analysis asked about a surface, dimension, agent or stream
the tenant never had events for exits 2 naming the closest known names and stores
nothing; a known surface with no events in the window is an ordinary empty answer that
says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import ANALYSIS_EVENTS, DRIFT_CHANGE_POINTS, VARIANCE_READINGS
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

pytestmark = pytest.mark.clickhouse

WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]
EMPTY_WINDOW = ["--since", "2025-01-01T00:00:00Z", "--until", "2025-01-02T00:00:00Z"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("unknown-names") / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=60, fallbacks=0), 7)
        multiplex.seed(store, MultiplexSpec(surface_id="answer-question", calls=10), 8)
    finally:
        store.close()
    yield path


def run(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)])


def stored(data_dir: Path) -> list[int]:
    """Rows of the tables an analysis writes its runs to."""
    counts = []
    for table in (DRIFT_CHANGE_POINTS, VARIANCE_READINGS, ANALYSIS_EVENTS):
        done = run(data_dir, "query", f"SELECT count() AS n FROM {table.qualified}", "--json")
        assert done.exit_code == 0, done.output
        counts.append(json.loads(done.stdout)[0]["n"])
    return counts


MISSPELT_SURFACE = "classify-intnet"
KNOWN_SURFACES = "known: classify-intent, answer-question"


@pytest.mark.parametrize(
    "command",
    [
        ["drift", "--surface", MISSPELT_SURFACE, *WINDOW],
        ["compare", "--surface", MISSPELT_SURFACE, *WINDOW],
        [
            "variance",
            "decompose",
            "--surface",
            MISSPELT_SURFACE,
            "--dimension",
            "correctness",
            *WINDOW,
        ],
        ["completeness", "--surface", MISSPELT_SURFACE],
        ["topology", "bootstrap", "--surface", MISSPELT_SURFACE, *WINDOW],
        ["lessons", "cluster", "--surface", MISSPELT_SURFACE, *WINDOW, "--record"],
        ["lessons", "overrides", "--surface", MISSPELT_SURFACE, *WINDOW],
    ],
    ids=["drift", "compare", "variance", "completeness", "bootstrap", "cluster", "overrides"],
)
def test_a_misspelt_surface_exits_2_with_the_closest_first_and_stores_nothing(
    data_dir: Path, command: list[str]
) -> None:
    before = stored(data_dir)
    for as_json in ([], ["--json"]):
        result = run(data_dir, *command, *as_json)
        assert result.exit_code == 2, result.output
        assert f"unknown surface '{MISSPELT_SURFACE}'; {KNOWN_SURFACES}" in result.stderr
        assert "did you mean 'classify-intent'?" in result.stderr
        assert result.stdout == "" and "Traceback" not in result.output
    assert stored(data_dir) == before


@pytest.mark.parametrize(
    "command",
    [
        ["drift", "--surface", "classify-intent", "--dimension", "corectness", *WINDOW],
        ["compare", "--surface", "classify-intent", "--dimension", "corectness", *WINDOW],
        [
            "variance",
            "decompose",
            "--surface",
            "classify-intent",
            "--dimension",
            "corectness",
            *WINDOW,
        ],
    ],
    ids=["drift", "compare", "variance"],
)
def test_a_misspelt_dimension_names_the_surfaces_dimensions(
    data_dir: Path, command: list[str]
) -> None:
    before = stored(data_dir)
    result = run(data_dir, *command)
    assert result.exit_code == 2, result.output
    assert (
        "unknown dimension 'corectness' on surface 'classify-intent';"
        " known: correctness, helpfulness"
    ) in result.stderr
    assert stored(data_dir) == before


def test_completeness_refuses_an_unknown_stream(data_dir: Path) -> None:
    result = run(data_dir, "completeness", "--stream", "classify-intent/openai/gtp-5")
    assert result.exit_code == 2, result.output
    assert "unknown stream 'classify-intent/openai/gtp-5'; known: classify-intent/openai/gpt-5"
    assert result.stderr.index("classify-intent/openai/gpt-5") < result.stderr.index(
        "classify-intent/google/gemini-2-pro"
    )


def test_topology_bootstrap_refuses_an_unknown_agent(data_dir: Path) -> None:
    result = run(data_dir, "topology", "bootstrap", "--surface", "classify-intent",
                 "--agent", "billing-triag", *WINDOW)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "unknown agent 'billing-triag'; known: billing-triage" in result.stderr


def test_the_report_refuses_an_unknown_surface_and_writes_no_page(
    data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    result = run(data_dir, "report", "--surface", MISSPELT_SURFACE, *WINDOW, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert f"unknown surface '{MISSPELT_SURFACE}'; {KNOWN_SURFACES}" in result.stderr
    assert not out.exists()


def test_a_known_surface_with_no_events_in_the_window_is_an_empty_answer(
    data_dir: Path,
) -> None:
    drift = run(data_dir, "drift", "--surface", "classify-intent", *EMPTY_WINDOW, "--no-save")
    assert drift.exit_code == 0, drift.output
    assert "surface classify-intent: no events in [2025-01-01T00:00:00Z, 2025-01-02T00:00:00Z)" in (
        drift.stdout
    )
    as_json = run(data_dir, "drift", "--surface", "classify-intent", *EMPTY_WINDOW, "--no-save",
                  "--json")  # fmt: skip
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["eventCount"] == 0
    completeness = run(data_dir, "completeness", "--surface", "answer-question", "--json")
    assert completeness.exit_code in (0, 1), completeness.output
    assert json.loads(completeness.stdout)["totals"]["streams"] >= 1
