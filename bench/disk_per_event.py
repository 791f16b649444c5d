"""Bytes on disk per stored event: a chDB store loaded with seeded multiplexed traffic
(`testkit.multiplex`: three vendors' events per call, two graded dimensions each, one
receipt per event), merged, then measured from ClickHouse's own `system.parts` (active
parts' `bytes_on_disk`, compressed, per table). Prints one JSON document.

    python -m bench.disk_per_event --calls 100000

The events carry what the SDK sends (substrate, cohort tags, costs, tokens) but empty
resource attributes and extras: events whose resource carries hundreds of bytes of
attributes cost more, compressed well (a service's resource repeats).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import DATABASE, EVALUATION_EVENTS
from testkit import multiplex
from testkit.multiplex import MultiplexSpec


def measure(path: Path, calls: int, seed: int) -> dict[str, object]:
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        started = time.perf_counter()
        multiplex.seed(store, MultiplexSpec(calls=calls, fallbacks=calls // 20), seed)
        loaded = time.perf_counter() - started
        tables = [
            str(name)
            for (name,) in store.query(
                "SELECT DISTINCT table FROM system.parts WHERE database = {db:String} AND active",
                {"db": DATABASE},
            ).rows
        ]
        for table in tables:
            store.command(f"OPTIMIZE TABLE {DATABASE}.{table} FINAL")
        parts = {
            str(table): {"rows": int(rows), "bytes": int(size)}
            for table, rows, size in store.query(
                "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts"
                " WHERE database = {db:String} AND active GROUP BY table ORDER BY table",
                {"db": DATABASE},
            ).rows
        }
        events = int(
            store.query(f"SELECT count() FROM {EVALUATION_EVENTS.qualified} FINAL").scalar()
        )
    finally:
        store.close()
    total = sum(int(p["bytes"]) for p in parts.values())
    return {
        "calls": calls,
        "events": events,
        "load_seconds": round(loaded, 2),
        "bytes_on_disk": total,
        "bytes_per_event": round(total / events, 1) if events else None,
        "mib_per_million_events": round(total / events * 1e6 / 2**20, 1) if events else None,
        "tables": parts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="holonograph-disk-") as directory:
        print(json.dumps(measure(Path(directory) / "store", args.calls, args.seed), indent=2))


if __name__ == "__main__":
    main()
