"""Where the Kafka path's own CPU goes, in-process and without a broker: the
receiver's decoding (`decode`: the hot path with the models' JSON, as `serve --kafka`
runs it on these all-valid requests; `--path reference`: `validate_request`), record
building (`screen` + `pack`: the Kafka hand-off's `prepare` and `submit`, the screened
work carried from one to the other) and the sink's record decoding and row building,
each timed apart on the same pre-encoded requests.

Run as `python -m bench.kafka_stages --batch 512 --requests 20`; prints one JSON
line with CPU microseconds per span for each stage (best of `--rounds`). Parsing
and validating the OTLP request (shared with the embedded path, see
`bench.stages`) is not counted. `--gc tuned` (default) sets the collector up as
`serve` and `sink` do (`ingest.service.gctune`); `--gc default` keeps CPython's
defaults and `--gc off` disables it while timing, to tell the stages' own cost from
the collector's."""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

from bench.payload import PayloadSpec, RequestFactory

MAX_MESSAGE_BYTES = 1_000_000


def _timed(label: str, timings: dict[str, float], work: Any) -> Any:
    cpu0 = time.process_time()
    out = work()
    timings[label] = timings.get(label, 0.0) + time.process_time() - cpu0
    return out


def _decode(requests: list[Any], path: str, timings: dict[str, float]) -> list[Any]:
    from ingest.export.fast import fast_batch
    from ingest.export.request import validate_request

    def one(request: Any) -> Any:
        if path == "reference":
            return validate_request(request)
        batch = fast_batch(request, with_json=True)
        if batch is None:
            raise SystemExit("the bench payload must take the hot path")
        return batch

    return list(_timed("decode", timings, lambda: [one(r) for r in requests]))


def _receiver(decoded: list[Any], timings: dict[str, float]) -> list[bytes]:
    from ingest.export.fast import FastBatch
    from ingest.handoff.kafka_packing import pack, screen, screen_fast
    from schemas.times import utc_now

    values: list[bytes] = []
    for n, batch in enumerate(decoded):
        cpu0 = time.process_time()
        fast = isinstance(batch, FastBatch)
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


def measure_kafka_stages(
    batch: int, requests: int, rounds: int = 3, collector: str = "tuned", path: str = "hot"
) -> dict[str, Any]:
    """Best of `rounds` per stage (the machine is shared: the minimum is the cost)."""
    from ingest.export.decode import parse_protobuf
    from ingest.service.gctune import tune_for_throughput

    if collector == "tuned":
        tune_for_throughput()
    factory = RequestFactory(PayloadSpec(batch=batch, tag="kstages0"))
    parsed = [parse_protobuf(factory.body(r)) for r in range(requests)]
    spans = sum(len(s.spans) for r in parsed for rs in r.resource_spans for s in rs.scope_spans)
    best: dict[str, float] = {}
    values: list[bytes] = []
    for _ in range(rounds):
        timings: dict[str, float] = {}
        gc.collect()
        if collector == "off":
            gc.disable()
        try:
            decoded = _decode(parsed, path, timings)
            values = _receiver(decoded, timings)
            assert _sink(values, timings) > 0
        finally:
            gc.enable()
        for name, cpu in timings.items():
            best[name] = min(best.get(name, float("inf")), cpu)
    return {
        "batch": batch,
        "requests": requests,
        "spans": spans,
        "gc": collector,
        "records": len(values),
        "mean_record_bytes": sum(len(v) for v in values) / max(1, len(values)),
        "us_per_span": {name: cpu / spans * 1e6 for name, cpu in best.items()},
        "path": path,
        "receiver_us_per_span": (best["decode"] + best["screen"] + best["pack"]) / spans * 1e6,
        "sink_us_per_span": (best["sink_decode"] + best["sink_take"] + best["sink_rows"])
        / spans
        * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_stages", description=__doc__)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gc", choices=("tuned", "default", "off"), default="tuned")
    parser.add_argument("--path", choices=("hot", "reference"), default="hot")
    args = parser.parse_args(argv)
    result = measure_kafka_stages(args.batch, args.requests, args.rounds, args.gc, args.path)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
