"""The one export path both transports call: request -> validated batch -> hand-off.

A request is answered only after the hand-off made its rows durable (committed in
the store, or acknowledged by Kafka with acks=all). Rejected spans become
quarantine rows and an OTLP `partial_success`; the valid spans of the same request
land regardless.

Every row of a request belongs to the tenant of its `Principal`. Besides the wire
contract's rules, a request is checked as a whole: an evaluation whose agent id the
principal may not write is rejected, and so is a span repeating an earlier span's
event id with different content. A repeat with the same content (whatever its span
ids) is accepted and stored once; its ordinal still counts as arrived.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span
from pydantic import ValidationError

from ingest.admission import Admission
from ingest.decode import attributes, jsonable
from ingest.domain import attributes_problem
from ingest.principal import ANONYMOUS, Principal
from ingest.salvage import is_salvaged, unparsed_spans
from ingest.validate import (
    EVALUATION_SPAN,
    SENTINEL_SPAN,
    SpanRejected,
    emission_of,
    evaluation_event,
    is_holonograph_span,
    quarantine_record,
    quarantined_emission,
    sentinel_record,
    unparsed_record,
)
from schemas.events import DecodedBatch, EmissionRecord, EvaluationEvent, QuarantineRecord

MAX_REPORTED_PROBLEMS = 5
# Every rejection for the agent allowlist starts so (replay keeps them rejected).
AGENT_REJECTED = "holonograph.agent.id: not writable with this token"


class Handoff(Protocol):
    """Where validated batches go. `submit` returns once they are durable, with the
    batch as it was stored: spans the store refused for good moved from events and
    emissions to `quarantined` (a hand-off that refuses nothing returns `batch`).
    It raises a `RetryableError` (nothing promised) for the client to retry, or a
    `PermanentError` when the store refused every span of the request."""

    async def submit(
        self, batch: DecodedBatch, receipt_id: str, size_bytes: int
    ) -> DecodedBatch: ...

    async def close(self) -> None: ...


@runtime_checkable
class ScreeningHandoff(Protocol):
    """A hand-off with limits of its own (Kafka's message size): `screen` moves what it
    cannot carry into `quarantined` before submit, so the client is told; `readiness`
    says why it cannot take requests now (None when it can)."""

    def screen(self, batch: DecodedBatch) -> DecodedBatch: ...

    async def readiness(self) -> str | None: ...


@runtime_checkable
class GroupCommitHandoff(Protocol):
    """A hand-off whose commits may wait for requests still being decoded."""

    def arriving(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class ExportOutcome:
    accepted_spans: int
    rejected_spans: int
    ignored_spans: int
    error_message: str


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


def authorize(event: EvaluationEvent, principal: Principal) -> None:
    """Fail-closed: a token restricted to listed agents cannot write an evaluation
    that names no agent."""
    if principal.may_write(event.agent_id):
        return
    if not event.agent_id:
        raise SpanRejected(f"{AGENT_REJECTED}: no agent id, and the token lists its agents")
    raise SpanRejected(f"{AGENT_REJECTED}: {event.agent_id!r} is not one of the token's agents")


def same_content(event: EvaluationEvent, first: EvaluationEvent) -> bool:
    """Equal but for the span's own ids and its ordinal: one event sent twice."""
    update = {"trace_id": first.trace_id, "span_id": first.span_id, "emission": first.emission}
    return event.model_copy(update=update) == first


def _conflict(event: EvaluationEvent, first: EvaluationEvent) -> SpanRejected:
    return SpanRejected(
        f"holonograph.event.id: {event.event_id!r} was already sent in this request by span"
        f" {first.span_id} with different content; one event id is one event"
    )


@dataclass
class _Collected:
    """What a request yields so far. Each (stream, seq) arrives once per request: an
    accepted span's record of it wins over a rejected span's."""

    principal: Principal
    events: list[EvaluationEvent] = field(default_factory=list)
    emissions: dict[tuple[str, int], EmissionRecord] = field(default_factory=dict)
    quarantined: list[QuarantineRecord] = field(default_factory=list)
    first_of: dict[str, EvaluationEvent] = field(default_factory=dict)
    collapsed: int = 0

    def arrived(self, emission: EmissionRecord) -> None:
        key = (emission.stream, emission.seq)
        known = self.emissions.get(key)
        if known is None or (known.quarantined and not emission.quarantined):
            self.emissions[key] = emission

    def evaluation(self, event: EvaluationEvent) -> None:
        """Raises `SpanRejected` for an agent the principal may not write or a repeat of
        an event id with other content."""
        authorize(event, self.principal)
        first = self.first_of.setdefault(event.event_id, event)
        if first is event:
            self.events.append(event)
        elif same_content(event, first):
            self.collapsed += 1
        else:
            raise _conflict(event, first)
        self.arrived(emission_of(event))

    def batch(self, ignored: int) -> DecodedBatch:
        return DecodedBatch.model_construct(
            tenant_id=self.principal.tenant_id,
            events=tuple(self.events),
            emissions=tuple(self.emissions.values()),
            quarantined=tuple(self.quarantined),
            ignored_spans=ignored,
            collapsed_spans=self.collapsed,
        )


def decode_request(
    request: PB2ExportTraceServiceRequest,
    source: str = "receiver",
    principal: Principal = ANONYMOUS,
) -> DecodedBatch:
    """Validate every span of a request for `principal`; never raises for a bad span."""
    collected = _Collected(principal)
    ignored = 0
    salvaged = is_salvaged(request)
    for resource_spans in request.resource_spans:
        resource = jsonable(attributes(resource_spans.resource.attributes))
        # Stored with every event: a value the store cannot hold rejects them all.
        resource_problem = attributes_problem(resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                name = span.name
                if not is_holonograph_span(name):
                    ignored += 1
                    continue
                attrs = attributes(span.attributes)
                try:
                    if name == EVALUATION_SPAN:
                        if resource_problem is not None:
                            raise SpanRejected(f"resource attributes: {resource_problem}")
                        collected.evaluation(evaluation_event(span, attrs, resource))
                    elif name == SENTINEL_SPAN:
                        collected.arrived(sentinel_record(span, attrs))
                    else:
                        raise SpanRejected(f"span name {name!r} is not in the wire contract")
                except (SpanRejected, ValidationError) as err:
                    record = quarantine_record(span, attrs, resource, _reason(err), source)
                    collected.quarantined.append(record)
                    arrived = quarantined_emission(record, span, attrs)
                    if arrived is not None:
                        collected.arrived(arrived)
            if salvaged:  # spans the decoder could not read (see ingest.salvage)
                for unparsed in unparsed_spans(scope_spans):
                    head = PB2Span.FromString(unparsed.head)
                    if unparsed.named and not is_holonograph_span(head.name):
                        ignored += 1  # someone else's span, however unreadable
                        continue
                    attrs = attributes(head.attributes)
                    record = unparsed_record(unparsed, head, attrs, resource, source)
                    collected.quarantined.append(record)
                    arrived = quarantined_emission(record, head, attrs)
                    if arrived is not None:
                        collected.arrived(arrived)
    return collected.batch(ignored)


def _reason(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"
    return str(err)


def rejection_message(batch: DecodedBatch) -> str:
    if not batch.quarantined:
        return ""
    problems = [
        f"span {q.span_id or '?'} ({q.span_name}): {q.reason}"
        for q in batch.quarantined[:MAX_REPORTED_PROBLEMS]
    ]
    more = len(batch.quarantined) - len(problems)
    suffix = f"; and {more} more" if more > 0 else ""
    return f"rejected {len(batch.quarantined)} span(s): " + "; ".join(problems) + suffix


class Exporter:
    """Shared by gRPC and HTTP: validate, hand off, report partial success."""

    def __init__(
        self,
        handoff: Handoff,
        observer: ExportObserver | None = None,
        admission: Admission | None = None,
    ) -> None:
        self._handoff = handoff
        self._observer = observer
        self.admission = admission or Admission(max_bytes=1 << 62)
        # Decoding runs on one worker thread, off the event loop: the loop stays free to
        # start new handlers, so every request that arrived is counted by admission
        # (and refused past the budget) instead of waiting unseen in the transport.
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        # What the hand-off supports, checked once (a runtime protocol check is slow).
        self._screening = handoff if isinstance(handoff, ScreeningHandoff) else None
        self._group_commit = handoff if isinstance(handoff, GroupCommitHandoff) else None

    def _prepare(self, request: PB2ExportTraceServiceRequest, principal: Principal) -> DecodedBatch:
        batch = decode_request(request, principal=principal)
        if self._screening is not None:
            batch = self._screening.screen(batch)
        return batch

    def _arriving(self) -> AbstractContextManager[None]:
        if self._group_commit is not None:
            return self._group_commit.arriving()
        return nullcontext()

    def close(self) -> None:
        self._decoder.shutdown(wait=True)

    async def export(
        self,
        request: PB2ExportTraceServiceRequest,
        size_bytes: int,
        principal: Principal = ANONYMOUS,
    ) -> ExportOutcome:
        """`principal` is who the edge authenticated; its tenant owns the rows."""
        loop = asyncio.get_running_loop()
        with self._arriving():
            batch = await loop.run_in_executor(self._decoder, self._prepare, request, principal)
        # No await between leaving `arriving` and `submit` queueing the batch, so a
        # waiting commit sees the request either on its way or in the queue.
        if batch.events or batch.emissions or batch.quarantined:
            batch = await self._handoff.submit(batch, uuid.uuid4().hex, size_bytes)
        outcome = ExportOutcome(
            accepted_spans=len(batch.events)
            + batch.collapsed_spans
            + sum(e.kind == "sentinel" and not e.quarantined for e in batch.emissions),
            rejected_spans=batch.rejected,
            ignored_spans=batch.ignored_spans,
            error_message=rejection_message(batch),
        )
        if self._observer is not None:
            self._observer.observe_export(outcome, batch.quarantined)
        return outcome
