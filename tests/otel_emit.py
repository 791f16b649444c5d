"""Evaluation spans and sentinels built with the official OpenTelemetry SDK tracer
and sent with the official OTLP exporters, the way an instrumented client would."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from holonograph.demo.traffic import SeededIds

BASE_NS = 1_796_046_238_000_000_000  # 2026-11-30T13:43:58Z


@dataclass
class Dim:
    id: str
    passed: bool | None = None
    score: float | None = None
    expected: str | None = None
    actual: str | None = None
    judge: str | None = None

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"holonograph.dimension.id": self.id}
        for name in ("passed", "score", "expected", "actual", "judge"):
            value = getattr(self, name)
            if value is not None:
                attrs[f"holonograph.dimension.{name}"] = value
        return attrs


@dataclass
class Evaluation:
    stream: str
    seq: int
    surface: str = "classify-intent"
    run_mode: str | None = "production"
    event_id: str | None = None
    dims: Sequence[Dim] = field(default_factory=lambda: [Dim("correctness", passed=True)])
    extra: dict[str, Any] = field(default_factory=dict)
    final: bool = False
    end_ns: int | None = None

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "holonograph.event.id": self.event_id or f"evt_{self.stream}_{self.seq}",
            "holonograph.surface.id": self.surface,
            "holonograph.emission.stream": self.stream,
            "holonograph.emission.seq": self.seq,
        }
        if self.run_mode is not None:
            attrs["holonograph.run_mode"] = self.run_mode
        if self.final:
            attrs["holonograph.emission.final"] = True
        attrs.update(self.extra)
        return {k: v for k, v in attrs.items() if v is not None}


@dataclass
class Sentinel:
    stream: str
    seq: int
    final: bool = False
    interval_ms: int | None = 30_000
    counters: dict[str, Any] = field(default_factory=dict)
    end_ns: int | None = None

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "holonograph.emission.stream": self.stream,
            "holonograph.emission.seq": self.seq,
        }
        if self.interval_ms is not None:
            attrs["holonograph.sentinel.interval_ms"] = self.interval_ms
        if self.final:
            attrs["holonograph.emission.final"] = True
        for name, value in self.counters.items():
            attrs[f"holonograph.completeness.{name}"] = value
        return attrs


@dataclass
class Override:
    """A `holonograph.override` span: a human's correction of one call. `original` and
    `corrected` are sent as JSON text (`..._json`: the OpenTelemetry SDK carries only
    primitive attributes); `extra` adds or replaces attributes (None removes one)."""

    stream: str
    seq: int
    correlation_id: str = "corr_000"
    agent: str = "billing-triage"
    surface: str = "classify-intent"
    original: Any = field(default_factory=lambda: {"answer": "Your refund is on its way."})
    corrected: Any = field(default_factory=lambda: {"answer": "Let me look up your refund."})
    rationale: str = "Refund lookup wasn't invoked; agent guessed the refund status."
    tags: Sequence[str] = ("fix_tier=tool-input-schema", "tool=refund_lookup")
    event_id: str | None = None
    run_mode: str = "production"
    extra: dict[str, Any] = field(default_factory=dict)
    end_ns: int | None = None

    def attributes(self) -> dict[str, Any]:
        import json

        attrs: dict[str, Any] = {
            "holonograph.emission.stream": self.stream,
            "holonograph.emission.seq": self.seq,
            "holonograph.agent.id": self.agent,
            "holonograph.surface.id": self.surface,
            "holonograph.correlation.id": self.correlation_id,
            "holonograph.run_mode": self.run_mode,
            "holonograph.override.original_output_json": json.dumps(self.original),
            "holonograph.override.corrected_output_json": json.dumps(self.corrected),
            "holonograph.override.rationale": self.rationale,
            "holonograph.override.tags": list(self.tags),
        }
        if self.event_id is not None:
            attrs["holonograph.event.id"] = self.event_id
        attrs.update(self.extra)
        return {k: v for k, v in attrs.items() if v is not None}


Item = Evaluation | Sentinel | Override


def record_spans(
    items: Iterable[Item],
    seed: int = 7,
    resource: dict[str, Any] | None = None,
    other_spans: int = 0,
) -> list[ReadableSpan]:
    """Build the spans with the SDK tracer, exactly as an instrumented app would."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create(resource or {"service.name": "billing-triage-agent"}),
        id_generator=SeededIds(seed),
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("@holonograph/client", "0.3.0")
    for index, item in enumerate(items):
        end = item.end_ns if item.end_ns is not None else BASE_NS + index * 1_000_000
        if isinstance(item, Evaluation):
            span = tracer.start_span(
                "holonograph.evaluation", attributes=item.attributes(), start_time=end - 5_000_000
            )
            for dim in item.dims:
                span.add_event("holonograph.dimension", dim.attributes(), timestamp=end)
        elif isinstance(item, Override):
            span = tracer.start_span(
                "holonograph.override", attributes=item.attributes(), start_time=end - 5_000_000
            )
        else:
            span = tracer.start_span(
                "holonograph.session.sentinel",
                attributes=item.attributes(),
                start_time=end - 5_000_000,
            )
        span.end(end_time=end)
    for index in range(other_spans):
        tracer.start_span(f"GET /orders/{index}", start_time=BASE_NS).end(end_time=BASE_NS + 1)
    provider.shutdown()
    return list(memory.get_finished_spans())


def grpc_options(endpoint: str, gzip: bool, headers: dict[str, str] | None) -> dict[str, Any]:
    """What every OTLP/gRPC exporter the tests build is given (spans or logs)."""
    from grpc import Compression

    return {
        "endpoint": endpoint,
        "insecure": True,
        "compression": Compression.Gzip if gzip else Compression.NoCompression,
        "timeout": 20,
        "headers": headers,
    }


def http_options(url: str, gzip: bool, headers: dict[str, str] | None) -> dict[str, Any]:
    """What every OTLP/HTTP exporter the tests build is given (spans or logs)."""
    return {
        "endpoint": url,
        "compression": HttpCompression.Gzip if gzip else HttpCompression.NoCompression,
        "timeout": 20,
        "headers": headers,
    }


def export_grpc(
    endpoint: str,
    spans: Sequence[ReadableSpan],
    gzip: bool = False,
    headers: dict[str, str] | None = None,
) -> SpanExportResult:
    exporter = GrpcSpanExporter(**grpc_options(endpoint, gzip, headers))
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def export_http(
    base_url: str,
    spans: Sequence[ReadableSpan],
    gzip: bool = False,
    headers: dict[str, str] | None = None,
) -> SpanExportResult:
    exporter = HttpSpanExporter(**http_options(f"{base_url}/v1/traces", gzip, headers))
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def export_request(spans: Sequence[ReadableSpan]) -> PB2ExportTraceServiceRequest:
    """The protobuf request the exporters would send for these spans."""
    return encode_spans(spans)
