"""`bench.merges`: a settled run counts every drained span once (its own process: chDB
takes one data directory a process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.clickhouse]


def _one(variant: str) -> dict[str, object]:
    command = [sys.executable, "-m", "bench.merges", "--one", variant, "--drains", "3",
               "--spans-per-drain", "512", "--gap", "0"]  # fmt: skip
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_settled_run_holds_every_drained_span_and_is_charged_per_span() -> None:
    run = _one("base")
    parts = {(table, kind): (count, rows) for table, kind, count, rows, _ in run["parts"]}  # type: ignore[attr-defined]
    receipts = sum(rows for (table, _), (_, rows) in parts.items() if table == "emission_receipts")
    assert run["spans"] == receipts == 3 * 512
    assert run["final"][0] == 0 and run["final"][2] == 0  # type: ignore[index]
    assert run["us_per_span"] > 0  # type: ignore[operator]
