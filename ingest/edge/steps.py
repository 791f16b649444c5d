"""What both transports do to a request before and around the export path, in order:

    authenticate (bearer token -> Principal)        Unauthenticated: 401 / UNAUTHENTICATED
      with the `write` scope                        Forbidden: 403 / PERMISSION_DENIED
    wait for the principal's reading turn           Backpressure: 429 / RESOURCE_EXHAUSTED
    read the body in time, at the minimum rate      ReadTimeout / BodyTooSlow: 408
    admit its memory cost and expected queue time   Backpressure: 429 / RESOURCE_EXHAUSTED
    parse, admit its spans' cost, spend the rate    DecodeError / 413 / Backpressure / RateLimited
    export (validate, hand off, answer when durable)

The transports only translate their wire into these steps (`ingest.edge.grpc_server`,
`ingest.edge.http_server`); errors are mapped to codes in `ingest.edge.answers`. Logs
take the same steps (`export_logs`): their log records count as spans do, against the
same limits, and their GenAI evaluation results go down the same export path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest as PB2ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from ingest.edge.admission import (
    NO_MINIMUM_RATE,
    PROTOBUF_EXPANSION,
    Admission,
    Held,
    MinimumRate,
    ReadGate,
)
from ingest.edge.answers import logs_response_for, refusal_reason, response_for
from ingest.edge.auth import Authenticator
from ingest.edge.ratelimit import TenantRateLimiter
from ingest.errors import Forbidden, PayloadTooLarge, ReadTimeout
from ingest.export.decode import parse_json, parse_protobuf
from ingest.export.handler import ExportHandler, ExportOutcome, Signal
from ingest.export.logs import as_spans, parse_logs_json, parse_logs_protobuf, record_count
from ingest.export.principal import Principal

Parse = Callable[[bytes], PB2ExportTraceServiceRequest]
ParseLogs = Callable[[bytes], PB2ExportLogsServiceRequest]


# `serve -v`: one INFO line per export request (principal, counts, latency).
request_log = logging.getLogger("ingest.requests")


def log_request(principal: Principal, outcome: ExportOutcome, started: float) -> None:
    """The request's line: who sent it, what became of its items, how long it took
    (from admission to the answer, the body's arrival excluded)."""
    if request_log.isEnabledFor(logging.INFO):
        request_log.info(
            "%s %s (tenant %s): %d accepted, %d rejected, %d ignored in %.1f ms",
            outcome.signal,
            principal.name or "anonymous",
            principal.tenant_id,
            outcome.accepted_spans,
            outcome.rejected_spans,
            outcome.ignored_spans,
            (time.monotonic() - started) * 1000,
        )


def span_count(request: PB2ExportTraceServiceRequest) -> int:
    count = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            count += len(scope_spans.spans)
    return count


class RefusalObserver(Protocol):
    def observe_refusal(
        self, transport: str, reason: str, error: BaseException | None, peer: str
    ) -> None:
        """A request from `peer` on `transport` was refused for `reason` (a fixed
        vocabulary: `ingest.edge.answers.REFUSAL_REASONS`)."""


class _BodyTimeouts:
    """The body timeouts of the reads in progress, as one timer: a read's deadline is
    noted (`start`) and dropped (`end`), and the timer, armed at the earliest deadline
    of the reads in progress, cancels those past theirs. Per read that is a dict entry,
    where `asyncio.timeout` schedules and cancels a timer (and an object) of its own;
    the timer fires about once a timeout under steady load."""

    __slots__ = ("_at", "_deadlines", "_expired", "_loop", "_timer")

    def __init__(self) -> None:
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._at = 0.0

    def start(self, seconds: float) -> asyncio.Task[Any]:
        """The current task reads a body until `seconds` from now."""
        task = asyncio.current_task()
        assert task is not None
        loop = task.get_loop()
        deadline = loop.time() + seconds
        self._deadlines[task] = deadline
        if self._timer is None or self._loop is not loop or deadline < self._at:
            self._arm(loop, deadline)
        return task

    def end(self, task: asyncio.Task[Any]) -> None:
        del self._deadlines[task]
        if self._expired:
            self._expired.discard(task)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether `task`'s cancellation is its body timeout's (taken back, then: the
        read ends with `ReadTimeout`, not cancelled)."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._loop, self._at = loop, deadline
        self._timer = loop.call_at(deadline, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        earliest: float | None = None
        for task, deadline in self._deadlines.items():
            if deadline > now:
                earliest = deadline if earliest is None else min(earliest, deadline)
            elif task not in self._expired:
                self._expired.add(task)
                task.cancel()
        if earliest is not None:
            self._arm(loop, earliest)


@dataclass
class Edge:
    exporter: ExportHandler[Any]
    authenticator: Authenticator
    reads: ReadGate
    admission: Admission
    limiter: TenantRateLimiter
    max_request_bytes: int
    body_timeout_seconds: float
    refusals: RefusalObserver | None = None
    min_body_rate: MinimumRate = NO_MINIMUM_RATE
    max_request_spans: int = 50_000
    _timeouts: _BodyTimeouts = field(
        default_factory=lambda: _BodyTimeouts(), init=False, repr=False
    )

    def refused(self, transport: str, error: BaseException, peer: str) -> None:
        """Count (and maybe log) a refusal: never one log line per request."""
        if self.refusals is not None:
            self.refusals.observe_refusal(transport, refusal_reason(error), error, peer)

    def authenticate(self, authorization: str | None) -> Principal:
        """The token's principal, which must hold the `write` scope to export."""
        principal = self.authenticator.authenticate(authorization)
        if not principal.may("write"):
            raise Forbidden(
                "this token may not write OTLP data: its scopes are"
                f" {', '.join(sorted(principal.scopes))}; add `write` in the tokens file"
            )
        return principal

    def reader(self, principal: Principal, address: str) -> Hashable:
        """Whose share of the reading turns a body takes: its token's (known only once
        the header arrived, so reading comes after authentication), or without a
        tokens file its client address's."""
        return principal if self.authenticator.enabled else address

    async def read(self, receive: Callable[[], Awaitable[bytes]], reader: Hashable) -> bytes:
        """Receive a body in one of `reader`'s reading turns, within the body timeout.
        Once per request on the event loop: a free turn is taken without a context
        manager's coroutine, and the timeout is a deadline in `_deadlines` that one
        timer sweeps for every request (`_BodyTimeouts`), not a timer of its own."""
        self.admission.check_room()
        reads = self.reads
        if not reads.try_turn(reader):
            await reads.wait_turn(reader)
        timeouts = self._timeouts
        task = timeouts.start(self.body_timeout_seconds)
        try:
            return await receive()
        except asyncio.CancelledError:
            if not timeouts.expired(task):
                raise
            raise ReadTimeout(
                f"the request body did not arrive within {self.body_timeout_seconds:g}s"
            ) from None
        finally:
            timeouts.end(task)
            reads.end_turn(reader)

    async def export(
        self,
        principal: Principal,
        payload: bytes,
        parse: Parse,
        expansion: float = PROTOBUF_EXPANSION,
    ) -> ExportOutcome:
        started = time.monotonic()
        with self.admission.admit(len(payload), expansion) as held:
            request = parse(payload)
            self._take(principal, held, span_count(request), "spans")
            # The protobuf bytes go along: the hot path reads them as they are.
            wire = payload if parse is parse_protobuf else None
            outcome = await self.exporter.export(request, len(payload), principal, wire=wire)
        log_request(principal, outcome, started)
        return outcome

    async def export_logs(
        self,
        principal: Principal,
        payload: bytes,
        parse: ParseLogs,
        expansion: float = PROTOBUF_EXPANSION,
    ) -> ExportOutcome:
        """`export` for a logs request: its log records count as spans do (cost, the
        per-request limit, the tenant's rate), its evaluation results are exported as
        their span form."""
        started = time.monotonic()
        with self.admission.admit(len(payload), expansion) as held:
            logs = parse(payload)
            self._take(principal, held, record_count(logs), "log records")
            spans = as_spans(logs)
            del logs
            signal = Signal("logs", "log record", spans.ignored, spans.names)
            outcome = await self.exporter.export(spans.request, len(payload), principal, signal)
        log_request(principal, outcome, started)
        return outcome

    def _take(self, principal: Principal, held: Held, items: int, noun: str) -> None:
        """A parsed request's `items` (spans, log records): within the per-request limit,
        admitted at their cost, spent from the tenant's rate."""
        if items > self.max_request_spans:
            raise PayloadTooLarge(
                f"request of {items} {noun} exceeds {self.max_request_spans} {noun};"
                " send smaller batches"
            )
        held.spans(items)
        self.limiter.take(principal, items)


@dataclass(frozen=True)
class OtlpSignal:
    """One OTLP signal as the transports serve it: its gRPC method and HTTP path, its
    two body parsers, the edge step that exports it and its answer."""

    name: str
    grpc_method: str
    http_path: str
    parse_protobuf: Callable[[bytes], Any]
    parse_json: Callable[[bytes], Any]
    export: Callable[[Edge, Principal, bytes, Any, float], Awaitable[ExportOutcome]]
    respond: Callable[[ExportOutcome], Message]


TRACES_SIGNAL = OtlpSignal(
    "traces",
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "/v1/traces",
    parse_protobuf,
    parse_json,
    Edge.export,
    response_for,
)
LOGS_SIGNAL = OtlpSignal(
    "logs",
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "/v1/logs",
    parse_logs_protobuf,
    parse_logs_json,
    Edge.export_logs,
    logs_response_for,
)
SIGNALS = (TRACES_SIGNAL, LOGS_SIGNAL)
