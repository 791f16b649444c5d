"""OpenTelemetry GenAI operations and their evaluation results, built with the official
OpenTelemetry SDK (tracer and logger) and sent with the official OTLP exporters, as an
instrumented application (or OpenLIT) emits them: `gen_ai.evaluation.result` as span
events of the operation span, as spans of that name, or as log records in the
operation's context."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest as PB2ExportLogsServiceRequest,
)
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from holonograph.demo.traffic import SeededIds
from tests.otel_emit import BASE_NS, grpc_options, http_options

RESULT = "gen_ai.evaluation.result"
RESOURCE = {
    "service.name": "billing-api",
    "deployment.environment.name": "production",
}


@dataclass
class Eval:
    """One `gen_ai.evaluation.result`."""

    name: str | None
    score: float | None = None
    label: str | None = None
    explanation: str | None = None
    response_id: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.evaluation.name": self.name,
            "gen_ai.evaluation.score.value": self.score,
            "gen_ai.evaluation.score.label": self.label,
            "gen_ai.evaluation.explanation": self.explanation,
            "gen_ai.response.id": self.response_id,
            "error.type": self.error,
            **self.extra,
        }
        return {k: v for k, v in attrs.items() if v is not None}


@dataclass
class Call:
    """One GenAI operation (a model call) and the results that evaluate it."""

    evals: Sequence[Eval]
    operation: str = "chat"
    agent: str | None = "triage"
    provider: str | None = "openai"
    request_model: str | None = "gpt-5"
    response_model: str | None = "gpt-5-2025-08-07"
    input_tokens: int | None = 153
    output_tokens: int | None = 490
    duration_ns: int = 1_326_297_000
    extra: dict[str, Any] = field(default_factory=dict)
    start_ns: int | None = None  # default: `start_ns(index)`

    def name(self) -> str:
        return f"{self.operation} {self.request_model or ''}".strip()

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": self.operation,
            "gen_ai.agent.name": self.agent,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.request_model,
            "gen_ai.response.model": self.response_model,
            "gen_ai.usage.input_tokens": self.input_tokens,
            "gen_ai.usage.output_tokens": self.output_tokens,
            **self.extra,
        }
        return {k: v for k, v in attrs.items() if v is not None}


def _tracer(resource: dict[str, Any], seed: int) -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource), id_generator=SeededIds(seed))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def start_ns(index: int) -> int:
    return BASE_NS + index * 10_000_000_000


def record_calls(
    calls: Sequence[Call],
    resource: dict[str, Any] | None = None,
    seed: int = 11,
    form: str = "events",
) -> list[ReadableSpan]:
    """The operation spans with their results as span events (`form="events"`), or as
    spans named `gen_ai.evaluation.result` parented to them (`form="spans"`)."""
    provider, memory = _tracer(resource or RESOURCE, seed)
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    for index, call in enumerate(calls):
        start = call.start_ns if call.start_ns is not None else start_ns(index)
        end = start + call.duration_ns
        span = tracer.start_span(
            call.name(), kind=trace.SpanKind.CLIENT, attributes=call.attributes(), start_time=start
        )
        if form == "events":
            for offset, result in enumerate(call.evals):
                span.add_event(RESULT, result.attributes(), timestamp=end + offset + 1)
        span.end(end_time=end)
        if form == "spans":
            context = trace.set_span_in_context(span)
            for offset, result in enumerate(call.evals):
                at = end + 1_000_000 * (offset + 1)
                child = tracer.start_span(
                    RESULT, context=context, attributes=result.attributes(), start_time=at
                )
                child.end(end_time=at)
    provider.shutdown()
    return list(memory.get_finished_spans())


def record_call_logs(
    calls: Sequence[Call],
    resource: dict[str, Any] | None = None,
    seed: int = 11,
    event_name: bool = True,
) -> tuple[list[ReadableSpan], list[ReadableLogRecord]]:
    """The operation spans (without results) and each result as a log record emitted in
    the operation's context, with the event name `gen_ai.evaluation.result` (or, as
    SDKs older than OTLP's `event_name` wrote it, the `event.name` attribute)."""
    provider, memory = _tracer(resource or RESOURCE, seed)
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=Resource.create(resource or RESOURCE))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = logger_provider.get_logger("genai.evaluations", "1.0.0")
    for index, call in enumerate(calls):
        start = start_ns(index)
        end = start + call.duration_ns
        span = tracer.start_span(
            call.name(), kind=trace.SpanKind.CLIENT, attributes=call.attributes(), start_time=start
        )
        span.end(end_time=end)
        context = trace.set_span_in_context(span)
        for offset, result in enumerate(call.evals):
            attrs = result.attributes()
            if not event_name:
                attrs["event.name"] = RESULT
            logger.emit(
                timestamp=end + offset + 1,
                observed_timestamp=end + offset + 1,
                context=context,
                attributes=attrs,
                event_name=RESULT if event_name else None,
            )
    logger.emit(body="GET /orders 200", attributes={"http.route": "/orders"})  # not a result
    provider.shutdown()
    logger_provider.shutdown()
    return list(memory.get_finished_spans()), list(logs.get_finished_logs())


def logs_request(records: Sequence[ReadableLogRecord]) -> PB2ExportLogsServiceRequest:
    """The protobuf request the exporters would send for these log records."""
    return encode_logs(records)


def logs_json(request: PB2ExportLogsServiceRequest) -> bytes:
    """OTLP/JSON: protobuf JSON with trace and span ids in hex."""
    document = json_format.MessageToDict(request)
    for resource_logs in document.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return json.dumps(document).encode()


def export_logs_grpc(
    endpoint: str,
    records: Sequence[ReadableLogRecord],
    gzip: bool = False,
    headers: dict[str, str] | None = None,
) -> LogRecordExportResult:
    exporter = GrpcLogExporter(**grpc_options(endpoint, gzip, headers))
    try:
        return exporter.export(records)
    finally:
        exporter.shutdown()


def export_logs_http(
    base_url: str,
    records: Sequence[ReadableLogRecord],
    gzip: bool = False,
    headers: dict[str, str] | None = None,
) -> LogRecordExportResult:
    exporter = HttpLogExporter(**http_options(f"{base_url}/v1/logs", gzip, headers))
    try:
        return exporter.export(records)
    finally:
        exporter.shutdown()


def genai_contract(
    agent: str = "billing-triage",
    surface: str = "classify-intent",
    genai: dict[str, Any] | None = None,
    dimensions: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """A contract whose `genai` block places the `triage` agent's results on `surface`."""
    return {
        "agentId": agent,
        "surfaces": [{"id": surface, "dimensions": list(dimensions)}],
        "genai": genai
        or {
            "surfaces": [{"surfaceId": surface, "agentName": "triage"}],
            "labels": {"passLabels": ["pass"], "failLabels": ["fail"]},
        },
    }
