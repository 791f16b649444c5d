"""Completeness accounting at scale: N emission records over S streams with random
drops and client retries, generated inside a chDB store, then timed:

- `count()` over `emission_receipts` (the baseline the issue asks for; ClickHouse
  answers it from part metadata) and two scanning baselines;
- a full recomputation of `stream_status` + `completeness_windows`;
- an incremental refresh of the streams that received anything in the last hour;
- live reads (`holonograph completeness` without and with `--stream`).

Every timing is also given as a ratio to `count()` measured in the same run.

    python -m bench.completeness_bench                       # smoke size
    python -m bench.completeness_bench --records 10000000 --streams 10000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest.store.clickhouse import open_store
from processors.completeness import job
from schemas.migrations import apply_migrations
from schemas.store import Store

END = dt.datetime(2026, 7, 2, 0, 0, tzinfo=dt.UTC)

# Stream s owns records s*per .. s*per+per-1; its seq j is emitted `step_ms` apart
# from a random start within the span. Every 50th seq is a sentinel carrying the
# client's drop counter; 90% of streams end with a final sentinel. A record is
# dropped when a hash of (number, seed) falls under the drop rate.
_GENERATE = """
INSERT INTO holonograph.emission_receipts
    (emission_stream, emission_seq, receipt_id, kind, final, quarantined, event_id,
     surface_id, event_time, received_at, sentinel_interval_ms, completeness_dropped)
WITH intDiv(number, {per:UInt64}) AS s, number % {per:UInt64} AS j
SELECT
    concat('stream-', toString(s)) AS emission_stream,
    j AS emission_seq,
    concat('r', toString(number), {suffix:String}) AS receipt_id,
    if(j % 50 = 49 OR j = {per:UInt64} - 1, 'sentinel', 'evaluation') AS kind,
    j = {per:UInt64} - 1 AND s % 10 != 0 AS final,
    false AS quarantined,
    if(kind = 'sentinel', '', concat('evt_', toString(number))) AS event_id,
    if(kind = 'sentinel', '',
       concat('surface-', toString((s + intDiv(j, 200)) % 16))) AS surface_id,
    addMilliseconds(
        toDateTime64({start:DateTime64(3, 'UTC')}, 9, 'UTC')
            + toIntervalSecond(cityHash64(s, {seed:UInt64}) % {start_range_s:UInt64}),
        j * {step_ms:UInt64}) AS event_time,
    addMilliseconds(toDateTime64(event_time, 3, 'UTC'), 50 + number % 400) AS received_at,
    if(kind = 'sentinel', toNullable(toUInt64({step_ms:UInt64} * 50)), NULL)
        AS sentinel_interval_ms,
    if(kind = 'sentinel', toNullable(toInt64(0)), NULL) AS completeness_dropped
FROM numbers({first:UInt64}, {count:UInt64})
WHERE cityHash64(number, {seed:UInt64}) % 1000000 >= {drop_ppm:UInt64}
    AND ({suffix:String} = ''
         OR cityHash64(number, {seed:UInt64} + 1) % 1000000 < {dup_ppm:UInt64})
