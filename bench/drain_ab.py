"""The drain's insert of the event and dimension tables into in-process chDB, the two
ways this tree can build them, alternating drain by drain in one process (so both see
the same load): "columns" (`placed_columns`, then a `pyarrow.array` per column of
every row's values, `ClickHouseStore.insert_columns`) and "tables"
(`ingest.store.arrow_rows.placed_tables`, what `write_rows` does now). Each drain is
fresh hot-path rows (decoded first, so out of cache, as live), `--requests` requests of
`--batch` spans in commits of four. Medians of CPU a span: the calling thread's
(Python and what chDB runs on it) and the process's (chDB's pool and merges too).

    python -m bench.drain_ab --drains 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.payload import PayloadSpec, RequestFactory


def _drain(factory: RequestFactory, first: int, requests: int) -> Any:
    from ingest.export.decode import parse_protobuf
    from ingest.export.fast import fast_batch
    from ingest.store.rows import TableRows
    from schemas.times import utc_now

    rows = TableRows()
    for commit in range(0, requests, 4):
        part = TableRows()
        at = utc_now()
        for order in range(min(4, requests - commit)):
            n = first + commit + order
            body = factory.body(n)
            batch = fast_batch(parse_protobuf(body), wire=body)
            assert batch is not None, "the bench payload must take the hot path"
            batch.add_shared(part, f"r{n}", at, order)
        rows.extend(part)
    return rows


def _not_arrow(store: Any, rows: Any) -> bool:
    return False


def measure(drains: int, batch: int, requests: int) -> dict[str, Any]:
    from ingest.service.gctune import tune_for_throughput
    from ingest.store import rows as store_rows
    from ingest.store.clickhouse import open_store
    from schemas.migrations import apply_migrations

    factory = RequestFactory(PayloadSpec(batch=batch, tag="drainab0"))
    samples: dict[str, dict[str, list[float]]] = {
        way: {"thread": [], "process": []} for way in ("columns", "tables")
    }
    tables = store_rows._write_arrow
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        apply_migrations(store)
        tune_for_throughput()
        # The next drain is decoded before this one is written: its rows are out of cache
        # by then, as live (built by other threads while the log fills).
        ahead = [_drain(factory, 0, requests)]
        try:
            for n in range(-1, drains * 2):  # -1: the first insert sets things up
                ahead.append(_drain(factory, (n + 2) * requests, requests))
                way = ("columns", "tables")[(n + n // 2) % 2]  # ABBA
                store_rows._write_arrow = tables if way == "tables" else _not_arrow
                rows = ahead.pop(0)
                if n < 0:
                    store_rows.write_rows(store, rows)
                    continue
                spans = sum(len(p.events) for p in rows.shared)
                thread0, process0 = time.thread_time(), time.process_time()
                store_rows.write_rows(store, rows)
                samples[way]["thread"].append((time.thread_time() - thread0) / spans * 1e6)
                samples[way]["process"].append((time.process_time() - process0) / spans * 1e6)
                del rows
        finally:
            store_rows._write_arrow = tables
            store.close()
    return {
        "drains_each": drains,
        "spans_per_drain": batch * requests,
        "us_per_span": {
            way: {clock: round(statistics.median(v), 2) for clock, v in clocks.items()}
            for way, clocks in samples.items()
        },
        "runs": {
            way: {clock: [round(x, 2) for x in v] for clock, v in clocks.items()}
            for way, clocks in samples.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.drain_ab", description=__doc__)
    parser.add_argument("--drains", type=int, default=10, help="drains each way")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests", type=int, default=12, help="requests a drain")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.drains, args.batch, args.requests)
    text = json.dumps(result)
    if args.json_out is not None:
        with args.json_out.open("a") as out:
            out.write(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
