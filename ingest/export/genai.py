"""OpenTelemetry GenAI evaluation results -> evaluation events: one event per evaluated
operation, one dimension per result, placed by the contract whose `genai` block maps
them (`schemas.genai`, `docs/genai.md`).

    Operations.add(span)          where the results are: span events named
                                  `gen_ai.evaluation.result` (the span is the operation),
                                  spans of that name (their parent is), log records read
                                  as such spans (`ingest.export.logs`)
    Operations.results()          per operation, the results that map on their own
                                  (the others rejected with their source span)
    operation_event(...)          one operation -> `EvaluationEvent` without ordinals,
                                  or `SpanRejected` naming what no contract decides

Nothing is guessed: a result no contract places, a deployment environment no table maps
to a run mode, a label no rule reads (and no score) are rejected with the reason. An
evaluation that itself failed (`error.type`) has no grade: it becomes no dimension, and
its error is kept in the event's extras.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.export.contracts import ContractBook
from ingest.export.decode import attributes
from ingest.export.domain import attributes_problem, nanos_problem
from ingest.export.validate import SpanRejected, _float, _int, _string, _time_from_nanos
from schemas.contracts import ContractVersion
from schemas.events import EvaluationEvent, default_provenance
from schemas.genai import (
    AGENT_NAME,
    DEPLOYMENT_ENVIRONMENT,
    ERROR_TYPE,
    EVALUATION_NAME,
    EVALUATION_RESULT,
    EXPLANATION,
    INPUT_TOKENS,
    OPERATION_NAME,
    OUTPUT_TOKENS,
    PROVIDER_NAME,
    REQUEST_MODEL,
    RESPONSE_ID,
    RESPONSE_MODEL,
    SCORE_LABEL,
    SCORE_VALUE,
    SDK_NAME,
    SDK_VERSION,
    SERVICE_NAME,
    GenAIMapping,
    read_first,
)

# Every rejection for what no contract decides starts so (metrics label it so).
GENAI_REJECTED = "genai"
EVENT_ID_PREFIX = "evt_g_"


def carries_results(span: PB2Span) -> bool:
    """Whether a span is, or carries, a GenAI evaluation result (on the hot path, for
    every span that is not holonograph's: most have no events at all)."""
    if span.name == EVALUATION_RESULT:
        return True
    events = span.events
    return bool(events) and any(event.name == EVALUATION_RESULT for event in events)


def _valid_ids(trace_id: bytes, span_id: bytes) -> bool:
    return len(trace_id) == 16 and any(trace_id) and len(span_id) == 8 and any(span_id)


@dataclass
class Result:
    """One `gen_ai.evaluation.result`: its attributes, its time, and where it was read
    (`event 2 (gen_ai.evaluation.result)`; '' for a span that is the result)."""

    attrs: dict[str, Any]
    time_ns: int
    where: str
    source: int  # its span's index in `Operation.sources`

    def rejected(self, problem: str) -> SpanRejected:
        return SpanRejected(f"{self.where}: {problem}" if self.where else problem)


@dataclass
class Operation:
    """The GenAI operation some results evaluate, identified by its span (trace id,
    span id) or else by `gen_ai.response.id`; `span` is the operation's own span when
    the request holds it (its attributes, times and resource are the operation's)."""

    trace_id: str
    span_id: str
    response_id: str
    resource: dict[str, Any]
    resource_problem: str | None
    span: PB2Span | None = None
    span_attrs: dict[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    # The spans the results came from, with their attributes and resources: a
    # rejection quarantines them.
    sources: list[tuple[PB2Span, dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    @property
    def event_id(self) -> str:
        if self.span_id:
            key = f"span\x00{self.trace_id}\x00{self.span_id}"
        else:
            key = f"response\x00{self.response_id}"
        return EVENT_ID_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:24]

    def add_source(self, span: PB2Span, attrs: dict[str, Any], resource: dict[str, Any]) -> int:
        self.sources.append((span, attrs, resource))
        return len(self.sources) - 1


@dataclass
class Unplaced:
    """A result span whose operation cannot be told (no parent span, no response id)."""

    span: PB2Span
    attrs: dict[str, Any]
    resource: dict[str, Any]
    reason: str


class Operations:
    """The GenAI operations of one request, in the order their first result came."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str, str], Operation] = {}
        self.unplaced: list[Unplaced] = []
        self._wanted: set[tuple[bytes, bytes]] = set()

    def __bool__(self) -> bool:
        return bool(self._by_key or self.unplaced)

    def add(
        self, span: PB2Span, resource: dict[str, Any], resource_problem: str | None
    ) -> SpanRejected | None:
        """Take the results of a span that `carries_results`; a `SpanRejected` for a
        span that cannot be an operation's (its own ids malformed)."""
        attrs = attributes(span.attributes)
        if span.name == EVALUATION_RESULT:
            self._result_span(span, attrs, resource, resource_problem)
            return None
        trace_id, span_id = span.trace_id, span.span_id
        if not _valid_ids(trace_id, span_id):
            return SpanRejected(
                "trace_id, span_id: a GenAI operation span needs 16 and 8 non-zero bytes,"
                f" got {len(trace_id)} and {len(span_id)}"
            )
        operation = self._operation(trace_id.hex(), span_id.hex(), "", resource, resource_problem)
        self._own(operation, span, attrs, resource, resource_problem)
        source = operation.add_source(span, attrs, resource)
        for index, event in enumerate(span.events):
            if event.name == EVALUATION_RESULT:
                where = f"event {index} ({EVALUATION_RESULT})"
                operation.results.append(
                    Result(attributes(event.attributes), event.time_unix_nano, where, source)
                )
        return None

    def _result_span(
        self,
        span: PB2Span,
        attrs: dict[str, Any],
        resource: dict[str, Any],
        resource_problem: str | None,
    ) -> None:
        trace_id, parent = span.trace_id, span.parent_span_id
        response_id = attrs.get(RESPONSE_ID)
        if _valid_ids(trace_id, parent):
            ids = (trace_id.hex(), parent.hex())
            operation = self._operation(*ids, "", resource, resource_problem)
            if operation.span is None:
                self._wanted.add((trace_id, parent))
        elif isinstance(response_id, str) and response_id:
            operation = self._operation("", "", response_id, resource, resource_problem)
        else:
            self.unplaced.append(
                Unplaced(
                    span,
                    attrs,
                    resource,
                    f"{EVALUATION_RESULT}: not parented to a span (trace and parent span id)"
                    f" and no {RESPONSE_ID}: the operation it evaluates cannot be told",
                )
            )
            return
        source = operation.add_source(span, attrs, resource)
        time_ns = span.end_time_unix_nano or span.start_time_unix_nano
        operation.results.append(Result(attrs, time_ns, "", source))

    def _operation(
        self,
        trace_id: str,
        span_id: str,
        response_id: str,
        resource: dict[str, Any],
        resource_problem: str | None,
    ) -> Operation:
        key = (trace_id, span_id, response_id)
        operation = self._by_key.get(key)
        if operation is None:
            operation = Operation(trace_id, span_id, response_id, resource, resource_problem)
            self._by_key[key] = operation
        return operation

    @staticmethod
    def _own(
        operation: Operation,
        span: PB2Span,
        attrs: dict[str, Any],
        resource: dict[str, Any],
        resource_problem: str | None,
    ) -> None:
        """`span` is the operation's own span: its attributes, times and resource."""
        operation.span, operation.span_attrs = span, attrs
        operation.resource, operation.resource_problem = resource, resource_problem

    @property
    def wanted(self) -> set[tuple[bytes, bytes]]:
        """(trace id, span id) of operations whose results came without their span."""
        by_key = self._by_key
        return {k for k in self._wanted if by_key[(k[0].hex(), k[1].hex(), "")].span is None}

    def context(
        self, span: PB2Span, resource: dict[str, Any], resource_problem: str | None
    ) -> bool:
        """Take `span` as the operation span of results that came without it (True), or
        not (False: it is no such operation's)."""
        key = (span.trace_id.hex(), span.span_id.hex(), "")
        operation = self._by_key.get(key)
        if operation is None or operation.span is not None:
            return False
        self._own(operation, span, attributes(span.attributes), resource, resource_problem)
        return True

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._by_key.values())


# --- one operation -> one event ------------------------------------------------------


def _text(value: Any, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpanRejected(f"{key}: expected a string, got {type(value).__name__}")
    return value


def _operation_value(operation: Operation, key: str) -> Any:
    """An attribute of the operation: its span's, else the one every result carrying
    it agrees on (a log record may copy it from the span it evaluates)."""
    value = read_first(operation.span_attrs, key)
    if value is not None:
        return value
    found = {repr(v): v for r in operation.results if (v := read_first(r.attrs, key)) is not None}
    if len(found) > 1:
        raise SpanRejected(
            f"{key}: the results of one operation disagree ({', '.join(sorted(found))})"
        )
    return next(iter(found.values()), None)


def _place(
    book: ContractBook | None, tenant_id: str, operation: Operation
) -> tuple[ContractVersion, str]:
    """The contract version whose `genai` block places the operation, and the surface."""
    agent_name = _text(_operation_value(operation, AGENT_NAME), AGENT_NAME)
    operation_name = _text(_operation_value(operation, OPERATION_NAME), OPERATION_NAME)
    service_name = _text(operation.resource.get(SERVICE_NAME), f"resource {SERVICE_NAME}")
    names = (
        f"{AGENT_NAME} {agent_name!r}, {OPERATION_NAME} {operation_name!r},"
        f" {SERVICE_NAME} {service_name!r}"
    )
    if book is None:
        raise SpanRejected(
            f"{GENAI_REJECTED}: no contracts are held here, so no genai mapping places"
            f" this evaluation ({names})"
        )
    placed = book.place_genai(tenant_id, agent_name, operation_name, service_name)
    if not placed:
        raise SpanRejected(
            f"{GENAI_REJECTED}: no contract's genai mapping places this evaluation ({names});"
            " map it in its agent's contract (docs/genai.md)"
        )
    if len(placed) > 1:
        which = "; ".join(f"agent {v.agent_id}: {rule.describe()}" for v, rule in placed)
        raise SpanRejected(
            f"{GENAI_REJECTED}: the genai mappings of {len(placed)} contracts place this"
            f" evaluation ({names}): {which}; one evaluation belongs to one surface"
        )
    version, rule = placed[0]
    return version, rule.surface_id


def _run_mode(resource: dict[str, Any], mapping: GenAIMapping, version: ContractVersion) -> str:
    table = mapping.run_mode_table()
    mapped = ", ".join(f"{k} -> {v}" for k, v in table.items())
    where = f"contract of agent {version.agent_id} ({version.version_id}) maps: {mapped}"
    environment = _text(read_first(resource, DEPLOYMENT_ENVIRONMENT), DEPLOYMENT_ENVIRONMENT)
    if not environment:
        raise SpanRejected(
            f"{DEPLOYMENT_ENVIRONMENT}: missing on the resource; a GenAI evaluation's run"
            f" mode comes from it ({where})"
        )
    run_mode = table.get(environment)
    if run_mode is None:
        raise SpanRejected(
            f"{DEPLOYMENT_ENVIRONMENT}: {environment!r} is not mapped to a run mode ({where})"
        )
    return run_mode


def result_dimension(result: Result) -> tuple[str, dict[str, Any]]:
    """A result's evaluation name and what it reads on its own (score, label, error,
    explanation): what every result must have whatever contract places it."""
    try:
        name = _string(result.attrs, EVALUATION_NAME, required=True)
        error = _string(result.attrs, ERROR_TYPE)
        score = _float(result.attrs, SCORE_VALUE)
        label = _string(result.attrs, SCORE_LABEL)
        explanation = _string(result.attrs, EXPLANATION)
    except SpanRejected as err:
        raise result.rejected(str(err)) from None
    if not error and score is None and not label:
        raise result.rejected(
            f"evaluation {name!r}: neither {SCORE_VALUE} nor {SCORE_LABEL} (nor {ERROR_TYPE}"
            " for an evaluation that failed)"
        )
    return name, {"error": error, "score": score, "label": label, "actual": explanation}


def _grade(
    name: str, read: dict[str, Any], result: Result, mapping: GenAIMapping, version: ContractVersion
) -> dict[str, Any]:
    """The dimension of a graded result: `passed` from its label by the contract's rule."""
    passed: bool | None = None
    label = read["label"]
    if label:
        rule = mapping.label_rule(name)
        contract = f"contract of agent {version.agent_id} ({version.version_id})"
        if rule is not None:
            passed = rule.passed(label)
            if passed is None:
                raise result.rejected(
                    f"{SCORE_LABEL}: {label!r} of evaluation {name!r} is neither a pass nor a"
                    f" fail label of the {contract} ({rule.describe()})"
                )
        elif read["score"] is None:
            raise result.rejected(
                f"{SCORE_LABEL}: {label!r} of evaluation {name!r} is no pass or fail: the"
                f" {contract} has no genai label rule for it, and the result has no {SCORE_VALUE}"
            )
    return {
        "dimension_id": name,
        "passed": passed,
        "score": read["score"],
        "actual": read["actual"],
    }


def operation_event(
    operation: Operation,
    results: list[tuple[Result, str, dict[str, Any]]],
    book: ContractBook | None,
    tenant_id: str,
) -> EvaluationEvent:
    """The event of an operation from its results that read on their own (`results`:
    each with its name and `result_dimension` reading); raises `SpanRejected` for what
    no contract decides (placement, run mode, a label) or the store cannot hold."""
    if operation.resource_problem is not None:
        raise SpanRejected(f"resource attributes: {operation.resource_problem}")
    version, surface_id = _place(book, tenant_id, operation)
    mapping = version.contract.genai
    assert mapping is not None
    run_mode = _run_mode(operation.resource, mapping, version)
    dimensions, labels, errors = [], {}, {}
    for result, name, read in results:
        if read["error"]:
            errors[name] = read["error"]
            continue
        dimensions.append(_grade(name, read, result, mapping, version))
        if read["label"]:
            labels[name] = read["label"]
    provider = _text(_operation_value(operation, PROVIDER_NAME), PROVIDER_NAME)
    served = _text(_operation_value(operation, RESPONSE_MODEL), RESPONSE_MODEL)
    requested = _text(_operation_value(operation, REQUEST_MODEL), REQUEST_MODEL)
    light_source = _model_id(provider, served)
    asked = _model_id(provider, requested)
    response_id = operation.response_id or _text(
        _operation_value(operation, RESPONSE_ID), RESPONSE_ID
    )
    extras: dict[str, Any] = {
        key: value
        for key, value in (
            (RESPONSE_ID, response_id),
            (AGENT_NAME, _text(_operation_value(operation, AGENT_NAME), AGENT_NAME)),
            (OPERATION_NAME, _text(_operation_value(operation, OPERATION_NAME), OPERATION_NAME)),
            (SCORE_LABEL, labels),
            (ERROR_TYPE, errors),
        )
        if value
    }
    agent_id = version.agent_id
    provenance = default_provenance(run_mode)
    resource = operation.resource
    problem = attributes_problem(extras)
    if problem is not None:
        raise SpanRejected(problem)
    return EvaluationEvent.model_validate(
        {
            "event_id": operation.event_id,
            "surface_id": surface_id,
            "agent_id": agent_id,
            "correlation_id": operation.trace_id or response_id,
            "run_mode": run_mode,
            "provenance": provenance,
            "timestamp": _time_from_nanos(_event_time(operation, results)),
            "emission": None,
            "trace_id": operation.trace_id,
            "span_id": operation.span_id,
            "substrate": {
                "surface_id": surface_id,
                "agent_id": agent_id,
                "run_mode": run_mode,
                "provenance": provenance,
                "light_source_id": light_source,
            },
            "light_source": {
                "id": light_source,
                "requested": asked if asked != light_source else "",
            },
            "lens": {},
            "outcome": {
                "dimensions": dimensions,
                "latency_ms": _latency_ms(operation),
                "tokens_input": _tokens(operation, INPUT_TOKENS),
                "tokens_output": _tokens(operation, OUTPUT_TOKENS),
            },
            "sdk_name": _text(resource.get(SDK_NAME), f"resource {SDK_NAME}"),
            "sdk_version": _text(resource.get(SDK_VERSION), f"resource {SDK_VERSION}"),
            "resource_attributes": resource,
            "extras": extras,
        }
    )


def _model_id(provider: str, model: str) -> str:
    """`openai/gpt-4o-2024-08-06`: as light sources are named (provider, then model)."""
    if not model:
        return ""
    return f"{provider}/{model}" if provider else model


def _event_time(operation: Operation, results: list[tuple[Result, str, dict[str, Any]]]) -> int:
    """The operation span's end, else its earliest result's time, in unix nanoseconds."""
    span = operation.span
    if span is not None and span.end_time_unix_nano:
        where, nanos = "end_time_unix_nano", span.end_time_unix_nano
    else:
        times = [r.time_ns for r, _, _ in results if r.time_ns]
        if not times:
            raise SpanRejected(
                "time_unix_nano: 0 on every result, and the operation's span is not at hand"
            )
        where, nanos = "time_unix_nano", min(times)
    problem = nanos_problem(nanos)
    if problem is not None:
        raise SpanRejected(f"{where}: {problem}")
    return nanos


def _latency_ms(operation: Operation) -> float | None:
    span = operation.span
    if span is None or not span.start_time_unix_nano:
        return None
    if span.end_time_unix_nano < span.start_time_unix_nano:
        return None
    return (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6


def _tokens(operation: Operation, key: str) -> int | None:
    value = _operation_value(operation, key)
    return _int({key: value}, key)
