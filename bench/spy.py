"""Sampling profile of a live service process with py-spy, summarised by stage (and,
recorded with `threads`, by thread).

py-spy pauses the process for each sample, so a profiled run is slower than a
measured one: it is a separate run, used for shares of time, never for rates. With
`gil`, only the thread holding the GIL is sampled: the shares are then of the
process's Python CPU, thread by thread (the decode thread, the log's, the commit
thread, the event loop), which is what a hop between them costs or saves.

    python -m bench.spy --batch 512 --clients 4 --duration 12 --gil --json-out p.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

# A sample is charged to the first stage whose marker matches a frame on its stack.
STAGES = (
    ("chDB insert (write_rows)", "write_rows (ingest/store/rows.py)"),
    ("row building (TableRows.add)", "TableRows.add (ingest/store/rows.py)"),
    ("small-request log: ownership, frame, fsync", "SmallLog._commit (ingest/handoff/smalllog.py)"),
    ("hot path: protobuf to rows (ingest/export/fast.py)", "(ingest/export/fast.py)"),
    ("pydantic model construction", "(pydantic/main.py)"),
    ("attribute decoding (decode.attributes)", "attributes (ingest/export/decode.py)"),
    ("validation (validate.*, rest)", "validate_request (ingest/export/request.py)"),
    ("protobuf parse", "parse_protobuf (ingest/export/decode.py)"),
    ("Kafka records (ingest/handoff/kafka_packing.py)", "(ingest/handoff/kafka_packing.py)"),
    ("Kafka client (aiokafka)", "(aiokafka/"),
    ("gRPC/HTTP transport and asyncio", "BaseEventLoop.run_forever (asyncio/base_events.py)"),
)


def start(
    pid: int,
    seconds: float,
    out: Path,
    rate: int = 100,
    gil: bool = False,
    threads: bool = False,
) -> subprocess.Popen[bytes] | None:
    """Record `pid` (and its threads) for `seconds`; None when py-spy is unavailable.
    `gil`: only the thread holding the GIL; `threads`: each stack under its thread."""
    binary = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if binary is None:
        return None
    argv = [binary, "record", "--pid", str(pid), "--format", "raw", "-o", str(out)]
    argv += ["--duration", str(max(1, int(seconds))), "--rate", str(rate)]
    argv += ["--gil"] * gil + ["--threads"] * threads
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _matches(mark: str, frame: str) -> bool:
    """ "(module/" marks match any frame in that module; others name one function."""
    return mark in frame if mark.startswith("(") else frame == mark


def _frames(stack: str) -> tuple[str | None, list[str]]:
    """(thread name or None, frames without line numbers) of a recorded stack."""
    frames = stack.split(";")
    thread = None
    if frames and frames[0].startswith("thread ("):  # `thread (0x7f..): decode_0`
        thread = re.sub(r"_\d+$", "", frames.pop(0).rpartition(": ")[2]) or "unnamed"
    return thread, [re.sub(r":\d+\)$", ")", frame) for frame in frames]


def summarize(collapsed: Path, top: int = 20) -> dict[str, Any]:
    """Shares of samples by stage, by function (own time) and inclusive."""
    total = 0
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        thread, frames = _frames(stack)
        if not frames:
            continue
        total += count
        if thread is not None:
            threads[thread] += count
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
        "threads": {name: n / total for name, n in threads.most_common()},
        "own": [{"function": f, "share": n / total} for f, n in own.most_common(top)],
        "inclusive": [
            {"function": f, "share": n / total}
            for f, n in inclusive.most_common(top * 3)
            if f.split(" (", 1)[-1].startswith(
                ("ingest/", "pydantic/", "clickhouse_connect/", "chdb/")
            )
        ][:top],
    }


def main(argv: list[str] | None = None) -> None:
    """Profile this tree's embedded `serve` under one closed-loop gRPC load."""
    from bench.measure import LoadProcess, Scenario, new_tag
    from bench.paths import EmbeddedPath

    parser = argparse.ArgumentParser(prog="python -m bench.spy", description=__doc__)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=12.0)
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--gil", action="store_true", help="only the thread holding the GIL")
    parser.add_argument("--json-out", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    scenario = Scenario(
        f"gRPC, batch {args.batch}", batch=args.batch, clients=args.clients, duration=args.duration
    )
    with tempfile.TemporaryDirectory(prefix="bench-spy-") as tmp:
        path = EmbeddedPath()
        endpoints = path.start(Path(tmp))
        out = Path(tmp) / "profile.txt"
        try:
            load = LoadProcess(scenario, endpoints, new_tag())
            recorder = start(path.pids()[0], args.duration, out, args.rate, args.gil, True)
            if recorder is None:
                raise SystemExit("py-spy is not installed (pip install py-spy)")
            load.go()
            result = load.result()
            recorder.wait(timeout=120)
        finally:
            path.stop()
        summary = {
            "scenario": {"batch": args.batch, "clients": args.clients, "gil": args.gil},
            "accepted_spans": result.get("accepted_spans"),
            **summarize(out, top=30),
        }
    text = json.dumps(summary, indent=1)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
