"""Where the Kafka path's own CPU goes, in-process and without a broker: the
receiver's decoding (`decode`: the hot path with the models' JSON, as `serve --kafka`
runs it on these all-valid requests; `--path reference`: `validate_request`), record
building (`screen` + `pack`: the Kafka hand-off's `prepare` and `submit`, the screened
work carried from one to the other) and the sink's record decoding and row building,
each timed apart on the same pre-encoded requests. `--store` adds what the sink's
flush does with those rows on an embedded chDB store (`sink_own`: the ownership check
as the sink runs it there, one writer: no read-back of its claims, `--verify` to read
them back as on a server; `sink_insert`: `write_rows` under the batch's deduplication
token; `sink_background`: the process's CPU outside those and the
flush's decoding again, chDB's merges), `--records-per-flush` records per flush, on
the process clock.

`--record-version 4` writes the records of version 4 (the models' JSON, made by the hot
path), `7` the rows, instead of 8 (the rows as columns). Run as `python -m
bench.kafka_stages --batch 512 --requests 20`; prints one JSON line with CPU
microseconds per span for each stage (best of `--rounds`). Parsing and validating the
OTLP request (shared with the embedded path, see `bench.stages`) is not counted. `--gc
tuned` (default) sets the collector up as `serve` and `sink` do
(`ingest.service.gctune`); `--gc default` keeps CPython's defaults and `--gc off`
disables it while timing, to tell the stages' own cost from the collector's."""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.payload import PayloadSpec, RequestFactory

MAX_MESSAGE_BYTES = 1_000_000


def _timed(label: str, timings: dict[str, float], work: Any) -> Any:
    cpu0 = time.process_time()
    out = work()
    timings[label] = timings.get(label, 0.0) + time.process_time() - cpu0
    return out


def _decode(
    requests: list[Any],
    path: str,
    timings: dict[str, float],
    with_json: bool = True,
    bodies: list[bytes] | None = None,
) -> list[Any]:
    from ingest.export.fast import fast_batch
    from ingest.export.request import validate_request

    def one(request: Any, body: bytes | None) -> Any:
        if path == "reference":
            return validate_request(request)
        # As `serve --kafka` decodes: version 7 lays no dimension rows out, and the
        # request's own bytes are read.
        batch = fast_batch(request, with_json=with_json, layers=with_json, wire=body)
        if batch is None:
            raise SystemExit("the bench payload must take the hot path")
        return batch

    wires: list[bytes | None] = list(bodies) if bodies else [None] * len(requests)
    return list(
        _timed("decode", timings, lambda: [one(r, b) for r, b in zip(requests, wires, strict=True)])
    )


def _receiver(decoded: list[Any], timings: dict[str, float], version: int = 4) -> list[bytes]:
    from ingest.export.fast import FastBatch
    from ingest.handoff.kafka_packing import pack, screen, screen_fast
    from schemas.times import utc_now

    values: list[bytes] = []
    for n, batch in enumerate(decoded):
        cpu0 = time.process_time()
        fast = isinstance(batch, FastBatch)
        if version in (7, 8) and fast:
            from ingest.handoff.kafka_packing import screen_columns, screen_rows

            screened = (
                screen_columns(batch, MAX_MESSAGE_BYTES) if version == 8 else None
            ) or screen_rows(batch, MAX_MESSAGE_BYTES)
        else:
            screened = screen_fast(batch, MAX_MESSAGE_BYTES) if fast else None
        screened = screened or screen(batch, MAX_MESSAGE_BYTES)
        cpu1 = time.process_time()
        out = pack(screened, f"{n:032x}", utc_now(), MAX_MESSAGE_BYTES)
        cpu2 = time.process_time()
        timings["screen"] = timings.get("screen", 0.0) + cpu1 - cpu0
        timings["pack"] = timings.get("pack", 0.0) + cpu2 - cpu1
        values.extend(r.value for r in out)
    return values


def _sink(values: list[bytes], timings: dict[str, float]) -> int:
    from ingest.sink.batch import Batch, Consumed
    from ingest.sink.fast import fast_record
    from schemas.records import PoisonLetter, decode

    decoded = _timed("sink_decode", timings, lambda: [fast_record(v) or decode(v) for v in values])
    held = Batch(0.0)

    def take() -> None:
        for offset, record in enumerate(decoded):
            stored = None if isinstance(record, PoisonLetter) else record
            held.add(Consumed(None, offset, b"", record=stored))  # type: ignore[arg-type,unused-ignore]

    _timed("sink_take", timings, take)
    return int(_timed("sink_rows", timings, held.table_rows).row_count)


