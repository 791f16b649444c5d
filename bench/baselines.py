"""Baselines measured in the same run as our paths, so ratios survive a noisy machine.

(a) `grpc-server`: a bare grpcio TraceService/Export server that parses each request
    and walks every span's attributes and events into Python values, storing
    nothing: the practical ceiling of a pure-Python receiver. (Parsing alone is lazy
    with the upb backend and is no ceiling, hence the walk.)
(b) `walk`: the same parse-and-walk in-process, without gRPC.
(c) `chdb-insert`: inserting the rows our receiver would write for the same spans
    into chDB via clickhouse-connect: row-oriented (what `ingest.store.rows` does today)
    and column-oriented, timed apart from building them.

Each prints one JSON line; (a) prints its listener line and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue as PB2AnyValue

from bench.payload import PayloadSpec, RequestFactory

MAX_REQUEST_BYTES = 64 * 1024 * 1024


def _value(value: PB2AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value
    return None


def walk(request: PB2ExportTraceServiceRequest) -> int:
    """Touch every field a receiver needs as Python values; returns the span count."""
    spans = 0
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            scope = (scope_spans.scope.name, scope_spans.scope.version)
            for span in scope_spans.spans:
                record = (
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.name,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                    {kv.key: _value(kv.value) for kv in span.attributes},
                    [
                        (
                            e.name,
                            e.time_unix_nano,
                            {kv.key: _value(kv.value) for kv in e.attributes},
                        )
                        for e in span.events
                    ],
                )
                del record
                spans += 1
        del resource, scope
    return spans


class _WalkingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    async def Export(
        self, request: PB2ExportTraceServiceRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> PB2ExportTraceServiceResponse:
        walk(request)
        return PB2ExportTraceServiceResponse()


async def serve_grpc(host: str, port: int) -> None:
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", MAX_REQUEST_BYTES + 1)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        _WalkingTraceService(), server
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"OTLP/gRPC  listening on {host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(5)


def _bodies(batch: int, requests: int, first: int = 0) -> list[bytes]:
    factory = RequestFactory(PayloadSpec(batch=batch, tag="baseline"))
    return [factory.body(first + r) for r in range(requests)]


def measure_walk(batch: int, requests: int) -> dict[str, Any]:
    bodies = _bodies(batch, requests)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    spans = 0
    for body in bodies:
        spans += walk(PB2ExportTraceServiceRequest.FromString(body))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"spans": spans, "cpu_s": cpu, "wall_s": wall, "spans_per_cpu_s": spans / cpu}


def measure_chdb_insert(batch: int, requests: int, spans_per_insert: int) -> dict[str, Any]:
    """Row- and column-oriented inserts of the receiver's rows into a fresh chDB."""
    import clickhouse_connect

    from ingest.export.decode import parse_protobuf
    from ingest.export.request import validate_request
    from ingest.store.clickhouse import ClickHouseStore
    from ingest.store.rows import TableRows, write_rows
    from ingest.store.url import chdb_url
    from schemas.migrations import apply_migrations
    from schemas.tables import DATABASE
    from schemas.times import utc_now

    per_insert = max(1, spans_per_insert // batch)
    results: dict[str, Any] = {"requests_per_insert": per_insert}
    with tempfile.TemporaryDirectory(prefix="bench-chdb-") as tmp:
        url = chdb_url(Path(tmp) / "store")
        client = clickhouse_connect.get_client(dsn=url)
        store = ClickHouseStore(url, client)
        apply_migrations(store)
        for variant, first in (("row", 0), ("columnar", requests)):
            groups: list[TableRows] = []
            spans = 0
            bodies = _bodies(batch, requests, first)
            for start in range(0, len(bodies), per_insert):
                rows = TableRows()
                for r, body in enumerate(bodies[start : start + per_insert]):
                    decoded = validate_request(parse_protobuf(body))
                    spans += len(decoded.emissions)
                    rows.add(decoded, f"receipt{first + start + r}", utc_now())
                groups.append(rows)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for rows in groups:
                if variant == "row":
                    write_rows(store, rows)
                else:
                    _write_columnar(client, DATABASE, rows)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            results[variant] = {
                "spans": spans,
                "cpu_s": cpu,
                "wall_s": wall,
                "spans_per_cpu_s": spans / cpu,
            }
        results["single_span_commits"] = _single_span_commits(store, min(requests, 60))
        store.close()
    return results


def _single_span_commits(store: Any, commits: int) -> dict[str, Any]:
    """The fixed cost of a commit: one 1-span request per insert round (3 INSERTs)."""
    from ingest.export.decode import parse_protobuf
    from ingest.export.request import validate_request
    from ingest.store.rows import TableRows, write_rows
    from schemas.times import utc_now

    factory = RequestFactory(PayloadSpec(batch=1, sentinel_every=10**6, tag="single00"))
    groups = []
    for r in range(commits):
        rows = TableRows()
        rows.add(validate_request(parse_protobuf(factory.body(r))), f"single{r}", utc_now())
        groups.append(rows)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for rows in groups:
        write_rows(store, rows)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "commits": commits,
        "inserts_per_commit": 3,
        "cpu_ms_per_commit": 1000 * cpu / commits,
        "wall_ms_per_commit": 1000 * wall / commits,
    }


def _write_columnar(client: Any, database: str, rows: Any) -> None:
    from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

    for table, table_rows in (
        (EVALUATION_EVENTS, rows.events),
        (EVALUATION_DIMENSIONS, rows.dimensions),
        (EMISSION_RECEIPTS, rows.receipts),
    ):
        if table_rows:
            data = [list(column) for column in zip(*table_rows, strict=True)]
            client.insert(
                f"{database}.{table.name}",
                data,
                column_names=list(table.columns),
                column_oriented=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.baselines", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("grpc-server", help="(a) bare grpcio parse-and-walk server")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    walk_cmd = commands.add_parser("walk", help="(b) parse-and-walk in-process")
    insert_cmd = commands.add_parser("chdb-insert", help="(c) chDB insert of the same rows")
    for sub in (walk_cmd, insert_cmd):
        sub.add_argument("--batch", type=int, default=512)
        sub.add_argument("--requests", type=int, default=40)
    insert_cmd.add_argument("--spans-per-insert", type=int, default=2048)
    args = parser.parse_args(argv)
    if args.command == "grpc-server":
        asyncio.run(serve_grpc(args.host, args.port))
    elif args.command == "walk":
        print(json.dumps(measure_walk(args.batch, args.requests)), flush=True)
    else:
        result = measure_chdb_insert(args.batch, args.requests, args.spans_per_insert)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
