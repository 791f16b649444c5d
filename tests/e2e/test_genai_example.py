"""The README's GenAI example, from the repository alone: the block marked
`<!-- example: genai -->` runs as written (only the port changed) against a live
`holonograph serve`: `examples/otel_genai.py` registers its contract and sends GenAI
evaluation results with the official OpenTelemetry SDK, as span events and as log
records; then every result is a row, and completeness says what it cannot know."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_readme_examples import ROOT, _http_port, _query, run_block
from tests.holonograph.cli.test_serve import ServeProcess

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

MARKER = "<!-- example: genai -->"


def genai_block() -> str:
    (part,) = (ROOT / "README.md").read_text().split(MARKER)[1:]
    match = re.match(r"\s*```sh\n(.*?)\n```", part, re.DOTALL)
    assert match, f"{MARKER} is not followed by an sh block"
    return match[1]


def test_the_genai_example_runs_against_serve(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        done = run_block(genai_block(), _http_port(server), data_dir)
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert re.search(r"registered genai-contract\.json: version cv_\w+", out), out
        assert (
            "sent 6 GenAI operation(s): 9 evaluation result(s) as span events, 9 as log records"
            " (15 spans and log records delivered, 0 failed)" in out
        ), out
        assert "answer-billing-question  unknown: no emission ordinals  6" in out, out
        events = _query(
            data_dir,
            "SELECT count() AS n, countIf(emission_stream = '') AS without_ordinals,"
            " groupUniqArray(light_source_id) AS served, groupUniqArray(run_mode) AS modes"
            " FROM holonograph.evaluation_events FINAL",
        )
        assert len(events) == 1 and events[0]["n"] == 6 and events[0]["without_ordinals"] == 6
        # calls with span events know the served model; those with log records cannot
        assert sorted(events[0]["served"]) == ["", "openai/gpt-5-2025-08-07"]  # type: ignore[arg-type]
        assert events[0]["modes"] == ["production"]
        dimensions = _query(
            data_dir,
            "SELECT dimension_id AS d, count() AS n, countIf(passed IS NOT NULL) AS graded,"
            " countIf(score IS NOT NULL) AS scored FROM holonograph.evaluation_dimensions FINAL"
            " GROUP BY d ORDER BY d",
        )
        assert dimensions == [
            {"d": "correctness", "n": 6, "graded": 6, "scored": 0},
            {"d": "hallucination", "n": 6, "graded": 6, "scored": 0},
            {"d": "relevance", "n": 6, "graded": 0, "scored": 6},
        ]
        rejected = _query(data_dir, "SELECT count() AS n FROM holonograph.quarantine FINAL")
        assert rejected == [{"n": 0}]
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr


@pytest.mark.parametrize("extra", [[], ["--no-contract"]], ids=["contract", "no-contract"])
def test_the_genai_sender_exits_non_zero_when_nothing_listens(extra: list[str]) -> None:
    """Never "sent" for what did not arrive, and no traceback: exit 1 with the reason."""
    with socket.socket() as probe:  # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "examples/otel_genai.py", "--endpoint", f"http://127.0.0.1:{port}",
         "--calls", "2", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "sent" not in done.stdout and "Traceback" not in done.stderr
    if extra:
        assert "span(s) and log record(s) could not be exported to" in done.stderr
    else:
        assert "error: could not register genai-contract.json at" in done.stderr
