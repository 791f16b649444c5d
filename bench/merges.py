"""What ingest costs per span once its merges are paid for (issue 24).

A live window of a few seconds leaves the merges its inserts cause for later, so a
setting that defers merges looks like a gain there. This counts the whole bill: in a
fresh process and store, N drains of the bench payload (the rows built before the clock
starts), then the wait until the store settles (no merge running, no outdated part left,
the active parts unchanged for three polls), and the process CPU over all of it, with
the CPU of each thread by name from /proc/self/task (threads that ended are in
"exited"). Variants (table settings, applied after the migrations) run in alternating
subprocesses, each in its own store:

    python -m bench.merges --drains 24 --pairs 4 --variants base,compact
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.threads import cpu_by_thread

VARIANTS: dict[str, dict[str, int]] = {
    "base": {},
    "compact": {"min_bytes_for_wide_part": 1 << 40, "min_rows_for_wide_part": 1 << 40},
    "base20": {"merge_selector_base": 20},
    "compact20": {
        "min_bytes_for_wide_part": 1 << 40,
        "min_rows_for_wide_part": 1 << 40,
        "merge_selector_base": 20,
    },
}
TABLES = ("evaluation_events", "evaluation_dimensions", "emission_receipts", "event_owners")


def _threads() -> dict[str, float]:
    """CPU seconds of this process's living threads, summed by thread name."""
    by_name: dict[str, float] = {}
    for name, cpu in cpu_by_thread(os.getpid()).values():
        by_name[name] = by_name.get(name, 0.0) + cpu
    return by_name


def _builder(store: Any, spans_per_drain: int) -> Any:
    """build(number) -> (the rows of drain `number`, its spans), as the drain builds them."""
    from bench.payload import PayloadSpec, RequestFactory
    from bench.stages import _decoder
    from ingest.export.decode import parse_protobuf
    from ingest.store import owners
    from ingest.store.owners import Submission, Writer
    from ingest.store.rows import TableRows
    from schemas.times import utc_now

    decode, count, add = _decoder("hot")
    factory = RequestFactory(PayloadSpec(batch=512, tag="merges00"))
    per_drain = max(1, spans_per_drain // 512)

    def build(number: int) -> tuple[Any, int]:
        at = utc_now()
        decoded = [
            decode(parse_protobuf(factory.body(number * per_drain + r))) for r in range(per_drain)
        ]
        submissions = [Submission(d, Writer(None), at, n) for n, d in enumerate(decoded)]
        checked = owners.check(store, submissions, verify=False)
        rows = TableRows(placements=checked.placements)
        for n, d in enumerate(checked):
            add(d, rows, f"m{number}-{n}", at)
        return rows, sum(count(d) for d in decoded)

    return build


def _state(store: Any) -> tuple[int, int, int, int]:
    merges = int(store.query("SELECT count() FROM system.merges").scalar())
    row = store.query(
        "SELECT countIf(active), countIf(NOT active), sumIf(bytes_on_disk, active)"
        " FROM system.parts WHERE database = 'holonograph' AND has({t:Array(String)}, table)",
        {"t": list(TABLES)},
    ).rows[0]
    return merges, int(row[0]), int(row[1]), int(row[2])


def run_one(variant: str, drains: int, spans_per_drain: int, gap: float) -> dict[str, Any]:
    """One variant in a fresh store: the CPU of its drains and their merges, settled."""
    from ingest.store.clickhouse import open_store
    from ingest.store.rows import write_rows
    from schemas.migrations import apply_migrations

    with tempfile.TemporaryDirectory(prefix="bench-merges-") as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        try:
            apply_migrations(store)
            for table in TABLES:
                for name, value in VARIANTS[variant].items():
                    store.command(
                        f"ALTER TABLE holonograph.{table} MODIFY SETTING {name} = {value}"
                    )
            build = _builder(store, spans_per_drain)
            time.sleep(1.0)
            threads0, cpu0, wall0 = _threads(), time.process_time(), time.monotonic()
            spans, building = 0, 0.0  # the rows' building is the decode's, not counted
            for number in range(drains):
                built0 = time.thread_time()
                rows, n = build(number)
                building += time.thread_time() - built0
                spans += n
                write_rows(store, rows)
                time.sleep(gap)
            inserted = time.monotonic() - wall0
            last, steady = None, 0
            while steady < 3 and time.monotonic() - wall0 - inserted < 90:
                time.sleep(1.0)
                state = _state(store)
                steady = steady + 1 if state[0] == 0 and state[2] == 0 and state == last else 0
                last = state
            cpu, wall = time.process_time() - cpu0 - building, time.monotonic() - wall0
            threads = {k: v - threads0.get(k, 0.0) for k, v in _threads().items()}
            threads["python"] = threads.get("python", 0.0) - building
            parts = store.query(
                "SELECT table, part_type, count(), sum(rows), sum(bytes_on_disk)"
                " FROM system.parts WHERE database = 'holonograph' AND active AND rows > 0"
                " GROUP BY table, part_type ORDER BY table, part_type"
            ).rows
        finally:
            store.close()
    per_thread = {k: round(v / spans * 1e6, 2) for k, v in threads.items() if v > 0}
    per_thread["exited"] = round((cpu - sum(threads.values())) / spans * 1e6, 2)
    return {
        "variant": variant,
        "spans": spans,
        "us_per_span": cpu / spans * 1e6,
        "threads_us_per_span": per_thread,
        "inserts_wall_s": inserted,
        "settle_wall_s": wall - inserted,
        "final": last,
        "parts": [[str(t), str(p), int(c), int(r), int(b)] for t, p, c, r, b in parts],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="base,compact")
    parser.add_argument("--drains", type=int, default=24)
    parser.add_argument("--spans-per-drain", type=int, default=6144)
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between drains")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one, args.drains, args.spans_per_drain, args.gap)))
        return
    variants = args.variants.split(",")
    runs: list[dict[str, Any]] = []
    for pair in range(args.pairs):
        order = variants if pair % 2 == 0 else variants[::-1]
        for variant in order:
            command = [sys.executable, "-m", "bench.merges", "--one", variant,
                       "--drains", str(args.drains), "--spans-per-drain",
                       str(args.spans_per_drain), "--gap", str(args.gap)]  # fmt: skip
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            run = json.loads(out.strip().splitlines()[-1])
            run["pair"], run["load"] = pair, os.getloadavg()[0]
            runs.append(run)
            top = sorted(run["threads_us_per_span"].items(), key=lambda kv: -kv[1])[:5]
            print(f"pair {pair} {variant:10s} {run['us_per_span']:6.2f} us/span"
                  f" settle {run['settle_wall_s']:5.1f}s load {run['load']:.1f} final"
                  f" {run['final']} {top}", flush=True)  # fmt: skip
    medians = {
        v: statistics.median(r["us_per_span"] for r in runs if r["variant"] == v) for v in variants
    }
    print(json.dumps({"medians_us_per_span": medians}))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
