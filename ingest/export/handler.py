"""The one export path both transports call: a parsed request -> validated batch ->
hand-off -> the outcome the client is answered with.

    parse (edge) ─► fast_batch, else validate_request (decode thread)
        ─► hand-off prepare (same thread)
        ─► hand-off submit (event loop, returns once durable) ─► ExportOutcome

The hot path (`ingest.export.fast`) takes an all-valid request straight to rows for a
hand-off that takes them; anything else is validated by the reference path.

A request is answered only after the hand-off made its rows durable (committed in
the store, or acknowledged by Kafka with acks=all). Rejected spans become
quarantine rows and an OTLP `partial_success`; the valid spans of the same request
land regardless.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from ingest.export.contracts import ContractBook, finding_kind
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import rejection_message, span_name, validate_request
from ingest.handoff.protocol import AnyBatch, Handoff, PreparedT
from schemas.events import QuarantineRecord

# A request this small (a few spans) is decoded on the event loop: that costs less
# than the hop to the decode thread and back, and holds the loop for well under a
# millisecond.
INLINE_DECODE_BYTES = 16 * 1024


SignalName = Literal["traces", "logs"]


@dataclass(frozen=True)
class Signal:
    """What a request's items are: spans (traces), or log records read as spans
    (`ingest.export.logs`), of which `ignored` were ignored before the export path and
    `names[span id]` names the log record a span stands for."""

    name: SignalName = "traces"
    noun: str = "span"
    ignored: int = 0
    names: Mapping[str, str] = field(default_factory=dict)

    def item(self, record: QuarantineRecord) -> str:
        return self.names.get(record.span_id) or span_name(record)


TRACES = Signal()


@dataclass(frozen=True)
class ExportOutcome:
    """How many of a request's items (spans, or log records: `signal`) were accepted,
    rejected and ignored, and the answer's message."""

    accepted_spans: int
    rejected_spans: int
    ignored_spans: int
    error_message: str
    # Contract findings of the accepted events, by kind (`undeclared-dimension`: 2).
    contract_findings: dict[str, int] = field(default_factory=dict)
    signal: SignalName = "traces"


class ExportObserver(Protocol):
    def observe_export(
        self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]
    ) -> None: ...


class ExportObservers:
    """Several observers as one (metrics and the rejection log)."""

    def __init__(self, *observers: ExportObserver) -> None:
        self._observers = observers

    def observe_export(self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]) -> None:
        for observer in self._observers:
            observer.observe_export(outcome, rejected)


class ExportHandler(Generic[PreparedT]):
    """Shared by gRPC and HTTP: validate, hand off, report partial success."""

    def __init__(
        self,
        handoff: Handoff[PreparedT],
        observer: ExportObserver | None = None,
        contracts: ContractBook | None = None,
    ) -> None:
        self._handoff = handoff
        self._observer = observer
        self.contracts = contracts
        # Decoding runs on one worker thread, off the event loop: the loop stays free to
        # start new handlers, so every request that arrived is counted by the edge's
        # admission (and refused past the budget) instead of waiting unseen in the
        # transport. Small requests are decoded inline (`INLINE_DECODE_BYTES`).
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        self._receipts = ReceiptIds()
        self._fast = bool(getattr(handoff, "takes_fast_batches", False))
        self._fast_json = bool(getattr(handoff, "fast_batch_json", False))
        # `fast_batch_layers` false: the hand-off reads no laid-out dimension rows
        # (version 7 records: `FastBatch.dimension_values`), so none are made.
        self._fast_layers = bool(getattr(handoff, "fast_batch_layers", True))

    def _prepare(
        self,
        request: PB2ExportTraceServiceRequest,
        principal: Principal,
        wire: bytes | None = None,
    ) -> PreparedT:
        batch: AnyBatch | None = None
        if self._fast:
            batch = fast_batch(
                request, principal, self.contracts, self._fast_json, self._fast_layers, wire
            )
        if batch is None:
            batch = validate_request(request, principal=principal, contracts=self.contracts)
        return self._handoff.prepare(batch)

    def close(self) -> None:
        self._decoder.shutdown(wait=True)

    async def export(
        self,
        request: PB2ExportTraceServiceRequest,
        size_bytes: int,
        principal: Principal = ANONYMOUS,
        signal: Signal = TRACES,
        wire: bytes | None = None,
    ) -> ExportOutcome:
        """`principal` is who the edge authenticated; its tenant owns the rows. `signal`:
        what the request's items are called in the answer. `wire`: the protobuf bytes
        `request` was parsed from, when it was (the hot path reads them as they are)."""
        with self._handoff.arriving():
            if size_bytes <= INLINE_DECODE_BYTES:
                prepared = self._prepare(request, principal, wire)
            else:
                loop = asyncio.get_running_loop()
                prepared = await loop.run_in_executor(
                    self._decoder, self._prepare, request, principal, wire
                )
        # No await between leaving `arriving` and `submit` queueing the batch, so a
        # waiting commit sees the request either on its way or in the queue.
        batch = prepared.batch
        if _has_rows(batch):
            batch = await self._handoff.submit(prepared, self._receipts.next(), size_bytes)
        outcome = _outcome(batch, signal)
        if self._observer is not None:
            self._observer.observe_export(outcome, batch.quarantined)
        return outcome


class ReceiptIds:
    """Each request's receipt id: 32 hex digits (as `uuid4().hex` was), a random prefix
    drawn once per handler and a counter, so they stay unique across processes and
    restarts without reading `os.urandom` for every request."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._count = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count):016x}"


def _has_rows(batch: AnyBatch) -> bool:
    if isinstance(batch, FastBatch):
        return bool(batch.rows)
    return bool(batch.events or batch.emissions or batch.quarantined or batch.overrides)


def _outcome(batch: AnyBatch, signal: Signal = TRACES) -> ExportOutcome:
    """What the client is answered for a batch as stored."""
    if isinstance(batch, FastBatch):
        return ExportOutcome(
            accepted_spans=batch.accepted_spans,
            rejected_spans=0,
            ignored_spans=batch.ignored_spans + signal.ignored,
            error_message="",
            contract_findings=batch.finding_counts(),
            signal=signal.name,
        )
    return ExportOutcome(
        accepted_spans=len(batch.events)
        + len(batch.overrides)
        + batch.collapsed_spans
        + sum(e.kind == "sentinel" and not e.quarantined for e in batch.emissions),
        rejected_spans=batch.rejected,
        ignored_spans=batch.ignored_spans + signal.ignored,
        error_message=rejection_message(batch, signal.noun, signal.item),
        contract_findings=dict(
            Counter(finding_kind(f) for e in batch.events for f in e.contract_findings)
        ),
        signal=signal.name,
    )