def _store_stages(
    values: list[bytes], per_flush: int, timings: dict[str, float], verify: bool
) -> dict[str, int]:
    """The sink's flush of `values`, `per_flush` records at a time, on a fresh store;
    returns the active parts per table after the last flush."""
    from aiokafka.structs import TopicPartition

    from ingest.sink.batch import Batch, Consumed, with_token
    from ingest.sink.fast import fast_record
    from ingest.store import owners
    from ingest.store.clickhouse import open_store
    from ingest.store.rows import write_rows
    from schemas.migrations import apply_migrations

    tp = TopicPartition("bench.records", 0)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        try:
            apply_migrations(store)
            process0 = time.process_time()
            before = sum(timings.get(k, 0.0) for k in ("sink_own", "sink_insert"))
            python = 0.0  # decoding and rows again (timed above): not the store's
            for start in range(0, len(values), per_flush):
                batch = Batch(0.0)
                thread0 = time.thread_time()
                for offset, value in enumerate(values[start : start + per_flush], start):
                    record = fast_record(value)
                    assert record is not None, "the bench payload must take the hot path"
                    digest = hashlib.sha256(value).digest()
                    batch.add(Consumed(tp, offset, digest, record=record))
                submissions = [s for s in (i.submission() for i in batch.items) if s]
                python += time.thread_time() - thread0
                checked = _timed(
                    "sink_own",
                    timings,
                    lambda s=submissions: owners.check(store, s, verify=verify),
                )
                thread0 = time.thread_time()
                rows = batch.table_rows()
                rows.placements = checked.placements
                token = with_token(store, batch.token())
                python += time.thread_time() - thread0
                _timed("sink_insert", timings, lambda t=token, r=rows: write_rows(t, r))
            spent = sum(timings.get(k, 0.0) for k in ("sink_own", "sink_insert")) - before
            timings["sink_background"] = timings.get("sink_background", 0.0) + (
                time.process_time() - process0 - spent - python
            )
            parts = store.query(
                "SELECT table, count() FROM system.parts WHERE active"
                " AND database = 'holonograph' GROUP BY table"
            )
            return {str(table): int(count) for table, count in parts.rows}
        finally:
            store.close()


def measure_kafka_stages(
    batch: int,
    requests: int,
    rounds: int = 3,
    collector: str = "tuned",
    path: str = "hot",
    store: bool = False,
    per_flush: int = 12,
    verify: bool = False,
    version: int = 8,
) -> dict[str, Any]:
    """Best of `rounds` per stage (the machine is shared: the minimum is the cost).
    `version`: the records a receiver writes for these requests (8: rows as columns, 7:
    rows, 4: models' JSON)."""
    from ingest.export.decode import parse_protobuf
    from ingest.service.gctune import tune_for_throughput

    if collector == "tuned":
        tune_for_throughput()
    factory = RequestFactory(PayloadSpec(batch=batch, tag="kstages0"))
    bodies = [factory.body(r) for r in range(requests)]
    parsed = [parse_protobuf(body) for body in bodies]
    spans = sum(len(s.spans) for r in parsed for rs in r.resource_spans for s in rs.scope_spans)
    best: dict[str, float] = {}
    values: list[bytes] = []
    parts: dict[str, int] = {}
    for _ in range(rounds):
        timings: dict[str, float] = {}
        gc.collect()
        if collector == "off":
            gc.disable()
        try:
            decoded = _decode(parsed, path, timings, version == 4, bodies)
            values = _receiver(decoded, timings, version)
            assert _sink(values, timings) > 0
        finally:
            gc.enable()
        if store:  # the collector on: chDB's calls allocate as the sink's do
            parts = _store_stages(values, per_flush, timings, verify)
        for name, cpu in timings.items():
            best[name] = min(best.get(name, float("inf")), cpu)
    out: dict[str, Any] = {
        "batch": batch,
        "requests": requests,
        "spans": spans,
        "gc": collector,
        "records": len(values),
        "mean_record_bytes": sum(len(v) for v in values) / max(1, len(values)),
        "us_per_span": {name: cpu / spans * 1e6 for name, cpu in best.items()},
        "path": path,
        "record_version": version,
        "receiver_us_per_span": (best["decode"] + best["screen"] + best["pack"]) / spans * 1e6,
        "sink_us_per_span": (best["sink_decode"] + best["sink_take"] + best["sink_rows"])
        / spans
        * 1e6,
    }
    if store:
        flush = ("sink_own", "sink_insert", "sink_background")
        out["records_per_flush"] = per_flush
        out["verify_claims"] = verify
        out["parts_after"] = parts
        out["sink_with_store_us_per_span"] = (
            out["sink_us_per_span"] + sum(best[name] for name in flush) / spans * 1e6
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_stages", description=__doc__)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gc", choices=("tuned", "default", "off"), default="tuned")
    parser.add_argument("--path", choices=("hot", "reference"), default="hot")
    parser.add_argument("--store", action="store_true", help="add the flush's store stages")
    parser.add_argument("--records-per-flush", type=int, default=12)
    parser.add_argument(
        "--verify", action="store_true", help="read the claims back (a server's sink)"
    )
    parser.add_argument(
        "--record-version", type=int, choices=(8, 7, 4), default=8, help="the records written"
    )
    args = parser.parse_args(argv)
    result = measure_kafka_stages(
        args.batch,
        args.requests,
        args.rounds,
        args.gc,
        args.path,
        store=args.store,
        per_flush=args.records_per_flush,
        verify=args.verify,
        version=args.record_version,
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
