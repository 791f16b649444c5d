"""Load generator: pre-encoded OTLP requests over gRPC or HTTP (protobuf or JSON,
gzip on or off) from N concurrent connections, open loop at a fixed span rate or
closed loop as fast as the service accepts, bounded in count and in time.

Runs as its own process (`python -m bench.loadgen --target grpc://127.0.0.1:4317`)
so its CPU is not counted as the service's, and prints one JSON document of
counts, latencies and the numbers of the requests the service accepted (the
runner checks those against the store). Loopback targets only.

Open loop latencies are measured from each request's *scheduled* send time, so a
service that stalls is not flattered by the client waiting for it (coordinated
omission); closed loop latencies are from the actual send.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import socket
import sys
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

import aiohttp
import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from bench.payload import JSON, PROTOBUF, PayloadSpec, RequestFactory

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRYABLE_GRPC = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})
RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
# Retryable answers after which the service may still have stored the request (the
# store or broker was too slow to confirm in time): the client retries and the
# store collapses the repeat on the event id, so finding them stored is allowed.
# RESOURCE_EXHAUSTED / 429 refuse before any work: finding those stored is a bug.
MAYBE_STORED_CODES = frozenset({"UNAVAILABLE", "502", "503", "504"})
OK, THROTTLED, FAILED, UNKNOWN = "ok", "throttled", "failed", "unknown"


@dataclass
class LoadConfig:
    target: str
    encoding: str = PROTOBUF
    gzip: bool = False
    batch: int = 512
    sentinel_every: int = 64
    clients: int = 4
    rate: float = 0.0
    duration: float = 10.0
    max_spans: int = 0
    timeout: float = 30.0
    tag: str = "00000000"
    first_request: int = 0
    max_outstanding: int = 0
    minimal: bool = False  # minimal evaluation spans (bench.payload.PayloadSpec.minimal)

    def validate(self) -> None:
        parsed = urlparse(self.target)
        if parsed.scheme not in ("grpc", "http"):
            raise ValueError("target must be grpc://host:port or http://host:port")
        if parsed.scheme == "grpc" and self.encoding != PROTOBUF:
            raise ValueError("gRPC carries protobuf only")
        if not _is_loopback(parsed.hostname or ""):
            raise ValueError(f"{self.target}: the load generator only targets loopback")
        if self.clients < 1 or self.duration <= 0 or self.rate < 0:
            raise ValueError("clients >= 1, duration > 0 and rate >= 0 required")

    @property
    def open_loop(self) -> bool:
        return self.rate > 0


def _is_loopback(host: str) -> bool:
    try:
        return all(
            ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None)
        )
    except (OSError, ValueError):
        return False


@dataclass
class Reply:
    status: str
    code: str
    rejected: int = 0
    retry_after: float | None = None


class Sender(Protocol):
    async def send(self, connection: int, body: bytes) -> Reply: ...

    async def close(self) -> None: ...


class GrpcSender:
    """One channel per connection (a local subchannel pool: separate TCP connections)."""

    def __init__(self, config: LoadConfig) -> None:
        address = urlparse(config.target).netloc
        compression = grpc.Compression.Gzip if config.gzip else grpc.Compression.NoCompression
        options = [
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
        ]
        self._channels = [
            grpc.aio.insecure_channel(address, options=options, compression=compression)
            for _ in range(config.clients)
        ]
        self._calls = [channel.unary_unary(EXPORT_METHOD) for channel in self._channels]
        self._timeout = config.timeout

    async def send(self, connection: int, body: bytes) -> Reply:
        call = self._calls[connection % len(self._calls)]
        try:
            response = await call(body, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            if code in RETRYABLE_GRPC:
                return Reply(THROTTLED, code.name, retry_after=_grpc_retry_after(err))
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                return Reply(UNKNOWN, code.name)
            return Reply(FAILED, f"{code.name}: {err.details()}"[:200])
        parsed = PB2ExportTraceServiceResponse.FromString(response)
        return Reply(OK, "OK", parsed.partial_success.rejected_spans)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


def _grpc_retry_after(err: grpc.aio.AioRpcError) -> float | None:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


class HttpSender:
    """OTLP/HTTP over a pool of `clients` keep-alive connections."""

    def __init__(self, config: LoadConfig) -> None:
        self._url = config.target.rstrip("/") + "/v1/traces"
        self._json = config.encoding == JSON
        self._gzip = config.gzip
        self._headers = {
            "Content-Type": "application/json" if self._json else "application/x-protobuf"
        }
        if config.gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=config.clients),
            timeout=aiohttp.ClientTimeout(total=config.timeout),
            auto_decompress=False,
        )

    async def send(self, connection: int, body: bytes) -> Reply:
        if self._gzip:
            body = _gzip(body)
        try:
            async with self._session.post(self._url, data=body, headers=self._headers) as reply:
                content = await reply.read()
                status = reply.status
                retry_after = reply.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError):
            return Reply(UNKNOWN, "connection")
        if status == 200:
            response = PB2ExportTraceServiceResponse()
            if self._json:
                json_format.Parse(content, response, ignore_unknown_fields=True)
            else:
                response.ParseFromString(content)
            return Reply(OK, "200", response.partial_success.rejected_spans)
        if status in RETRYABLE_HTTP:
            return Reply(THROTTLED, str(status), retry_after=float(retry_after or 1))
        return Reply(FAILED, f"{status}: {content[:150]!r}")

    async def close(self) -> None:
        await self._session.close()


def _gzip(body: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(body) + compressor.flush()


@dataclass
class LoadResult:
    config: dict[str, Any]
    requests: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    accepted_spans: int = 0
    accepted_evaluations: int = 0
    accepted_sentinels: int = 0
    rejected_spans: int = 0
    offered_spans: int = 0
    overrun_requests: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    accepted_requests: list[int] = field(default_factory=list)
    unknown_requests: list[int] = field(default_factory=list)
    # request numbers answered with a retryable error, by response code
    retryable_requests: dict[str, list[int]] = field(default_factory=dict)
    timeline_accepted: list[int] = field(default_factory=list)
    timeline_throttled: list[int] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    elapsed_s: float = 0.0
    client_cpu_s: float = 0.0
    mean_request_bytes: float = 0.0


class LoadRun:
    def __init__(self, config: LoadConfig, factory: RequestFactory, sender: Sender) -> None:
        self.config = config
        self.factory = factory
        self.sender = sender
        self._next = config.first_request
        self._statuses: Counter[str] = Counter()
        self._codes: Counter[str] = Counter()
        self._accepted: Counter[int] = Counter()
        self._throttled: Counter[int] = Counter()
        self.result = LoadResult(config=asdict(config))
        self._start = 0.0
        self._deadline = 0.0

    def _take(self) -> int | None:
        """The next request number, or None once the count or time budget is spent."""
        spent = (self._next - self.config.first_request) * self.config.batch
        if self.config.max_spans and spent >= self.config.max_spans:
            return None
        if time.monotonic() >= self._deadline:
            return None
        request_no = self._next
        self._next += 1
        self.result.offered_spans += self.config.batch
        return request_no

    async def _one(self, request_no: int, connection: int, since: float) -> Reply:
        reply = await self.sender.send(connection, self.factory.body(request_no))
        done = time.monotonic()
        second = int(done - self._start)
        self._statuses[reply.status] += 1
        self._codes[reply.code] += 1
        if reply.status == OK:
            template = self.factory.template(request_no)
            accepted = self.config.batch - reply.rejected
            self.result.accepted_spans += accepted
            self.result.accepted_evaluations += template.evaluations
            self.result.accepted_sentinels += template.sentinels
            self.result.rejected_spans += reply.rejected
            self.result.latencies_ms.append((done - since) * 1000)
            self.result.accepted_requests.append(request_no)
            self._accepted[second] += accepted
        elif reply.status == UNKNOWN:
            self.result.unknown_requests.append(request_no)
        elif reply.status == THROTTLED:
            self._throttled[second] += 1
            self.result.retryable_requests.setdefault(reply.code, []).append(request_no)
        return reply

    async def _closed_worker(self, connection: int) -> None:
        while (request_no := self._take()) is not None:
            reply = await self._one(request_no, connection, time.monotonic())
            if reply.status == THROTTLED:
                await asyncio.sleep(min(reply.retry_after or 0.1, 1.0))

    async def _open_loop(self) -> None:
        interval = self.config.batch / self.config.rate
        cap = self.config.max_outstanding or self.config.clients * 64
        pending: set[asyncio.Task[Reply]] = set()
        tick = 0
        while True:
            due = self._start + tick * interval
            if due >= self._deadline:
                break
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if len(pending) >= cap:
                self.result.overrun_requests += 1
                self.result.offered_spans += self.config.batch
                tick += 1
                continue
            request_no = self._take()
            if request_no is None:
                break
            task = asyncio.create_task(self._one(request_no, tick, due))
            pending.add(task)
            task.add_done_callback(pending.discard)
            tick += 1
        if pending:
            await asyncio.gather(*pending)

    async def run(self) -> LoadResult:
        cpu0 = time.process_time()
        self.result.started_at = time.time()
        self._start = time.monotonic()
        self._deadline = self._start + self.config.duration
        try:
            if self.config.open_loop:
                await self._open_loop()
            else:
                await asyncio.gather(*(self._closed_worker(c) for c in range(self.config.clients)))
        finally:
            await self.sender.close()
        self.result.elapsed_s = time.monotonic() - self._start
        self.result.ended_at = time.time()
        self.result.client_cpu_s = time.process_time() - cpu0
        self.result.requests = dict(self._statuses)
        self.result.codes = dict(self._codes)
        seconds = int(self.result.elapsed_s) + 1
        self.result.timeline_accepted = [self._accepted[s] for s in range(seconds)]
        self.result.timeline_throttled = [self._throttled[s] for s in range(seconds)]
        self.result.mean_request_bytes = self.factory.mean_request_bytes
        return self.result


def make_sender(config: LoadConfig) -> Sender:
    if config.target.startswith("grpc://"):
        return GrpcSender(config)
    return HttpSender(config)


async def generate(config: LoadConfig, factory: RequestFactory | None = None) -> LoadResult:
    """Run one bounded load against `config.target` (call inside an event loop)."""
    config.validate()
    spec = PayloadSpec(config.batch, config.sentinel_every, config.tag, minimal=config.minimal)
    factory = factory or RequestFactory(spec, config.encoding)
    return await LoadRun(config, factory, make_sender(config)).run()


def _parse(argv: list[str] | None) -> tuple[LoadConfig, bool]:
    parser = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__)
    parser.add_argument("--target", required=True, help="grpc://127.0.0.1:P or http://...:P")
    parser.add_argument("--encoding", choices=(PROTOBUF, JSON), default=PROTOBUF)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--sentinel-every", type=int, default=64)
    parser.add_argument("--clients", type=int, default=4, help="concurrent connections")
    parser.add_argument("--rate", type=float, default=0.0, help="spans/s (0: closed loop)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds at most")
    parser.add_argument("--max-spans", type=int, default=0, help="spans at most (0: no cap)")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--tag", default="00000000", help="8 characters naming the run")
    parser.add_argument("--first-request", type=int, default=0)
    parser.add_argument("--max-outstanding", type=int, default=0)
    parser.add_argument("--minimal", action="store_true", help="minimal evaluation spans")
    parser.add_argument(
        "--wait-go", action="store_true", help="print READY, start on a line on stdin"
    )
    args = vars(parser.parse_args(argv))
    wait_go = bool(args.pop("wait_go"))
    return LoadConfig(**args), wait_go


def main(argv: list[str] | None = None) -> None:
    config, wait_go = _parse(argv)
    config.validate()
    spec = PayloadSpec(config.batch, config.sentinel_every, config.tag, minimal=config.minimal)
    factory = RequestFactory(spec, config.encoding)
    if wait_go:
        print("READY", flush=True)
        sys.stdin.readline()
    result = asyncio.run(generate(config, factory))
    print(json.dumps(asdict(result)), flush=True)


if __name__ == "__main__":
    main()
