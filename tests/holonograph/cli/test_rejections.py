"""Rejected spans are visible at the receiver: a rate-limited summary line on `serve`'s
log, and `holonograph quarantine` listing them with counts per reason while `serve`
holds the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import grpc
import pytest

from tests.holonograph.cli.test_serve import ServeProcess, holonograph
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


def _payload(stream: str, modes: list[str | None], seed: int) -> bytes:
    items = [Evaluation(stream, seq, run_mode=mode) for seq, mode in enumerate(modes)]
    return export_request(record_spans(items, seed=seed)).SerializeToString()


def test_serve_logs_a_summary_and_quarantine_lists_the_spans(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)  # default interval: at most one line a minute
    try:
        first = _payload("bad-client", [None, "prod", None, "production"], seed=1)
        assert grpc_export(server.grpc_endpoint, first).code is grpc.StatusCode.OK
        for seed in (2, 3, 4):  # within the interval: counted, logged together later
            later = _payload(f"later-{seed}", [None], seed=seed)
            assert grpc_export(server.grpc_endpoint, later).code is grpc.StatusCode.OK
        listed = holonograph("quarantine", "--data-dir", str(data_dir), "--json")
        text = holonograph(
            "quarantine",
            "--data-dir",
            str(data_dir),
            "--reason-prefix",
            "holonograph.run_mode: 'prod'",
        )
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr

    lines = [line for line in stderr.splitlines() if "span(s) rejected since" in line]
    assert len(lines) == 2, stderr  # five requests' rejections, two lines
    assert re.match(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ WARNING ingest\.service\.rejections: 3 span\(s\) rejected"
        r" since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ",
        lines[0],
    )
    assert "(3 holonograph.run_mode)" in lines[0]  # counted by attribute, never by value
    assert re.search(
        r"; first: span [0-9a-f]{16} \(holonograph\.evaluation\): holonograph\.run_mode:"
        r" missing; list them with `holonograph quarantine`$",
        lines[0],
    )
    assert " 3 span(s) rejected since " in lines[1]
    assert "(3 holonograph.run_mode)" in lines[1]

    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert report["total"] == 6
    assert [(r["reason"], r["spans"]) for r in report["reasons"]] == [
        ("holonograph.run_mode: missing", 5),
        ("holonograph.run_mode: 'prod' is not one of eval|local_dev|production|replay|test", 1),
    ]
    assert len(report["spans"]) == 6
    newest = report["spans"][0]
    assert newest["spanName"] == "holonograph.evaluation"
    assert newest["receivedAt"].endswith("Z") and re.fullmatch(r"[0-9a-f]{16}", newest["spanId"])
    assert newest["attributes"]["holonograph.emission.stream"].startswith("later-")

    assert text.returncode == 0, text.stderr
    out = text.stdout.splitlines()
    assert out[0] == "1 rejected span(s), 1 reason(s)"
    assert any("bad-client#1" in line and "'prod' is not one of" in line for line in out)
