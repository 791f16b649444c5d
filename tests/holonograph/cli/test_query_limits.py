"""`holonograph query` against a live `serve` (both real processes) and offline: a
runaway read stops at its limit, exit 1, the limit named, no traceback, and `serve`
carries on; Ctrl-C on `query` (exit 130) leaves no query running in `serve`'s
`system.processes` (before: it ran on for minutes)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from tests.holonograph.cli.test_serve import ROOT, ServeProcess, holonograph
from tests.ingest.helpers import grpc_export
from tests.ingest.service.test_read_isolation import slow_read
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

RUNAWAY = "SELECT count() FROM numbers(1000000000000)"


def running(data_dir: Path, probe: str) -> int:
    """Statements with `probe` in serve's process list, read through serve itself (the
    probe in two literals: this statement does not count itself)."""
    head, tail = probe[:4], probe[4:]
    done = holonograph(
        "query", "--data-dir", str(data_dir), "--json",
        "SELECT count() AS n FROM system.processes"
        f" WHERE position(query, concat('{head}', '{tail}')) > 0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)[0]["n"])


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[Path, ServeProcess]]:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir, "--read-max-execution-time", "60")
    try:
        yield data_dir, server
    finally:
        code, stderr = server.stop()
        assert code == 0, stderr
        assert "Traceback" not in stderr


def test_a_runaway_query_through_serve_exits_1_naming_its_limit(
    serving: tuple[Path, ServeProcess],
) -> None:
    data_dir, server = serving
    rows = holonograph("query", "--data-dir", str(data_dir), RUNAWAY)
    timed = holonograph(
        "query", "--data-dir", str(data_dir), "--max-execution-time", "1", slow_read("timed")
    )
    for done, limit in ((rows, "max_rows_to_read"), (timed, "max_execution_time")):
        assert done.returncode == 1, done.stderr
        assert f"error: stopped by the read limit {limit}:" in done.stderr
        flag = "--" + limit.replace("_", "-")
        assert f"hint: narrow the query, or raise the limit with `holonograph query {flag}`" in (
            done.stderr
        )
        assert "Traceback" not in done.stderr
    # serve carries on: it answers queries and takes data.
    assert holonograph("query", "--data-dir", str(data_dir), "SELECT 1").returncode == 0
    payload = export_request(record_spans([Evaluation("after", 0)])).SerializeToString()
    assert grpc_export(server.grpc_endpoint, payload).code is grpc.StatusCode.OK


def test_a_runaway_query_offline_exits_1_naming_its_limit(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert holonograph("query", "--data-dir", str(data_dir), "--write", "SELECT 1").returncode == 0
    done = holonograph("query", "--data-dir", str(data_dir), "--json", RUNAWAY)
    assert done.returncode == 1, done.stderr
    assert "error: stopped by the read limit max_rows_to_read:" in done.stderr
    assert done.stdout == ""
    # The query's own flags may raise a limit where no other process holds the store.
    lifted = holonograph(
        "query", "--data-dir", str(data_dir), "--max-rows-to-read", "0", "--json",
        "SELECT count() AS n FROM numbers(20000000000)",
        "--max-execution-time", "0.5",
    )  # fmt: skip
    assert lifted.returncode == 1
    assert "read limit max_execution_time" in lifted.stderr, lifted.stderr  # not rows


def test_limits_are_for_read_only_queries() -> None:
    done = holonograph("query", "--write", "--max-result-rows", "5", "SELECT 1")
    assert done.returncode == 2
    assert "read limits apply to read-only queries" in done.stderr


def test_ctrl_c_on_query_stops_its_query_inside_serve(
    serving: tuple[Path, ServeProcess],
) -> None:
    data_dir, _ = serving
    probe = f"ctrlc-{secrets.token_hex(6)}"
    client = subprocess.Popen(
        [sys.executable, "-m", "holonograph", "query", "--data-dir", str(data_dir),
         slow_read(probe)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ},
    )  # fmt: skip
    try:
        wait_until(lambda: running(data_dir, probe) == 1, 60, "the query running in serve")
        client.send_signal(signal.SIGINT)
        _, stderr = client.communicate(timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 130, stderr
    assert "error: interrupted" in stderr
    started = time.monotonic()
    wait_until(lambda: running(data_dir, probe) == 0, 30, "the query to stop in serve")
    assert time.monotonic() - started < 30  # well before its 60 s limit
