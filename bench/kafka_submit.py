"""The Kafka hand-off's `submit` (packing, aiokafka's send with compression, the acks) in
CPU microseconds per span, against the Tansu test broker, for the records of either
version a receiver writes for hot-path requests (`--record-version 8`: rows as columns,
`7`: rows, `4`: the models' JSON) and a compression type. The requests are decoded and
`prepare`d before the clock starts; best of `--rounds`.

    python -m bench.kafka_submit --record-version 8 --compression zstd
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from bench.payload import PayloadSpec, RequestFactory
from ingest.export.decode import parse_protobuf
from ingest.export.fast import fast_batch
from ingest.handoff.kafka import KafkaHandoff
from ingest.service.gctune import tune_for_throughput
from schemas.topics import Topics
from testkit.tansu import TansuBroker


async def _submit(
    bootstrap: str, version: int, compression: str, requests: int, batch: int, rounds: int
) -> float:
    handoff = KafkaHandoff(
        bootstrap,
        Topics(records="bench.submit.records", dead_letter="bench.submit.dead-letter"),
        max_inflight_bytes=1 << 30,
        max_message_bytes=1_000_000,
        idempotence=False,  # Tansu has no InitProducerId
        record_version=version,
        compression_type=compression,
    )
    await handoff.start()
    try:
        factory = RequestFactory(PayloadSpec(batch=batch, tag="ksubmit0"))
        parsed = [parse_protobuf(factory.body(r)) for r in range(requests)]
        maybe = [fast_batch(p, with_json=handoff.fast_batch_json) for p in parsed]
        batches = [b for b in maybe if b is not None]
        if len(batches) != len(maybe):
            raise SystemExit("the bench payload must take the hot path")
        for prepared in [handoff.prepare(b) for b in batches[:2]]:  # warm up
            await handoff.submit(prepared, "w" * 32, 0)
        best = float("inf")
        for _ in range(rounds):
            prepared_all = [handoff.prepare(b) for b in batches]
            cpu0 = time.process_time()
            for n, prepared in enumerate(prepared_all):
                await handoff.submit(prepared, f"{n:032x}", 0)
            best = min(best, time.process_time() - cpu0)
        return best / (requests * batch) * 1e6
    finally:
        await handoff.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_submit", description=__doc__)
    parser.add_argument("--record-version", type=int, choices=(8, 7, 4), default=8)
    parser.add_argument("--compression", default="zstd")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    tune_for_throughput()
    with tempfile.TemporaryDirectory() as tmp:
        broker = TansuBroker(Path(tmp) / "tansu.log")
        broker.start()
        try:
            us = asyncio.run(
                _submit(
                    f"127.0.0.1:{broker.port}",
                    args.record_version,
                    args.compression,
                    args.requests,
                    args.batch,
                    args.rounds,
                )
            )
        finally:
            broker.stop()
    result = {
        "record_version": args.record_version,
        "compression": args.compression,
        "batch": args.batch,
        "requests": args.requests,
        "submit_us_per_span": us,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
