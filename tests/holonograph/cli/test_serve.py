"""`holonograph serve` and `holonograph query` as real processes: startup lines,
graceful SIGTERM, data surviving a restart, replays counting once, the admin
endpoint while serve holds the store, and config errors before any socket opens."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

ROOT = Path(__file__).resolve().parents[3]


def holonograph(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "holonograph", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


class ServeProcess:
    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "holonograph", "serve", "--data-dir", str(data_dir),
             "--grpc-port", "0", "--http-port", "0", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.lines = [self.process.stdout.readline() for _ in range(4)]
        grpc_line = next(line for line in self.lines if line.startswith("OTLP/gRPC"))
        match = re.search(r":(\d+)$", grpc_line.strip())
        assert match, self.lines
        self.grpc_endpoint = f"127.0.0.1:{match[1]}"

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=60)
        return self.process.returncode, stderr


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def _query_json(data_dir: Path, sql: str) -> list[dict[str, object]]:
    done = holonograph("query", "--data-dir", str(data_dir), "--json", sql)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def test_serve_restart_replay_and_query_through_admin(data_dir: Path) -> None:
    payload = export_request(
        record_spans([Evaluation("strm", 0), Evaluation("strm", 1), Sentinel("strm", 2)])
    ).SerializeToString()
    first = ServeProcess(data_dir)
    assert first.lines[0].startswith("OTLP/gRPC  listening on 127.0.0.1:")
    assert first.lines[1].startswith("OTLP/HTTP  listening on http://127.0.0.1:")
    assert first.lines[3].strip() == f"store      chdb://{data_dir.resolve()} (embedded chDB)"
    assert grpc_export(first.grpc_endpoint, payload).code is grpc.StatusCode.OK
    # The store is held by serve: query goes through its admin endpoint.
    assert (data_dir / ".holonograph-admin.json").exists()
    rows = _query_json(data_dir, "SELECT count() AS n FROM holonograph.evaluation_events FINAL")
    assert rows == [{"n": 2}]
    refused = holonograph("query", "--data-dir", str(data_dir), "DROP TABLE holonograph.quarantine")
    assert refused.returncode == 1
    assert "refused on a read-only connection" in refused.stderr
    code, stderr = first.stop()
    assert code == 0, stderr
    assert "stopped" in stderr
    assert not (data_dir / ".holonograph-admin.json").exists()

    # No process holds the directory now: query opens it directly.
    assert _query_json(data_dir, "SELECT count() AS n FROM holonograph.evaluation_events") == [
        {"n": 2}
    ]

    second = ServeProcess(data_dir)
    assert grpc_export(second.grpc_endpoint, payload).code is grpc.StatusCode.OK  # a replay
    events = _query_json(data_dir, "SELECT count() AS n FROM holonograph.evaluation_events FINAL")
    assert events == [{"n": 2}]
    records = _query_json(
        data_dir,
        "SELECT emission_seq AS seq, received_count AS n FROM holonograph.emission_records"
        " ORDER BY seq",
    )
    assert records == [{"seq": 0, "n": 2}, {"seq": 1, "n": 2}, {"seq": 2, "n": 2}]
    code, _ = second.stop()
    assert code == 0


def test_query_prints_a_readable_table(data_dir: Path) -> None:
    server = ServeProcess(data_dir)
    try:
        done = holonograph("query", "--data-dir", str(data_dir), "SELECT 1 AS one, 'x' AS letter")
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["one  letter", "---  ------", "1    x", "(1 row)"]


def test_bad_configuration_exits_2_before_listening(tmp_path: Path) -> None:
    done = holonograph("serve", "--data-dir", str(tmp_path), "--retention", "soon")
    assert done.returncode == 2
    assert "retention 'soon'" in done.stderr
    done = holonograph("serve", "--store", "ftp://nowhere")
    assert done.returncode == 2
    assert "use chdb:///path or http(s)://host:8123" in done.stderr
    done = holonograph(
        "serve", "--data-dir", str(tmp_path), env={"HOLONOGRAPH_MAX_INFLIGHT_BYTES": "10"}
    )
    assert done.returncode == 2
    assert "max_inflight_bytes must be at least max_request_bytes" in done.stderr


def test_query_without_a_store_exits_3(tmp_path: Path) -> None:
    done = holonograph("query", "--data-dir", str(tmp_path / "absent"), "SELECT 1")
    assert done.returncode == 3
    assert "no store at" in done.stderr


def test_retention_sets_and_removes_ttl(data_dir: Path) -> None:
    ttl_sql = (
        "SELECT name, position(create_table_query, 'TTL') > 0 AS has_ttl FROM system.tables"
        " WHERE database = 'holonograph' AND name IN ('evaluation_events', 'quarantine')"
        " ORDER BY name"
    )
    server = ServeProcess(data_dir, "--retention", "30d")
    try:
        rows = _query_json(data_dir, ttl_sql)
        create = _query_json(
            data_dir,
            "SELECT create_table_query AS q FROM system.tables"
            " WHERE database = 'holonograph' AND name = 'evaluation_events'",
        )
    finally:
        assert server.stop()[0] == 0
    assert rows == [
        {"name": "evaluation_events", "has_ttl": True},
        {"name": "quarantine", "has_ttl": True},
    ]
    assert "TTL toDateTime(timestamp) + toIntervalDay(30)" in str(create[0]["q"])
    server = ServeProcess(data_dir)
    try:
        rows = _query_json(data_dir, ttl_sql)
    finally:
        server.stop()
    assert rows == [
        {"name": "evaluation_events", "has_ttl": False},
        {"name": "quarantine", "has_ttl": False},
    ]


def test_serve_json_announces_listeners_for_machines(data_dir: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "holonograph", "serve", "--data-dir", str(data_dir),
         "--grpc-port", "0", "--http-port", "0", "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    announced = json.loads(process.stdout.readline())
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 0
    assert set(announced) == {"grpc", "http", "admin", "store", "storeKind", "ui"}
    assert announced["ui"] == announced["http"].removesuffix("/v1/traces") + "/ui/"
    assert announced["store"] == f"chdb://{data_dir.resolve()}"
    assert announced["http"].endswith("/v1/traces")
