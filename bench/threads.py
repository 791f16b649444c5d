"""CPU per accepted span of a live embedded `serve`, thread by thread, chDB's own threads
included: the decode thread, the log's thread (ownership, rows, the frame, fsync), the
commit thread (the drain's insert, chDB's work on it too), the event loop, merges.

`bench.procstat.thread_cpu_seconds` sums by the kernel's thread name, under which
Python's threads are all `python`; here each thread's utime+stime is read by thread id
and named by `py-spy dump` (Python's names, `decode_0` -> `decode`), chDB's by their
own (a thread py-spy cannot name keeps its kernel name: the commit thread inside chDB
shows as chDB's `Unknown`). A measured run, not a profiled one: py-spy looks once, after
the load.

    python -m bench.threads --duration 10 [--root TREE] [--json-out t.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.procstat import CLOCK_TICKS

_THREAD = re.compile(r'Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): "([^"]+)"')


def cpu_by_thread(pid: int) -> dict[int, tuple[str, float]]:
    """Thread id -> (kernel name, user+system seconds) of `pid`'s live threads."""
    out: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            raw = (task / "stat").read_text()
        except OSError:
            continue  # ended between listing and reading
        fields = raw[raw.rindex(")") + 2 :].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return out


def python_names(pid: int) -> dict[int, str]:
    """Thread id -> Python thread name (`py-spy dump`); empty without py-spy."""
    binary = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if binary is None:
        return {}
    dump = subprocess.run([binary, "dump", "--pid", str(pid)], capture_output=True, text=True)
    names = {}
    for found in _THREAD.finditer(dump.stdout):
        tid = found[1]
        names[int(tid, 16) if tid.startswith("0x") else int(tid)] = found[2]
    return names


def per_span(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    names: dict[int, str],
    spans: int,
) -> dict[str, float]:
    """Microseconds of CPU per span by thread name (numbered pools summed)."""
    total: dict[str, float] = {}
    for tid, (kernel_name, seconds) in after.items():
        label = re.sub(r"_\d+$", "", names.get(tid, kernel_name))
        used = (seconds - before.get(tid, (kernel_name, 0.0))[1]) / spans * 1e6
        total[label] = total.get(label, 0.0) + used
    return dict(sorted(total.items(), key=lambda item: -item[1]))


def main(argv: list[str] | None = None) -> None:
    from bench.measure import LoadProcess, Scenario, new_tag
    from bench.paths import ROOT, EmbeddedPath

    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree whose serve runs")
    parser.add_argument("--json-out", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    scenario = Scenario(
        f"gRPC, batch {args.batch}", batch=args.batch, clients=args.clients, duration=args.duration
    )
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        path = EmbeddedPath(root=args.root)
        endpoints = path.start(Path(tmp))
        try:
            pid = path.pids()[0]
            load = LoadProcess(scenario, endpoints, new_tag())
            before = cpu_by_thread(pid)
            load.go()
            result = load.result()
            after = cpu_by_thread(pid)
            names = python_names(pid)
        finally:
            path.stop()
    spans = int(result.get("accepted_spans") or 0)
    threads = per_span(before, after, names, max(spans, 1))
    summary: dict[str, Any] = {
        "scenario": {"batch": args.batch, "clients": args.clients, "duration": args.duration},
        "root": str(args.root),
        "accepted_spans": spans,
        "us_per_span": sum(threads.values()),
        "threads_us_per_span": {name: round(us, 2) for name, us in threads.items() if us >= 0.05},
        "named_by_py_spy": bool(names),
    }
    text = json.dumps(summary, indent=1)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
