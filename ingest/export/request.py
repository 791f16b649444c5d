"""A parsed export request -> one validated batch: every span validated (`validate`),
the request checked as a whole, rejected spans quarantined; never raises for a bad
span. OpenTelemetry GenAI evaluation results on other spans become events by their
contracts (`genai`): one per evaluated operation.

Every row of a request belongs to the tenant of its `Principal`. Besides the wire
contract's rules, a request is checked as a whole: an evaluation whose agent id the
principal may not write is rejected, and so is a span repeating an earlier span's
event id with different content. A repeat with the same content (whatever its span
ids) is accepted and stored once; its ordinal still counts as arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span
from pydantic import ValidationError

from ingest.export.contracts import ContractBook, check_event
from ingest.export.decode import attributes, jsonable
from ingest.export.domain import attributes_problem
from ingest.export.genai import (
    Operation,
    Operations,
    Result,
    carries_results,
    operation_event,
    result_dimension,
)
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.salvage import is_salvaged, unparsed_spans
from ingest.export.validate import (
    EVALUATION_SPAN,
    OVERRIDE_SPAN,
    SENTINEL_SPAN,
    SpanRejected,
    emission_of,
    evaluation_event,
    is_holonograph_span,
    override_span,
    quarantine_record,
    quarantined_emission,
    sentinel_record,
    unparsed_record,
)
from schemas.events import (
    GENAI_RESULT,
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
    ValidatedBatch,
)
from schemas.overrides import content_digest

MAX_REPORTED_PROBLEMS = 5
# Every rejection for the agent allowlist starts so (replay keeps them rejected).
AGENT_REJECTED = "holonograph.agent.id: not writable with this token"


def authorize(event: EvaluationEvent | OverrideEvent, principal: Principal) -> None:
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
    contracts: ContractBook | None = None
    events: list[EvaluationEvent] = field(default_factory=list)
    emissions: dict[tuple[str, int], EmissionRecord] = field(default_factory=dict)
    quarantined: list[QuarantineRecord] = field(default_factory=list)
    first_of: dict[str, EvaluationEvent] = field(default_factory=dict)
    overrides: dict[str, OverrideEvent] = field(default_factory=dict)
    collapsed: int = 0

    def arrived(self, emission: EmissionRecord) -> None:
        key = (emission.stream, emission.seq)
        known = self.emissions.get(key)
        if known is None or (known.quarantined and not emission.quarantined):
            self.emissions[key] = emission

    def evaluation(self, event: EvaluationEvent) -> None:
        """Raises `SpanRejected` for an agent the principal may not write, what the
        agent's contract forbids, or a repeat of an event id with other content."""
        authorize(event, self.principal)
        if self.contracts is not None:
            event = check_event(self.contracts, self.principal.tenant_id, event)
        first = self.first_of.setdefault(event.event_id, event)
        if first is event:
            self.events.append(event)
        elif same_content(event, first):
            self.collapsed += 1
        else:
            raise _conflict(event, first)
        if event.emission is not None:
            self.arrived(emission_of(event))

    def override(self, override: OverrideEvent) -> None:
        """Raises `SpanRejected` for an agent the principal may not write, or a repeat of
        an override's event id with other content; a repeat with the same content (its
        `content_digest`, as across requests) is stored once, as first sent."""
        authorize(override, self.principal)
        first = self.overrides.setdefault(override.event_id, override)
        if first is not override:
            if content_digest(override) != content_digest(first):
                raise SpanRejected(
                    f"holonograph.event.id: {override.event_id!r} was already sent in this"
                    f" request by span {first.span_id} with different content; one event id"
                    " is one override"
                )
            self.collapsed += 1
        self.arrived(emission_of(override))

    def quarantine(
        self,
        span: PB2Span,
        attrs: dict[str, Any],
        resource: dict[str, Any],
        reason: str,
        source: str,
    ) -> None:
        record = quarantine_record(span, attrs, resource, reason, source)
        self.quarantined.append(record)
        arrived = quarantined_emission(record, span, attrs)
        if arrived is not None:
            self.arrived(arrived)

    def genai(self, operation: Operation, source: str) -> None:
        """One GenAI operation: a result that does not read on its own rejects its span
        (and the span's other results); what no contract decides rejects them all.
        The event is stored once, however many spans its results came in."""
        rejected: dict[int, str] = {}
        readings: list[tuple[Result, str, dict[str, Any]]] = []
        graded: dict[str, dict[str, Any]] = {}
        for result in operation.results:
            if result.source in rejected:
                continue
            try:
                name, read = result_dimension(result)
                first = graded.setdefault(name, result.attrs)
                if first is not result.attrs:
                    if first == result.attrs:
                        continue  # the same result twice (a retried log record): once
                    raise result.rejected(
                        f"evaluation {name!r} is graded twice for one operation, with"
                        " different results"
                    )
                readings.append((result, name, read))
            except SpanRejected as err:
                rejected[result.source] = str(err)
        for index, reason in rejected.items():
            span, attrs, resource = operation.sources[index]
            self.quarantine(span, attrs, resource, reason, source)
        live = [i for i in range(len(operation.sources)) if i not in rejected]
        if not live:
            return
        readings = [r for r in readings if r[0].source not in rejected]
        try:
            event = operation_event(operation, readings, self.contracts, self.principal.tenant_id)
            self.evaluation(event)
        except (SpanRejected, ValidationError) as err:
            for index in live:
                span, attrs, resource = operation.sources[index]
                self.quarantine(span, attrs, resource, _reason(err), source)
            return
        self.collapsed += len(live) - 1

    def batch(self, ignored: int) -> ValidatedBatch:
        return ValidatedBatch.model_construct(
            tenant_id=self.principal.tenant_id,
            agents=self.principal.agents,
            events=tuple(self.events),
            emissions=tuple(self.emissions.values()),
            quarantined=tuple(self.quarantined),
            overrides=tuple(self.overrides.values()),
            ignored_spans=ignored,
            collapsed_spans=self.collapsed,
        )


