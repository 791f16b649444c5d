"""`serve --kafka`, `sink` and `query` as real processes: the wiring, the startup
lines, `query` through the sink's admin endpoint, `/metrics` on the metrics port,
graceful SIGTERM, and configuration errors before any socket opens."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest

from tests.e2e.kafka.conftest import Broker
from tests.e2e.kafka.helpers import wait_until
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]

ROOT = Path(__file__).resolve().parents[3]


def holonograph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "holonograph", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip


class Process:
    def __init__(self, args: list[str], lines: int, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "holonograph", *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        assert self.process.stdout is not None
        self.lines = [self.process.stdout.readline().strip() for _ in range(lines)]

    def port(self, prefix: str) -> int:
        line = next(line for line in self.lines if line.startswith(prefix))
        match = re.search(r":(\d+)(/\S*)?( \(.*\))?$", line)
        assert match, self.lines
        return int(match[1])

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=60)
        return self.process.returncode, stderr


def _kafka_flags(broker: Broker, names: dict[str, str]) -> list[str]:
    idempotence = "--kafka-idempotence" if broker.idempotence else "--no-kafka-idempotence"
    return [
        "--kafka", broker.bootstrap, idempotence,
        "--kafka-records-topic", names["kafka_records_topic"],
        "--kafka-dead-letter-topic", names["kafka_dead_letter_topic"],
        "--kafka-partitions", "2",
    ]  # fmt: skip


def _count(data_dir: Path, table: str = "emission_records", final: str = "") -> int:
    done = holonograph(
        "query", "--data-dir", str(data_dir), "--json",
        f"SELECT count() AS n FROM holonograph.{table} {final}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)[0]["n"])


def test_serve_kafka_and_sink_processes(
    broker: Broker, names: dict[str, str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "sink-data"
    kafka = _kafka_flags(broker, names)
    serve = Process(
        ["serve", *kafka, "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"], 5
    )
    sink = Process(
        ["sink", *kafka, "--data-dir", str(data_dir), "--group", names["sink_group"],
         "--batch-seconds", "0.05", "--metrics-port", "0"],
        5,
        env={"HOLONOGRAPH_STATUS_REFRESH_SECONDS": "0.2"},
    )  # fmt: skip
    try:
        assert any(line.startswith("kafka ") for line in serve.lines), serve.lines
        assert not any(line.startswith("store ") for line in serve.lines)
        endpoint = f"127.0.0.1:{serve.port('OTLP/gRPC')}"
        items = [Evaluation("cli", 0), Evaluation("cli", 1), Sentinel("cli", 2)]
        payload = export_request(record_spans(items)).SerializeToString()
        assert grpc_export(endpoint, payload).code is grpc.StatusCode.OK
        wait_until(lambda: _count(data_dir) == 3, timeout=60, what="query via the sink")
        # The sink owns the store here, so it runs the stream status refresh `serve` would.
        wait_until(
            lambda: _count(data_dir, "stream_status", "FINAL") == 1, what="stream status refreshed"
        )

        metrics_port = serve.port("metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
            text = reply.read().decode()
        assert re.search(r'holonograph_kafka_records_produced_total\{topic="[^"]+"\} 1\.0', text)
        sink_metrics = sink.port("metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{sink_metrics}/readyz") as reply:
            assert json.loads(reply.read()) == {"status": "ready"}
    finally:
        serve_code, serve_err = serve.stop()
        sink_code, sink_err = sink.stop()
    assert serve_code == 0, serve_err
    assert sink_code == 0, sink_err
    assert "stopped" in sink_err


def test_configuration_errors_exit_before_starting(tmp_path: Path) -> None:
    no_kafka = holonograph("sink", "--data-dir", str(tmp_path / "d"))
    assert no_kafka.returncode == 2
    assert "the sink needs --kafka" in no_kafka.stderr
    both = holonograph("serve", "--kafka", "127.0.0.1:1", "--data-dir", str(tmp_path / "d"))
    assert both.returncode == 2
    assert "keeps no store" in both.stderr
    bad = holonograph("serve", "--kafka", "no-port-here")
    assert bad.returncode == 2
    assert "use host:port" in bad.stderr
