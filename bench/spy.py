"""Sampling profile of a live service process with py-spy, summarised by stage.

py-spy pauses the process for each sample, so a profiled run is slower than a
measured one: it is a separate run, used for shares of time, never for rates.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

# A sample is charged to the first stage whose marker matches a frame on its stack.
STAGES = (
    ("chDB insert (write_rows)", "write_rows (ingest/store/rows.py)"),
    ("row building (TableRows.add)", "TableRows.add (ingest/store/rows.py)"),
    ("hot path: protobuf to rows (ingest/export/fast.py)", "(ingest/export/fast.py)"),
    ("pydantic model construction", "(pydantic/main.py)"),
    ("attribute decoding (decode.attributes)", "attributes (ingest/export/decode.py)"),
    ("validation (validate.*, rest)", "validate_request (ingest/export/request.py)"),
    ("protobuf parse", "parse_protobuf (ingest/export/decode.py)"),
    ("Kafka records (ingest/handoff/kafka_packing.py)", "(ingest/handoff/kafka_packing.py)"),
    ("Kafka client (aiokafka)", "(aiokafka/"),
    ("gRPC/HTTP transport and asyncio", "BaseEventLoop.run_forever (asyncio/base_events.py)"),
)


def start(pid: int, seconds: float, out: Path, rate: int = 100) -> subprocess.Popen[bytes] | None:
    """Record `pid` (and its threads) for `seconds`; None when py-spy is unavailable."""
    binary = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if binary is None:
        return None
    argv = [binary, "record", "--pid", str(pid), "--format", "raw", "-o", str(out)]
    argv += ["--duration", str(max(1, int(seconds))), "--rate", str(rate)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _matches(mark: str, frame: str) -> bool:
    """ "(module/" marks match any frame in that module; others name one function."""
    return mark in frame if mark.startswith("(") else frame == mark


def _frames(stack: str) -> list[str]:
    return [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]


def summarize(collapsed: Path, top: int = 20) -> dict[str, Any]:
    """Shares of samples by stage, by function (own time) and inclusive."""
    total = 0
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = _frames(stack)
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        stage = next(
            (name for name, mark in STAGES if any(_matches(mark, f) for f in frames)),
            "other threads",
        )
        stages[stage] += count
    if total == 0:
        return {"samples": 0}
    return {
        "samples": total,
        "stages": {name: stages[name] / total for name, _ in (*STAGES, ("other threads", ""))},
        "own": [{"function": f, "share": n / total} for f, n in own.most_common(top)],
        "inclusive": [
            {"function": f, "share": n / total}
            for f, n in inclusive.most_common(top * 3)
            if f.split(" (", 1)[-1].startswith(
                ("ingest/", "pydantic/", "clickhouse_connect/", "chdb/")
            )
        ][:top],
    }
