"""The scale benchmark (issue 30, item 2): how fast a store loads, what an event costs
on disk, and how long the analyses take as the store grows, for time-ordered and
random event ids.

For each size and id scheme it builds a chDB store with `testkit.scalestore` (rows
generated inside ClickHouse, in a new process), then measures:

- **load**: dimension rows per second of that build (events, dimensions and receipts
  written; the store's own `event_owners` view fires as on every insert);
- **disk**: `bytes_on_disk` of the active parts per table (`system.parts`), after
  `OPTIMIZE ... FINAL`, per event;
- **analyses**: wall and CPU seconds of `holonograph drift`, `compare` and
  `completeness` on one surface, over the last 7 days and over the whole range, each
  run as a user runs it (a new process, `--data-dir`, `--json`), right after the same
  command on a *baseline* store measured in the same run. The baseline is the same
  generator at `--baseline-rows` (12,000 by default: every surface exists, with a few
  hundred events), because on an empty store the commands refuse the unknown surface
  (exit 2) before any query. A command's query share is its time minus the baseline's.

Before the timed commands one `holonograph completeness --refresh` rebuilds the derived
completeness tables (what the first command after a load would otherwise do inside
its own timing); its time is reported as `refresh`.

Every store lives under one temporary directory, deleted afterwards, one at a time.

    python -m bench.scale --sizes 1M,10M --ids both --json bench/scale_results.json
    python -m bench.scale --render bench/scale_results.json   # the tables again
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import describe
from bench.paths import ROOT, python_module

EVENT_TABLES = ("evaluation_events", "evaluation_dimensions", "emission_receipts", "event_owners")
SURFACE = "surface-00"
# A generous bound on disk while loading (unmerged parts, merges' temporary copies),
# per dimension row; the merged store takes ~50 B per dimension row.
DISK_PER_ROW_LOADING = 400
COMMAND_TIMEOUT_S = 1800


def parse_size(text: str) -> int:
    """`1M`, `10m`, `500k` or `2000000` -> rows."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _log(message: str) -> None:
    print(f"bench.scale: {message}", file=sys.stderr, flush=True)