"""


def generate(store: Store, args: argparse.Namespace) -> None:
    per = args.records // args.streams
    span_s = int(args.span_hours * 3600)
    duration_s = per * args.step_ms // 1000
    params: dict[str, Any] = {
        "per": per,
        "seed": args.seed,
        "step_ms": args.step_ms,
        "start": (END - dt.timedelta(seconds=span_s)).replace(tzinfo=None),
        "start_range_s": max(1, span_s - duration_s),
        "drop_ppm": int(args.drop_rate * 1_000_000),
        "dup_ppm": int(args.dup_rate * 1_000_000),
    }
    total = per * args.streams
    for suffix in ("", "-retry"):
        for first in range(0, total, args.chunk):
            chunk = {**params, "first": first, "count": min(args.chunk, total - first)}
            store.command(_GENERATE, {**chunk, "suffix": suffix})
    store.command("OPTIMIZE TABLE holonograph.emission_receipts FINAL")


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time in seconds over `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def run(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    store = open_store(f"chdb://{data_dir}")
    try:
        apply_migrations(store)
        started = time.perf_counter()
        generate(store, args)
        build_s = time.perf_counter() - started
        rows = store.query("SELECT count() FROM holonograph.emission_receipts").scalar()
        truth = store.query(
            "SELECT uniqExact(emission_stream, emission_seq) FROM holonograph.emission_receipts"
        ).scalar()

        def count() -> Any:
            return store.query("SELECT count() FROM holonograph.emission_receipts").scalar()

        def count_scan() -> Any:
            return store.query(
                "SELECT count() FROM holonograph.emission_receipts WHERE emission_seq >= 0"
                " SETTINGS optimize_trivial_count_query = 0"
            ).scalar()

        def count_final() -> Any:
            return store.query("SELECT count() FROM holonograph.emission_receipts FINAL").scalar()

        now = END
        timings: dict[str, float] = {}
        timings["count"], _ = timed(count, args.repeat * 3)
        timings["count_scan"], _ = timed(count_scan, args.repeat)
        timings["count_final"], _ = timed(count_final, args.repeat)
        config = job.CompletenessConfig(materialized_buckets=tuple(args.buckets.split(",")))
        timings["full_recompute"], full = timed(
            lambda: job.recompute_completeness(store, now, config), args.repeat
        )
        timings["incremental_last_hour"], incremental = timed(
            lambda: job.refresh_completeness(store, now, now - dt.timedelta(hours=1), config),
            args.repeat,
        )
        timings["live_all_streams"], accounts = timed(
            lambda: job.account_streams(store, now), args.repeat
        )
        timings["live_one_stream"], _ = timed(
            lambda: job.account_streams(store, now, job.Selection(stream="stream-1")),
            args.repeat,
        )
        missing = sum(a.missing for a in accounts)
        tables = store.query(
            "SELECT sum(missing), sum(delivered), count() FROM holonograph.stream_status FINAL"
        ).rows[0]
        windows = store.query(
            "SELECT bucket, scope, count() FROM holonograph.completeness_windows FINAL"
            " GROUP BY bucket, scope ORDER BY bucket, scope"
        ).rows
    finally:
        store.close()
    return {
        "records_offered": args.records // args.streams * args.streams,
        "streams": args.streams,
        "receipt_rows": rows,
        "distinct_records": truth,
        "missing": missing,
        "tables_agree": tables[0] == missing and tables[1] == truth,
        "stream_status_rows": tables[2],
        "window_rows": {f"{b}/{s}": n for b, s, n in windows},
        "incremental_streams": incremental.streams,
        "full_steps_ms": full.step_ms,
        "incremental_steps_ms": incremental.step_ms,
        "full_streams": full.streams,
        "build_s": round(build_s, 2),
        "seconds": {k: round(v, 4) for k, v in timings.items()},
        "ratio_to_count": {k: round(v / timings["count"], 1) for k, v in timings.items()},
        "ratio_to_count_scan": {k: round(v / timings["count_scan"], 1) for k, v in timings.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--drop-rate", type=float, default=0.01)
    parser.add_argument("--dup-rate", type=float, default=0.001)
    parser.add_argument("--step-ms", type=int, default=5_000, help="client emit interval")
    parser.add_argument("--span-hours", type=float, default=24.0)
    parser.add_argument("--chunk", type=int, default=2_000_000, help="rows per INSERT")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--buckets", default="minute,hour,day", help="materialized bucket sizes, comma-separated"
    )
    parser.add_argument("--data-dir", type=Path, help="keep the store here (default: temp)")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="completeness-bench-"))
    try:
        print(json.dumps(run(args, data_dir), indent=2))
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
