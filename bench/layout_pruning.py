"""The event layout's pruning (issue 30 item 1, docs/decisions/0014): what a 7-day
drift on one surface reads and costs, with time-ordered (ULID) and random (UUIDv4)
event ids, before and after migration 0016, in one run.

For each id scheme a worker process (one chDB store per process) builds a store of
the layout before 0016 with `testkit.scalestore` (`--rows` dimension rows over
`--days` days on `--surfaces` surfaces, generated inside ClickHouse), then:

- **before**: the drift job in-process with the reads as they were
  (`testkit.layout.Unplaced`), its wall time, and the rows ClickHouse plans to read
  for the series' window (`EXPLAIN ESTIMATE` of its dimension-table filter);
- **relayout**: migration 0016 on that store, timed;
- **after**: the same with the layout's pruning predicate.

Then `holonograph drift --data-dir ... --json` runs as a user runs it (a new process)
on that store, right after the same command on a small *baseline* store (every
surface, a few hundred events: on an empty store the command refuses the unknown
surface before any query); the query's share is the difference. The figures to read
are same-run ratios: random/ULID after the layout (target <= 1.5), and the query's
share (target <= 2 s on this machine).

    python -m bench.layout_pruning --rows 20M --json bench/layout_pruning.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.paths import ROOT, python_module

SURFACE = "surface-00"
DIMENSION = "correctness"
END = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
WINDOW = dt.timedelta(days=7)
BASELINE_ROWS = 12_000


def _log(message: str) -> None:
    print(f"bench.layout_pruning: {message}", file=sys.stderr, flush=True)


def _rfc3339(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_size(text: str) -> int:
    """`20M`, `500k` or `2000000` -> rows."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


# --- the worker: one store, in its own process --------------------------------------


def _read_cost(store: Any, since: dt.datetime) -> dict[str, Any]:
    """The drift job's wall time on `store`, and the rows ClickHouse plans to read for
    the series' window on the dimension table."""
    from processors.drift.job import JOB as DRIFT
    from processors.series.cells import SERIES_FILTER, SeriesQuery

    request = DRIFT.request.model_validate(
        {"surface_id": SURFACE, "since": since, "until": END}
    ).for_tenant("default")
    started = time.perf_counter()
    report = DRIFT.run(store, request, lambda: END)
    wall = time.perf_counter() - started
    query = SeriesQuery(SURFACE, since, END, tenant_id="default", dimension_id=DIMENSION)
    sql = (
        "SELECT count() FROM holonograph.evaluation_dimensions FINAL"
        f" WHERE {SERIES_FILTER} AND dimension_id = {{dimension:String}}"
    )
    rows = store.query(f"EXPLAIN ESTIMATE {sql}", query.params()).dicts()
    planned = sum(int(r["rows"]) for r in rows if r["table"] == "evaluation_dimensions")
    window = int(store.query(sql, query.params()).scalar() or 0)
    return {
        "drift_wall_s": round(wall, 3),
        "event_count": report.to_json()["eventCount"],
        "rows_planned": planned,
        "window_rows": window,
    }


def worker(args: argparse.Namespace) -> dict[str, Any]:
    from ingest.store.clickhouse import open_store
    from schemas.migrations import apply_migrations, load_migrations
    from testkit.layout import Unplaced
    from testkit.scalestore import ScaleSpec, build

    store = open_store(f"chdb://{args.dir}")
    try:
        if args.baseline:
            apply_migrations(store)
            build(store, ScaleSpec(rows=BASELINE_ROWS, days=args.days, surfaces=args.surfaces,
                                   end=END, streams=10))  # fmt: skip
            return {}
        spec = ScaleSpec(rows=args.rows, days=args.days, surfaces=args.surfaces, ids=args.ids,
                         end=END)  # fmt: skip
        apply_migrations(store, [m for m in load_migrations() if m.version != 16])
        load_s = build(store, spec)
        total = int(store.query("SELECT count() FROM holonograph.evaluation_dimensions").scalar())
        since = END - WINDOW
        before = _read_cost(Unplaced(store), since)
        started = time.perf_counter()
        apply_migrations(store)
        relayout_s = time.perf_counter() - started
        after = _read_cost(store, since)
        return {
            "ids": args.ids, "rows": total, "load_s": round(load_s, 1),
            "relayout_s": round(relayout_s, 1), "before": before, "after": after,
        }  # fmt: skip
    finally:
        store.close()