def run(args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> dict[str, Any]:
    """One process from the tree: wall and CPU seconds (the child's user + system, so
    chDB's query threads are in it), exit code, stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "exit_code": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
    }


def holonograph(*args: str) -> dict[str, Any]:
    return run(python_module("holonograph", *args))


def build(data_dir: Path, rows: int, ids: str, days: int, surfaces: int, end: dt.datetime) -> Any:
    """`testkit.scalestore` in its own process (its progress passed through to stderr):
    its summary, plus the process's CPU seconds."""
    argv = python_module(
        "testkit.scalestore", "--store", f"chdb://{data_dir}", "--rows", str(rows),
        "--ids", ids, "--days", str(days), "--surfaces", str(surfaces),
        "--end", end.isoformat(),
    )  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    summary["process_cpu_s"] = round(cpu, 2)  # the whole process: start and migrations too
    return summary


def merge_and_measure(data_dir: Path, events: int) -> dict[str, Any]:
    """OPTIMIZE FINAL every event table (timed), then their parts from system.parts."""
    started = time.perf_counter()
    for table in EVENT_TABLES:
        done = holonograph(
            "query", "--write", "--data-dir", str(data_dir),
            f"OPTIMIZE TABLE holonograph.{table} FINAL",
        )  # fmt: skip
        if done["exit_code"] != 0:
            raise RuntimeError(f"OPTIMIZE {table} failed: {done['stderr'].strip()}")
    merge_s = time.perf_counter() - started
    done = holonograph(
        "query", "--data-dir", str(data_dir), "--json",
        "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts"
        " WHERE database = 'holonograph' AND active GROUP BY table ORDER BY table",
    )  # fmt: skip
    if done["exit_code"] != 0:
        raise RuntimeError(f"reading system.parts failed: {done['stderr'].strip()}")
    tables = {r["table"]: {"rows": int(r["rows"]), "bytes": int(r["bytes"])} for r in
              json.loads(done["stdout"]) if r["table"] in EVENT_TABLES}  # fmt: skip
    total = sum(t["bytes"] for t in tables.values())
    return {
        "merge_s": round(merge_s, 2),
        "tables": tables,
        "bytes_on_disk": total,
        "bytes_per_event": round(total / events, 1),
        "mib_per_million_events": round(total / events * 1e6 / 2**20, 1),
    }


def _rfc3339(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def commands(end: dt.datetime, days: int) -> dict[str, list[str]]:
    """The timed commands, each over the last 7 days and the whole range."""
    windows = {"7d": end - dt.timedelta(days=7), "all": end - dt.timedelta(days=days)}
    out = {}
    for name in ("drift", "compare", "completeness"):
        for label, since in windows.items():
            out[f"{name} {label}"] = [
                name, "--surface", SURFACE, "--since", _rfc3339(since), "--until", _rfc3339(end),
            ]  # fmt: skip
    return out


def _what(name: str, stdout: str) -> Any:
    """What the command found (never a silent zero): its event or record count."""
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError:
        return None
    if name.startswith("drift"):
        return document.get("eventCount")
    if name.startswith("compare"):
        return document.get("events")
    return document.get("totals", {}).get("delivered")


def timed(data_dir: Path, name: str, argv: list[str]) -> dict[str, Any]:
    done = holonograph(*argv, "--data-dir", str(data_dir), "--json")
    if done["exit_code"] not in (0, 1):  # 1: a finding (a change point, a gap)
        raise RuntimeError(f"{name} exited {done['exit_code']}: {done['stderr'].strip()}")
    return {k: done[k] for k in ("wall_s", "cpu_s", "exit_code")} | {
        "found": _what(name, done["stdout"])
    }


def measure_one(
    work: Path, baseline: Path, rows: int, ids: str, args: argparse.Namespace, end: dt.datetime
) -> dict[str, Any]:
    data_dir = work / f"{ids}-{rows}"
    try:
        _log(f"loading {rows:,} dimension rows, {ids} ids")
        loaded = build(data_dir, rows, ids, args.days, args.surfaces, end)
        _log(f"loaded in {loaded['load_seconds']} s; merging")
        disk = merge_and_measure(data_dir, int(loaded["events"]))
        _log(f"{disk['bytes_per_event']} bytes per event; refreshing completeness")
        refresh = holonograph("completeness", "--refresh", "--data-dir", str(data_dir), "--json")
        holonograph("completeness", "--refresh", "--data-dir", str(baseline), "--json")
        results: dict[str, Any] = {}
        for name, argv in commands(end, args.days).items():
            runs = []
            for _ in range(args.repeats):
                pair = {
                    "baseline": timed(baseline, name, argv),
                    "store": timed(data_dir, name, argv),
                }
                runs.append(pair)
                _log(
                    f"{rows:,} {ids} {name}: {pair['store']['wall_s']:.2f} s"
                    f" (baseline {pair['baseline']['wall_s']:.2f} s)"
                )
            results[name] = runs
        return {
            "rows": rows,
            "ids": ids,
            "events": loaded["events"],
            "load": loaded,
            "disk": disk,
            "refresh": {"wall_s": round(refresh["wall_s"], 2), "exit_code": refresh["exit_code"]},
            "commands": results,
        }
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _best(runs: list[dict[str, Any]], side: str, key: str) -> float:
    return min(float(r[side][key]) for r in runs)


def render(result: dict[str, Any]) -> str:
    """The markdown tables of one result document."""
    machine = result["machine"]
    out = [
        f"Machine: {machine['cpu']}, {machine['cores']} cores (shared), "
        f"{machine['memory_gib']} GiB; chDB {machine['packages']['chdb']}; commit "
        f"{machine['commit']}; {machine['date_utc']}; load average at start "
        f"{', '.join(f'{x:.1f}' for x in machine['load_average_at_start'])}.",
        f"Store: {result['days']} days, {result['surfaces']} surfaces, 2 dimensions per event,"
        f" 3 events per multiplex call; baseline store {result['baseline_rows']:,} rows.",
        "",
        "| rows | ids | load rows/s | load s | merge s | bytes/event | MiB per M events"
        " | completeness refresh s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in result["measurements"]:
        out.append(
            f"| {m['rows']:,} | {m['ids']} | {m['load']['rows_per_second']:,} |"
            f" {m['load']['load_seconds']} | {m['disk']['merge_s']} |"
            f" {m['disk']['bytes_per_event']} | {m['disk']['mib_per_million_events']} |"
            f" {m['refresh']['wall_s']} |"
        )
    out += [
        "",
        f"Seconds (best of {result['repeats']}), surface `{SURFACE}`: wall, then the"
        " process's CPU (user + system, chDB's threads included) after the slash; in"
        " brackets the same figure of the same command on the baseline store, run just"
        " before.",
        "",
        "| rows | ids | " + " | ".join(result["command_names"]) + " |",
        "|---|---|" + "---|" * len(result["command_names"]),
    ]
    for m in result["measurements"]:
        cells = []
        for name in result["command_names"]:
            runs = m["commands"][name]
            cells.append(
                f"{_best(runs, 'store', 'wall_s'):.1f} ({_best(runs, 'baseline', 'wall_s'):.1f})"
                f" / {_best(runs, 'store', 'cpu_s'):.1f} ({_best(runs, 'baseline', 'cpu_s'):.1f})"
            )
        out.append(f"| {m['rows']:,} | {m['ids']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--render"]:
        print(render(json.loads(Path(argv[1]).read_text())))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--sizes", default="1M", help="dimension rows, comma-separated: 1M,10M")
    parser.add_argument("--ids", choices=("ulid", "random", "both"), default="both")
    parser.add_argument("--json", dest="json_path", help="write the result document here")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--surfaces", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline-rows", type=int, default=12_000)
    parser.add_argument("--tmp-dir", default=None, help="where the stores go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    schemes = ["ulid", "random"] if args.ids == "both" else [args.ids]
    end = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    result: dict[str, Any] = {
        "machine": describe(),
        "command": "python -m bench.scale " + " ".join(argv),
        "days": args.days,
        "surfaces": args.surfaces,
        "repeats": args.repeats,
        "baseline_rows": args.baseline_rows,
        "end": _rfc3339(end),
        "command_names": list(commands(end, args.days)),
        "measurements": [],
        "skipped": [],
    }
    with tempfile.TemporaryDirectory(prefix="holonograph-scale-", dir=args.tmp_dir) as tmp:
        work = Path(tmp)
        baseline = work / "baseline"
        build(baseline, args.baseline_rows, "ulid", args.days, args.surfaces, end)
        for rows in sizes:
            for ids in schemes:
                free = shutil.disk_usage(work).free
                need = rows * DISK_PER_ROW_LOADING
                if free < need:
                    why = f"{free / 2**30:.0f} GiB free, {need / 2**30:.0f} GiB needed"
                    _log(f"skipping {rows:,} {ids}: {why}")
                    result["skipped"].append({"rows": rows, "ids": ids, "why": why})
                    continue
                result["measurements"].append(measure_one(work, baseline, rows, ids, args, end))
                if args.json_path:  # what is measured so far survives a later failure
                    Path(args.json_path).write_text(json.dumps(result, indent=1) + "\n")
    result["machine"]["load_average_at_end"] = os.getloadavg()
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
