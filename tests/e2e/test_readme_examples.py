"""The README's first hour, from the repository alone: every block marked
`<!-- example: live -->` is taken from README.md as written and run, in order, with
bash against a live `serve` (only the port is changed); then the Python example's
spans are checked in the store."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.holonograph.cli.test_serve import ServeProcess

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- example: live -->"


def live_blocks() -> list[str]:
    """The sh code block after each marker, verbatim."""
    blocks = []
    for part in (ROOT / "README.md").read_text().split(MARKER)[1:]:
        match = re.match(r"\s*```sh\n(.*?)\n```", part, re.DOTALL)
        assert match, f"a {MARKER} marker not followed by an sh block"
        blocks.append(match[1])
    return blocks


def run_block(block: str, http_port: int, data_dir: Path) -> subprocess.CompletedProcess[str]:
    script = block.replace("127.0.0.1:4318", f"127.0.0.1:{http_port}")
    env = {
        **os.environ,
        # `holonograph`, `python` and `pip` are this environment's, as after the quick start
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOLONOGRAPH_DATA_DIR": str(data_dir),  # serve's and the commands' default store
        "PIP_NO_INDEX": "1",  # the packages are test dependencies: pip must find them here
    }
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _http_port(server: ServeProcess) -> int:
    line = next(line for line in server.lines if line.startswith("OTLP/HTTP"))
    match = re.search(r":(\d+)/v1/traces", line)
    assert match, server.lines
    return int(match[1])


def _query(data_dir: Path, sql: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "holonograph", "query", "--data-dir", str(data_dir), "--json", sql],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def test_readme_examples_run_against_a_live_server(tmp_path: Path) -> None:
    python_example, curl, quarantine, contracts, *more = live_blocks()
    changes = next(b for b in more if "holonograph change record" in b)
    assert "curl -sS --fail-with-body" in curl and "@examples/" in curl
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        port = _http_port(server)
        sent = run_block(python_example, port, data_dir)
        assert sent.returncode == 0, sent.stderr
        match = re.search(
            r"sent 6 evaluation\(s\) and 2 sentinel\(s\) on (stream_\w+)", sent.stdout
        )
        assert match, sent.stdout
        assert "1 stream(s) (1 closed-complete): expected 8, delivered 8, missing 0" in sent.stdout
        stream = match[1]
        events = _query(
            data_dir,
            "SELECT count() AS n, uniqExact(light_source_id) AS sources"
            f" FROM holonograph.evaluation_events FINAL WHERE emission_stream = '{stream}'",
        )
        assert events == [{"n": 6, "sources": 1}]
        dimensions = _query(
            data_dir,
            "SELECT dimension_id AS d, count() AS n, countIf(score IS NOT NULL) AS scored"
            " FROM holonograph.evaluation_dimensions FINAL GROUP BY d ORDER BY d",
        )
        assert dimensions == [
            {"d": "correctness", "n": 6, "scored": 6},  # the contract declares it a score
            {"d": "tone", "n": 6, "scored": 6},
        ]
        sentinels = _query(
            data_dir,
            "SELECT emission_seq AS seq, final, completeness_offered AS offered"
            f" FROM holonograph.emission_records WHERE emission_stream = '{stream}'"
            " AND kind = 'sentinel' ORDER BY seq",
        )
        assert sentinels == [
            {"seq": 4, "final": False, "offered": 4},
            {"seq": 7, "final": True, "offered": 2},
        ]

        posted = run_block(curl, port, data_dir)
        assert posted.returncode == 0, posted.stderr
        assert "evt_01J9Z8Q2M4T7" in posted.stdout and "classify-intent" in posted.stdout

        listed = run_block(quarantine, port, data_dir)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.strip() == "no rejected spans in the selection"

        registered = run_block(contracts, port, data_dir)
        assert registered.returncode == 0, registered.stderr
        assert "agent billing-triage: version cv_" in registered.stdout
        assert "(registered)" in registered.stdout and '"versionId": "cv_' in registered.stdout

        # With the README's contract in force, its sender and its curl payload still
        # ingest cleanly: nothing is quarantined, every event records the contract. (A
        # receiver started now enforces it from its first request: no refresh to await.)
        code, stderr = server.stop()
        assert code == 0, stderr
        server = ServeProcess(data_dir)
        port = _http_port(server)
        sender = "\n".join(
            line for line in python_example.splitlines() if line.startswith("python ")
        )  # completeness would now also judge the curl example's stream, left open
        again = run_block(sender, port, data_dir)
        assert again.returncode == 0, again.stderr
        assert "sent 6 evaluation(s) and 2 sentinel(s)" in again.stdout
        reposted = run_block(curl, port, data_dir)
        assert reposted.returncode == 0, reposted.stderr
        assert '"rejectedSpans"' not in reposted.stdout, reposted.stdout
        assert run_block(quarantine, port, data_dir).stdout.strip() == (
            "no rejected spans in the selection"
        )
        checked = _query(
            data_dir,
            "SELECT count() AS n, countIf(contract_version_id != '') AS checked"
            " FROM holonograph.evaluation_events FINAL WHERE ingested_at > ("
            "SELECT min(registered_at) FROM holonograph.contracts)",
        )
        assert checked[0]["n"] >= 6 and checked[0]["checked"] == checked[0]["n"], checked

        recorded = run_block(changes, port, data_dir)
        assert recorded.returncode == 0, recorded.stderr
        assert "deploy deploy-1.4.2 of surface classify-intent: recorded" in recorded.stdout
        listing = recorded.stdout.split("\nat ", 1)[1]
        for kind in ("contract", "deploy", "availability"):  # the mark: its vendor served it
            assert f"  {kind} " in listing, recorded.stdout
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr


def test_the_sender_exits_non_zero_when_nothing_listens(tmp_path: Path) -> None:
    """Never "sent" for spans that did not arrive: no collector on the port is exit 1."""
    with socket.socket() as probe:  # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "examples/otel_python.py", "--endpoint", f"http://127.0.0.1:{port}"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "sent" not in done.stdout
    assert "span(s) could not be exported to" in done.stderr


def test_the_sender_exits_non_zero_when_the_collector_rejects(tmp_path: Path) -> None:
    """An OTLP partial success is not a success for the spans it rejected."""
    data_dir = tmp_path / "data"
    contract = json.loads((ROOT / "docs/examples/contracts/billing-triage.json").read_text())
    (surface,) = contract["surfaces"]
    surface["dimensions"] = [{"id": "correctness", "type": "boolean"}]  # the sender scores it
    path = tmp_path / "strict.json"
    path.write_text(json.dumps(contract))
    registered = subprocess.run(
        [sys.executable, "-m", "holonograph", "contract", "register", str(path),
         "--data-dir", str(data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    server = ServeProcess(data_dir)
    try:
        done = subprocess.run(
            [sys.executable, "examples/otel_python.py", "--endpoint",
             f"http://127.0.0.1:{_http_port(server)}"],
            cwd=ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 1, done.stdout
    assert "error: the collector rejected 6 of 8 span(s): " in done.stderr
    assert "declared type boolean" in done.stderr and "sent" not in done.stdout


def test_curl_shows_the_receivers_reason_when_a_request_is_refused(tmp_path: Path) -> None:
    """The point of --fail-with-body: a refused request fails the command and says why."""
    _, curl, *_ = live_blocks()
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        broken = curl.replace("@examples/evaluation-and-sentinel.otlp.json", "'{not json'")
        done = run_block(broken, _http_port(server), data_dir)
    finally:
        server.stop()
    assert done.returncode == 22  # curl's "HTTP error", and bash -e stopped there
    assert "returned error: 400" in done.stderr
    assert json.loads(done.stdout)["message"].startswith("body is not valid JSON")