# --- the run ------------------------------------------------------------------------


def _subprocess(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    return dict(json.loads(lines[-1])) if lines else {}


def _drift_cli(data_dir: Path) -> float:
    argv = python_module(
        "holonograph", "drift", "--surface", SURFACE, "--since", _rfc3339(END - WINDOW),
        "--until", _rfc3339(END), "--data-dir", str(data_dir), "--json",
    )  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: a change point found
        raise RuntimeError(f"drift exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall


# The derived completeness tables are refreshed once before the timed commands (what
# the first command after a load would otherwise do inside its own timing), with the
# read limits lifted for that one step, as bench.scale does.
UNLIMITED = (
    "--max-memory-usage", "0", "--max-execution-time", "0", "--max-rows-to-read", "0",
    "--max-result-rows", "0",
)  # fmt: skip


def _refresh(data_dir: Path) -> float:
    argv = python_module(
        "holonograph", "completeness", "--refresh", *UNLIMITED, "--data-dir", str(data_dir),
        "--json",
    )  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"completeness --refresh exited {done.returncode}: {done.stderr}")
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="layout-bench-"))
    me = [sys.executable, "-m", "bench.layout_pruning", "--worker", "--rows", str(args.rows),
          "--days", str(args.days), "--surfaces", str(args.surfaces)]  # fmt: skip
    try:
        baseline = work / "baseline"
        _subprocess([*me, "--baseline", "--dir", str(baseline)])
        _refresh(baseline)
        results: dict[str, Any] = {"rows": args.rows, "days": args.days,
                                   "surfaces": args.surfaces, "by_ids": {}}  # fmt: skip
        for ids in ("ulid", "random"):
            data_dir = work / ids
            _log(f"{ids}: building {args.rows:,} dimension rows, measuring, relaying")
            one = _subprocess([*me, "--ids", ids, "--dir", str(data_dir)])
            one["refresh_s"] = round(_refresh(data_dir), 1)
            walls = []
            for _ in range(args.repeats):
                walls.append({"baseline_s": _drift_cli(baseline), "store_s": _drift_cli(data_dir)})
            one["cli"] = walls
            best = min(w["store_s"] for w in walls)
            base = min(w["baseline_s"] for w in walls)
            one["cli_best_s"] = round(best, 2)
            one["cli_baseline_s"] = round(base, 2)
            one["query_share_s"] = round(best - base, 2)
            _log(f"{ids}: {json.dumps(one)}")
            results["by_ids"][ids] = one
            shutil.rmtree(data_dir, ignore_errors=True)
        ulid, rand = results["by_ids"]["ulid"], results["by_ids"]["random"]
        results["ratios"] = {
            "random_over_ulid_drift_after": round(
                rand["after"]["drift_wall_s"] / ulid["after"]["drift_wall_s"], 2
            ),
            "random_over_ulid_drift_before": round(
                rand["before"]["drift_wall_s"] / ulid["before"]["drift_wall_s"], 2
            ),
            "random_over_ulid_cli_share": round(
                rand["query_share_s"] / max(ulid["query_share_s"], 0.01), 2
            ),
        }
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render(results: dict[str, Any]) -> str:
    lines = [
        f"{results['rows']:,} dimension rows, {results['days']} days, {results['surfaces']}"
        " surfaces; 7-day drift on one surface",
        "",
        "| ids | layout | drift job wall | rows planned | window rows | relayout |",
        "|---|---|---|---|---|---|",
    ]
    for ids, one in results["by_ids"].items():
        for side in ("before", "after"):
            cost = one[side]
            relayout = f"{one['relayout_s']} s" if side == "after" else ""
            lines.append(
                f"| {ids} | {side} 0016 | {cost['drift_wall_s']:.2f} s |"
                f" {cost['rows_planned']:,} | {cost['window_rows']:,} | {relayout} |"
            )
    lines += [
        "",
        "| ids | `holonograph drift` | baseline store | query's share |",
        "|---|---|---|---|",
    ]
    for ids, one in results["by_ids"].items():
        lines.append(
            f"| {ids} | {one['cli_best_s']} s | {one['cli_baseline_s']} s |"
            f" {one['query_share_s']} s |"
        )
    lines += ["", f"ratios: {json.dumps(results['ratios'])}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=parse_size, default=parse_size("20M"))
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--surfaces", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--render", type=Path, help="print the tables of a results file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ids", default="ulid", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    results = run(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