def validate_request(
    request: PB2ExportTraceServiceRequest,
    source: str = "receiver",
    principal: Principal = ANONYMOUS,
    contracts: ContractBook | None = None,
) -> ValidatedBatch:
    """Validate every span of a request for `principal`, and against the contracts of
    `contracts` (None: no contract check, nothing recorded); never raises for a bad
    span."""
    collected = _Collected(principal, contracts)
    ignored = 0
    salvaged = is_salvaged(request)
    operations = Operations()
    for resource_spans in request.resource_spans:
        resource = jsonable(attributes(resource_spans.resource.attributes))
        # Stored with every event: a value the store cannot hold rejects them all.
        resource_problem = attributes_problem(resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                name = span.name
                if not is_holonograph_span(name):
                    if not carries_results(span):
                        ignored += 1
                    elif (refused := operations.add(span, resource, resource_problem)) is not None:
                        attrs = attributes(span.attributes)
                        collected.quarantine(span, attrs, resource, str(refused), source)
                    continue
                attrs = attributes(span.attributes)
                try:
                    if name == EVALUATION_SPAN:
                        if resource_problem is not None:
                            raise SpanRejected(f"resource attributes: {resource_problem}")
                        collected.evaluation(evaluation_event(span, attrs, resource))
                    elif name == SENTINEL_SPAN:
                        collected.arrived(sentinel_record(span, attrs))
                    elif name == OVERRIDE_SPAN:
                        collected.override(override_span(span, attrs))
                    else:
                        raise SpanRejected(f"span name {name!r} is not in the wire contract")
                except (SpanRejected, ValidationError) as err:
                    collected.quarantine(span, attrs, resource, _reason(err), source)
            if salvaged:  # spans the decoder could not read (see ingest.export.salvage)
                for unparsed in unparsed_spans(scope_spans):
                    head = PB2Span.FromString(unparsed.head)
                    foreign = not is_holonograph_span(head.name) and head.name != GENAI_RESULT
                    if unparsed.named and foreign:
                        ignored += 1  # someone else's span, however unreadable
                        continue
                    attrs = attributes(head.attributes)
                    record = unparsed_record(unparsed, head, attrs, resource, source)
                    collected.quarantined.append(record)
                    arrived = quarantined_emission(record, head, attrs)
                    if arrived is not None:
                        collected.arrived(arrived)
    if operations:
        _genai(request, operations, collected, source)
    return collected.batch(ignored)


def _genai(
    request: PB2ExportTraceServiceRequest,
    operations: Operations,
    collected: _Collected,
    source: str,
) -> None:
    """The request's GenAI operations into `collected`. Results that came without their
    operation's span take its attributes from it when the request holds it (a second
    pass, over only the resources it may be in; that span stays counted as ignored: it
    is not stored)."""
    wanted = operations.wanted
    for resource_spans in request.resource_spans if wanted else ():
        spans = [
            span
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
            if (span.trace_id, span.span_id) in wanted
        ]
        if not spans:
            continue
        resource = jsonable(attributes(resource_spans.resource.attributes))
        problem = attributes_problem(resource)
        for span in spans:
            if not is_holonograph_span(span.name) and not carries_results(span):
                operations.context(span, resource, problem)
    for operation in operations:
        collected.genai(operation, source)
    for unplaced in operations.unplaced:
        collected.quarantine(
            unplaced.span, unplaced.attrs, unplaced.resource, unplaced.reason, source
        )


def _reason(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"
    return str(err)


def span_name(record: QuarantineRecord) -> str:
    return f"span {record.span_id or '?'} ({record.span_name})"


def rejection_message(
    batch: ValidatedBatch,
    noun: str = "span",
    name: Callable[[QuarantineRecord], str] = span_name,
) -> str:
    """`rejected 2 span(s): span <id> (<name>): <reason>; ...`, the first five; `noun`
    and `name` say what the request's items are (a logs request's are log records)."""
    if not batch.quarantined:
        return ""
    problems = [f"{name(q)}: {q.reason}" for q in batch.quarantined[:MAX_REPORTED_PROBLEMS]]
    more = len(batch.quarantined) - len(problems)
    suffix = f"; and {more} more" if more > 0 else ""
    return f"rejected {len(batch.quarantined)} {noun}(s): " + "; ".join(problems) + suffix
